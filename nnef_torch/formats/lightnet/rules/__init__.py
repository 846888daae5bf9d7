"""Import rules of LightNet optypes, registered in the op table's `lightnet` facet; the optypes only LightNet's
optimizers write (compiled IRs) are recorded as refused, with what each is."""
from nnef_torch.formats.lightnet.optypes import BACKEND_ONLY
from nnef_torch.formats.lightnet.rules import detection, nn, tensor  # noqa: F401
from nnef_torch.formats.lightnet.rules.common import LIGHTNET
from nnef_torch.ops.registry import refuse_import

for _optype, _what in BACKEND_ONLY.items():
    refuse_import(LIGHTNET, f"{_what}: it appears in compiled IRs only; nnef_torch reads the generic IR", _optype)
