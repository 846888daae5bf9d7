"""NNVM graph JSON and MXNet symbol files (`prefix-symbol.json` with `prefix-NNNN.params`), read with no MXNet
installed: `graph_json` checks the container, `attrs` reads attribute strings, `params` the weights, `convert`
walks the graph with the import rules of `rules/` (MXNet and NNVM operator names)."""
from __future__ import annotations

from nnef_torch.formats.nnvm.convert import FORMAT, read

__all__ = ["FORMAT", "read"]
