"""Variable labels -> module attribute paths (state_dict keys)."""
from __future__ import annotations

from nnef_torch.importer.naming import label_paths


def test_labels_map_to_dotted_paths():
    assert label_paths(["conv1/filter", "layer1.0.conv1/weight", "a\\b"]) == {
        "conv1/filter": "conv1.filter", "layer1.0.conv1/weight": "layer1.0.conv1.weight", "a\\b": "a.b"}


def test_keywords_and_empty_segments_are_adjusted():
    assert label_paths(["class/def", "x//y"]) == {"class/def": "class_.def_", "x//y": "x._.y"}
    assert label_paths(["half", "to/forward"]) == {"half": "half_", "to/forward": "to_.forward_"}


def test_clashing_labels_fall_back_to_unique_flat_names():
    paths = label_paths(["a", "a/b", "c/d", "c.d", "e/f", "e"])
    assert paths == {"a": "a", "a/b": "a_b", "c/d": "c.d", "c.d": "c_d", "e/f": "e.f", "e": "e_1"}
    assert len(set(paths.values())) == len(paths)
    leaves = set(paths.values())
    for path in leaves:  # no leaf is also a module on another leaf's path
        parts = path.split(".")
        assert not any(".".join(parts[:i]) in leaves for i in range(1, len(parts)))
