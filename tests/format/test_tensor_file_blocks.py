""".dat files of tract's block item types (Q4_0, Q8_1): tract executing them as the reference for the values, files
assembled by hand with struct, torch_to_nnef's exports, bad headers, size per weight, and `convert`'s recoding."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import nnef_torch
from nnef_torch.errors import NNEFTensorFileError
from nnef_torch.format import block_quant, tensor_file
from nnef_torch.format.recode import recode

TR = 0x5452 << 16
LINEAR = """version 1.0;

graph G( x ) -> ( y )
{{
    x = external<scalar>(shape = [{k}, {k}]);
    w = variable<scalar>(shape = [{n}, {k}], label = 'w');
    y = linear(x, w, 0.0);
}}
"""


def raw_file(code: int, shape: tuple[int, ...], payload: bytes, *, data_length: int | None = None,
             bits: int = 0xFFFFFFFF) -> bytes:
    """A tensor file assembled by hand, as tract's `Header` struct lays it out (item type u16, then vendor u16)."""
    head = b"\x4e\xef\x01\x00" + struct.pack("<II", len(payload) if data_length is None else data_length, len(shape))
    head += struct.pack("<8I", *(list(shape) + [0] * (8 - len(shape))))
    head += struct.pack("<IHH", bits, code & 0xFFFF, code >> 16)
    return head.ljust(128, b"\0") + payload


def weights(n: int = 8, k: int = 96, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((n, k)) * 2).astype(np.float32)


def tract_linear(folder: Path, dat: bytes, n: int, k: int) -> np.ndarray:
    """tract's y = x w^T for x the identity: w as tract decodes it, transposed."""
    tract = pytest.importorskip("tract", reason="tract executes the file as the reference")
    folder.mkdir(exist_ok=True)
    (folder / "graph.nnef").write_text(LINEAR.format(n=n, k=k))
    (folder / "w.dat").write_bytes(dat)
    model = tract.nnef().load(str(folder)).into_runnable()
    return model.run([np.eye(k, dtype=np.float32)])[0].to_numpy()


# --------------------------------------------------------------------------------------------- tract as oracle

@pytest.mark.parametrize("legacy", [False, True])
def test_q4_0_values_are_tracts(tmp_path, legacy):
    w = weights()
    codes, scales = block_quant.min_max_q4_0(w)
    payload = block_quant.pack_q4_0(codes, scales, legacy=legacy)
    dat = raw_file(TR | (0x2040 if legacy else 0x3040), w.shape, payload)
    ran = tract_linear(tmp_path / "m", dat, *w.shape)
    assert np.array_equal(nnef_torch.read_tensor(dat), ran.T)
    assert np.array_equal(nnef_torch.read_tensor(tmp_path / "m" / "w.dat"), ran.T)


def test_write_tensor_q4_0_round_trips_through_tract(tmp_path):
    w = weights(16, 128, seed=3)
    nnef_torch.write_tensor(tmp_path / "w.dat", w, item_type="q4_0")
    dat = (tmp_path / "w.dat").read_bytes()
    ran = tract_linear(tmp_path / "m", dat, *w.shape)
    assert np.array_equal(nnef_torch.read_tensor(tmp_path / "w.dat"), ran.T)
    assert np.abs(ran.T - w).max() <= np.abs(w).max() / 8  # within a quantization step of the largest block


def test_q4_0_of_a_3d_weight_reads_in_the_variables_shape():
    w = weights(4, 64).reshape(4, 2, 32)
    data = tensor_file.decode(tensor_file.encode(w, item_type="q4_0"), expected_shape=(8, 32))
    assert data.array.shape == (8, 32) and data.header.shape == (4, 2, 32)
    with pytest.raises(NNEFTensorFileError, match="holds 256 values") as caught:
        tensor_file.decode(tensor_file.encode(w, item_type="q4_0"), expected_shape=(8, 16))
    assert caught.value.location.offset == 12


def test_torch_to_nnef_q4_0_export_reads_as_tract_runs_it(tmp_path):
    torch = pytest.importorskip("torch")
    t2n = pytest.importorskip("torch_to_nnef", reason="torch_to_nnef writes the reference export")
    from torch_to_nnef.compress import quantize_weights_min_max_Q4_0

    k, n = 64, 8
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(k, n, bias=False))
    model = quantize_weights_min_max_Q4_0(model)
    stub = tmp_path / "tract"
    stub.write_text("#!/bin/sh\necho tract 0.23.8\n")
    stub.chmod(0o755)
    target = t2n.TractNNEF("0.23.8", specific_tract_binary_path=stub, check_io=False)
    x = torch.eye(k)
    t2n.export_model_to_nnef(model, (x,), tmp_path / "q.nnef", inference_target=target, input_names=["x"],
                             output_names=["y"], compression_level=None)
    folder = tmp_path / "q.nnef"
    (dat,) = folder.glob("*.dat")
    data = tensor_file.decode(dat.read_bytes())
    assert data.header.block == "q4_0" and data.header.code == TR | 0x3040
    tract = pytest.importorskip("tract", reason="tract executes the export as the reference")
    ran = tract.nnef().load(str(folder)).into_runnable().run([x.numpy()])[0].to_numpy()
    with torch.no_grad():
        ours = nnef_torch.load(folder)(x).numpy()
    assert np.array_equal(ours, ran) and np.array_equal(data.array.T, ran)


# ---------------------------------------------------------------------------------------------- file layout

def test_q4_0_stores_4_5_bits_per_weight():
    count = 64 * 4096
    data = tensor_file.encode(np.ones((64, 4096), np.float32), item_type="q4_0")
    assert (len(data) - 128) * 8 / count == 4.5
    assert struct.unpack_from("<IHH", data, 44) == (0xFFFFFFFF, 0x3040, 0x5452)


def test_q8_1_file_by_hand():
    codes = np.arange(-32, 32, dtype=np.int8).reshape(1, 64)
    scales = np.array([[0.25, -0.5]], np.float16)
    payload = b"".join(struct.pack("<ee", float(s), float(np.float16(sum(c * float(s) for c in codes[0, 32 * b:
                                                                                                      32 * b + 32]))))
                       + codes[0, 32 * b: 32 * b + 32].tobytes() for b, s in enumerate(scales[0]))
    for code in (0x3080, 0x3081):  # tract reads 0x3080 and writes 0x3081
        data = tensor_file.decode(raw_file(TR | code, (1, 64), payload))
        assert data.header.block == "q8_1"
        assert data.array.tolist() == [[c * (0.25 if i < 32 else -0.5) for i, c in enumerate(codes[0].tolist())]]
    assert tensor_file.encode_blocks(codes, scales, item_type="q8_1") == raw_file(TR | 0x3080, (1, 64), payload)


def test_header_check_takes_block_files_as_float():
    dat = tensor_file.encode(weights(2, 64), item_type="q4_0")
    tensor_file.header_check(expected_shape=(2, 64), kinds=("float",))(dat[:132], len(dat))


@pytest.mark.parametrize("shape, payload_length, length, offset, message", [
    ((64,), 36, None, 8, "rank of at least 2"),
    ((2, 48), 0, None, 16, "not a multiple of the block size 32"),
    ((2, 64), 72, 70, 4, "data length is 70 bytes but shape \\[2, 64\\] as tract q4_0 needs 72"),
    ((2, 64), 60, 72, 60 + 128, "tensor data truncated"),
])
def test_bad_block_headers(shape, payload_length, length, offset, message):
    dat = raw_file(TR | 0x3040, shape, b"\0" * payload_length, data_length=length)
    with pytest.raises(NNEFTensorFileError, match=message) as caught:
        nnef_torch.read_tensor(dat)
    assert caught.value.location.offset == offset


def test_other_vendor_codes_are_refused_at_the_item_type():
    with pytest.raises(NNEFTensorFileError, match="0x54521000.*not supported; the vendor codes read") as caught:
        nnef_torch.read_tensor(raw_file(TR | 0x1000, (1,), b"\0" * 8, bits=0xFFFFFFFF))
    assert caught.value.location.offset == 48


def test_encode_refuses_shapes_tract_cannot_block():
    with pytest.raises(NNEFTensorFileError, match="rows \\(shape\\[1:\\]\\) of a multiple of 32"):
        tensor_file.encode(np.zeros((4, 40), np.float32), item_type="q4_0")
    with pytest.raises(NNEFTensorFileError, match="rank >= 2"):
        tensor_file.encode(np.zeros(64, np.float32), item_type="q4_0")
    with pytest.raises(ValueError, match="item_type must be one of"):
        tensor_file.encode(np.zeros(64, np.float32), item_type="q2")


def test_f16_item_type():
    data = tensor_file.encode(np.array([1.5, -2.25], np.float32), item_type="f16")
    assert struct.unpack_from("<II", data, 44) == (16, 0)
    assert tensor_file.decode(data).array.dtype == np.float16


# ------------------------------------------------------------------------------------------ convert's recoding

@pytest.mark.parametrize("code", [0x3040, 0x2040, 0x3081])
def test_recode_keeps_block_bytes(code):
    bytes_per_block = 36 if code == 0x3081 else 18
    payload = bytes(range(256))[: 2 * bytes_per_block]
    payload = b"".join(b"\0\x3c" + payload[i + 2: i + bytes_per_block]  # scale 1.0 in each block
                       for i in range(0, len(payload), bytes_per_block))
    raw = raw_file(TR | code, (1, 64), payload)
    data = tensor_file.decode(raw)
    for layout in ("keep", "current"):
        assert recode(data, raw, None, layout, label="w", name="w") == raw
    with pytest.raises(NNEFTensorFileError, match="no seed-layout form"):
        recode(data, raw, None, "seed", label="w", name="w")
