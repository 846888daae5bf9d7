"""NNVM graph JSON and MXNet symbol files (`prefix-symbol.json` with `prefix-NNNN.params`), read with no MXNet
installed: `graph_json` checks the container, `attrs` reads attribute strings, `params` the weights, `convert`
walks the graph with the import rules of `rules/` (MXNet and NNVM operator names)."""
from __future__ import annotations

from nnef_torch.formats.nnvm.convert import FORMAT, read

SHAPES_AT_CALL = True  # a symbol without input shapes is read (its variables), and converted when they are known

__all__ = ["FORMAT", "SHAPES_AT_CALL", "read"]
