"""Shape rules of the LightNet front end's fragments that nnef_torch keeps whole (its print ops and sorts, which
run as their own torch implementations): each keeps its input's shape."""
from __future__ import annotations

from nnef_torch.ops.registry import shape_rule
from nnef_torch.ops.shapes_common import Shape, fail


def _vector(op: str, name: str, shape: Shape) -> None:
    if len(shape) != 1:
        fail(op, f"'{name}' must be a vector, found shape {list(shape)}")


@shape_rule('lightnet_print')
def lightnet_print(input: Shape, *, msg: str) -> Shape:
    return tuple(input)


@shape_rule('lightnet_fprint')
def lightnet_fprint(input: Shape, *, msg: str, file: str) -> Shape:
    # the module writes `file` at each call: only below the working directory, never through '..' or a root
    parts = str(file).replace("\\", "/").split("/")
    if not file or parts[0] == "" or ":" in parts[0] or {"", ".", ".."} & set(parts):
        fail('lightnet_fprint', f"file {str(file)[:80]!r} must be a relative path below the working directory, "
                                "without empty, '.' or '..' parts")
    return tuple(input)


@shape_rule('lightnet_sort1d')
def lightnet_sort1d(key: Shape, positions: Shape, *, descending: bool) -> Shape:
    _vector('lightnet_sort1d', 'key', key)
    if tuple(positions) != tuple(key):
        fail('lightnet_sort1d', f"'positions' must have the shape of 'key' {list(key)}, found {list(positions)}")
    return tuple(key)


@shape_rule('lightnet_sort1d_by_key')
def lightnet_sort1d_by_key(key: Shape, value: Shape, positions: Shape, *, descending: bool) -> tuple[Shape, Shape]:
    _vector('lightnet_sort1d_by_key', 'key', key)
    for name, shape in (('value', value), ('positions', positions)):
        if tuple(shape) != tuple(key):
            fail('lightnet_sort1d_by_key', f"'{name}' must have the shape of 'key' {list(key)}, found {list(shape)}")
    return tuple(key), tuple(value)
