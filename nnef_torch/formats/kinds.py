"""The kinds of file given where a model is expected that are not one: told by their first bytes (magic numbers,
the first statement of a text), each with what it is and what to pass instead. A pure function over bytes.

Recognised: an NNEF tensor file (.dat), a graph.quant, MXNet parameters (.params), LightNet weights (.wts), numpy
arrays (.npy, .npz), a PyTorch checkpoint (torch.save: a zip holding data.pkl, or a pickle), any other zip archive,
an ONNX model (a protobuf ModelProto), HDF5 (Keras .h5), TensorFlow Lite, and a binary file of no known kind. NNEF
graph text, tar and gzip archives and JSON are left to their readers.
"""
from __future__ import annotations

import os
import re
import struct

HEAD_BYTES = 512  # what `identify` looks at (a tar header's magic is at byte 257)
_MODEL = "pass the folder that holds graph.nnef (or the graph.nnef, or a .tgz/.tar archive of the folder)"
_QUANT = re.compile(r'"[^"\n]*"\s*:\s*[A-Za-z_][A-Za-z0-9_]*\s*\(')
_WTS = re.compile(r"\d+\r?\n\S+ [0-2] \d+[ \r\n]")
_ONNX_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2}  # ModelProto: field -> wire type
_CONVERT = "convert it to NNEF first (Khronos NNEF-Tools: python -m nnef_tools.convert)"


def identify(head: bytes, path: str) -> str | None:
    """What the file at `path` whose first bytes are `head` (at least HEAD_BYTES of them where the file has them)
    is, said as a sentence that ends in what to pass instead, where it is a known kind of file that is not a model;
    None for NNEF text, archives, JSON and what may be one of them."""
    name = os.path.basename(path)
    lower = name.lower()
    if head.startswith(b"\x4e\xef"):
        return f"an NNEF tensor file (.dat: the data of one variable), not a model: {_MODEL}"
    if head[:8] == struct.pack("<Q", 0x112):
        prefix = re.sub(r"-\d+\.params$", "", name, flags=re.I)
        symbol = f"the {prefix}-symbol.json beside it" if prefix != name else "its -symbol.json"
        return (f"MXNet parameters (.params), not a model: pass {symbol} (it finds the parameters by "
                "name; --params / params= gives another file)")
    if head.startswith(b"\x93NUMPY"):
        return ("a numpy array (.npy), not a model: give it as an input's value "
                "(nnef-torch run --input NAME=FILE.npy)")
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip(head, name)
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return f"an HDF5 file (a Keras .h5 model?), which nnef_torch does not read: {_CONVERT}"
    if head[4:8] == b"TFL3":
        return f"a TensorFlow Lite model, which nnef_torch does not read: {_CONVERT}"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return ("a Python pickle (torch.save's legacy format?), which nnef_torch never unpickles: load the "
                "module in Python and write it with nnef_torch.save, or `nnef-torch export package.module:factory`")
    if (lower.endswith(".onnx") or head[:1] == b"\x08") and _is_model_proto(head):
        return ("an ONNX model, not an NNEF one: read it with nnef_torch.load (the format is told from the file) "
                "or format='onnx'")
    if head.startswith(b"\x1f\x8b") or head[257:262] == b"ustar" or lower.endswith((".tar", ".tgz", ".tar.gz")):
        return None  # an archive: the container reader opens it
    if lower.endswith(".nnef"):
        return None  # graph text by its name: the parser says where it goes wrong
    if b"\x00" in head:
        return ("a binary file of no kind nnef_torch reads: a model is an NNEF folder, a graph.nnef, a "
                ".tar/.tgz archive of the folder, or a JSON file of another format (NNVM, MXNet -symbol.json, "
                "LightNet)")
    return _text(head.decode("utf-8", errors="replace"), name)


def is_onnx(head: bytes, path: str) -> bool:
    """The file whose first bytes are `head` is an ONNX model (a ModelProto): read by `formats.onnx`."""
    return (os.path.basename(path).lower().endswith(".onnx") or head[:1] == b"\x08") and _is_model_proto(head)


def _zip(head: bytes, name: str) -> str:
    """A zip archive: numpy's .npz, a torch.save checkpoint, or another."""
    member = ""
    if head.startswith(b"PK\x03\x04") and len(head) >= 30:
        length = struct.unpack_from("<H", head, 26)[0]
        member = head[30:30 + length].decode("utf-8", errors="replace")
    if member.endswith("data.pkl") or member.endswith("/version") or "/data/" in member:
        return ("a PyTorch checkpoint (torch.save), not a model nnef_torch reads: load the module in "
                "Python and write it with nnef_torch.save, or `nnef-torch export package.module:factory`")
    if name.lower().endswith(".npz") or member.endswith(".npy"):
        return ("a numpy .npz archive of arrays, not a model: give it as the inputs' values "
                "(nnef-torch run --input FILE.npz) or a model's parameters (--params FILE.npz)")
    return ("a zip archive: NNEF archives are .tar, .tgz or .tar.gz; unpack it and pass the folder that "
            "holds graph.nnef, or pack that folder with `tar czf model.tgz -C folder .`")


def _text(text: str, name: str) -> str | None:
    """A text file that is not a graph: a graph.quant, LightNet weights."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    first = next((line for line in lines if line), "")
    if _QUANT.match(first):
        return ("a graph.quant (the quantization of a graph's tensors), not a graph: pass the folder that "
                "holds graph.nnef and graph.quant (the quantization is read with it), or the graph.nnef beside it")
    if _WTS.match(text.lstrip("\ufeff")):
        return "LightNet weights (.wts), not a model: pass the LightNet .json beside it"
    return None


def _is_model_proto(head: bytes) -> bool:
    """The first fields of `head` parse as protobuf fields of an ONNX ModelProto, ir_version first."""
    at, fields = 0, []
    while at < len(head):
        tag, at = _varint(head, at)
        if tag is None:
            break
        field, wire = tag >> 3, tag & 7
        if _ONNX_FIELDS.get(field) != wire:
            return False
        fields.append(field)
        if wire == 0:
            value, at = _varint(head, at)
            if value is None:
                break
        else:
            length, at = _varint(head, at)
            if length is None:
                break
            at += length
    return bool(fields) and fields[0] == 1


def _varint(data: bytes, at: int) -> tuple[int | None, int]:
    """A protobuf varint at `at` and the offset after it; None where `data` ends first or it is too long."""
    value = shift = 0
    while at < len(data) and shift < 64:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
    return None, at


__all__ = ["HEAD_BYTES", "identify", "is_onnx"]
