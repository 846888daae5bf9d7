"""The parts of a network: functions (NNEF operations) and variables (tensors), as `graph_def` shows them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nnef_torch.errors import Location
from nnef_torch.ir.graph import Operation

# what a variable is in its network
INPUT, PARAMETER, BUFFER, ACTIVATION = "input", "parameter", "buffer", "activation"


@dataclass
class ProtoVariable:
    """A tensor of a network: an input (`external`), a parameter (`variable`), a buffer (a variable written by
    `update`, or state by a front end's knowledge) or an activation (an operation's result). Parameters and
    buffers are named by their tensor name and keep their label (the name of their data, shared across the
    networks of a ProtoGraph). `need_grad` is true for parameters until a pass fixes them."""

    shape: tuple[int, ...] | None
    name: str
    need_grad: bool = False
    kind: str = ACTIVATION
    dtype: str | None = "scalar"
    label: str | None = None


@dataclass
class ProtoFunction:
    """One operation of a network. `name` is its first result's tensor name (unique in the network), `type` the
    NNEF operation, `inputs` and `outputs` the tensor names it reads and writes (tensor arrays flattened), and
    `attributes` its attributes with any literal given for a tensor input. `location` is where it was written."""

    name: str
    type: str
    inputs: list[str]
    outputs: list[str]
    attributes: dict[str, Any] = field(default_factory=dict)
    location: Location | None = None
    operation: Operation | None = field(default=None, repr=False)  # the IR operation it stands for
