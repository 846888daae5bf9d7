"""ScatterND, ScatterElements and GatherND written with standard NNEF operations. Indices known while converting
become position tables built with numpy: a scatter is then a `gather` of the flattened updates by such a table,
chosen against the data by a constant mask (`select`), once per layer of duplicate targets when they combine
(reduction add, mul, max, min); a GatherND is a `gather` of the flattened data. Indices computed from the inputs
are turned into linear positions with NNEF arithmetic on scalars (GatherND), or compared with each target
position (ScatterElements without reduction)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.formats.onnx.rules.indexing import EXACT_INDEX, ONNX, _indices
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

REDUCTIONS = ("none", "add", "mul", "max", "min")
COMBINE = {"add": "add", "mul": "mul", "max": "max", "min": "min"}
FOLD = {"add": np.add.at, "mul": np.multiply.at, "max": np.maximum.at, "min": np.minimum.at}


def _normalized(node: OnnxNode, index: np.ndarray, extents: np.ndarray | int, what: str) -> np.ndarray:
    """`index` with negative items counted from the end, each checked against its extent."""
    index = index.astype(np.int64)
    if index.size and (np.any(index < -extents) or np.any(index >= extents)):
        raise node.fail(f"{what} outside the data's extents")
    return np.where(index < 0, index + extents, index)


def _layers(targets: np.ndarray, count: int, reduction: str) -> list[np.ndarray]:
    """Position tables (one item per data item: the flat update it takes, or -1) for flat `targets` (an update's
    data item, per update): one table taking the last update of each item without reduction (ONNX leaves
    duplicates undefined), else one per rank of duplicates, every update in exactly one table."""
    order = np.arange(targets.size)
    if reduction == "none":
        table = np.full(count, -1, np.int64)
        np.maximum.at(table, targets, order)
        return [table]
    sort = np.argsort(targets, kind="stable")
    first = np.searchsorted(targets[sort], targets[sort], side="left")
    rank = np.empty_like(order)
    rank[sort] = np.arange(targets.size) - first
    tables = []
    for layer in range(int(rank.max()) + 1 if targets.size else 0):
        table = np.full(count, -1, np.int64)
        table[targets[rank == layer]] = order[rank == layer]
        tables.append(table)
    return tables


def _scatter_known(b: Builder, node: OnnxNode, targets: np.ndarray, reduction: str) -> Any:
    """Data (input 0) with updates (input 2) written at known flat `targets` (shaped like the updates)."""
    shape = node.shape(0)
    count, flat_targets = math.prod(shape), targets.reshape(-1)
    if node.known(0) and node.known(2):
        data, updates = node.const(0).reshape(-1).copy(), node.const(2).reshape(-1)
        if reduction == "none":
            table = _layers(flat_targets, count, reduction)[0]
            data[table >= 0] = updates[table[table >= 0]]
        else:
            FOLD[reduction](data, flat_targets, updates)
        return data.reshape(shape)
    out = node.tensor(0)
    flat_updates = b.op("reshape", node.tensor(2), shape=[int(targets.size)])
    for table in _layers(flat_targets, count, reduction):
        written = (table >= 0).reshape(shape)
        part = b.op("gather", flat_updates, _indices(b, node, np.maximum(table, 0).reshape(shape)), axis=0)
        if reduction != "none":
            part = b.op(COMBINE[reduction], out, part)
        out = part if written.all() else b.op("select", node.as_tensor(written), part, out)
    return out if out is not node.raw(0) else b.op("copy", out)


def _reduction(node: OnnxNode) -> str:
    reduction = node.attr("reduction", "none")
    if reduction not in REDUCTIONS:
        raise node.fail(f"reduction '{reduction}' is not supported (supported: {list(REDUCTIONS)})")
    return str(reduction)


# ------------------------------------------------------------------------------------------------ ScatterND
@import_rule("gather", ONNX, "ScatterND")
def scatter_nd(b: Builder, node: OnnxNode) -> Any:
    """data[index[..., :]] (a slice of the trailing k axes' complement) = updates[...], for every index row."""
    reduction = _reduction(node)
    shape, ishape, ushape = node.shape(0), node.shape(1), node.shape(2)
    if not node.known(1):
        raise node.fail("ScatterND indices computed from the graph's inputs are not supported (the written "
                        "positions must be known while converting)")
    depth = ishape[-1] if ishape else 0
    if not ishape or depth > len(shape) or tuple(ushape) != tuple(ishape[:-1]) + tuple(shape[depth:]):
        raise node.fail(f"indices of shape {list(ishape)} and updates of shape {list(ushape)} do not fit data of "
                        f"shape {list(shape)}")
    index = _normalized(node, node.const(1), np.array(shape[:depth], np.int64), "indices")
    positions = np.arange(math.prod(shape)).reshape(shape)
    targets = positions[tuple(index[..., j] for j in range(depth))]
    return _scatter_known(b, node, targets.reshape(ushape), reduction)


# ------------------------------------------------------------------------------------------------ ScatterElements
@import_rule("select", ONNX, "ScatterElements")
def scatter_elements(b: Builder, node: OnnxNode) -> Any:
    """out[..., index[..., i, ...], ...] = updates[..., i, ...] along `axis`."""
    reduction = _reduction(node)
    shape, ishape, ushape = node.shape(0), node.shape(1), node.shape(2)
    rank = len(shape)
    axis = node.axis(int(node.attr("axis", 0)), rank)
    if tuple(ishape) != tuple(ushape) or len(ishape) != rank or any(
            i > n for d, (i, n) in enumerate(zip(ishape, shape)) if d != axis):
        raise node.fail(f"indices of shape {list(ishape)} and updates of shape {list(ushape)} do not fit data of "
                        f"shape {list(shape)}")
    if node.known(1):
        index = _normalized(node, node.const(1), shape[axis], "indices")
        positions = np.arange(math.prod(shape)).reshape(shape)
        cut = positions[tuple(slice(None) if d == axis else slice(0, i) for d, i in enumerate(ishape))]
        return _scatter_known(b, node, np.take_along_axis(cut, index, axis), reduction)
    if reduction != "none":
        raise node.fail(f"ScatterElements with reduction '{reduction}' and indices computed from the graph's inputs "
                        "is not supported (duplicate targets would have to be combined)")
    return _scatter_compared(b, node, axis)


def _scatter_compared(b: Builder, node: OnnxNode, axis: int) -> Any:
    """ScatterElements at computed indices: for each update row i along `axis` in turn (the last write wins), the
    data items whose place along `axis` equals the row's index take its update (a `select` on an `eq` mask)."""
    shape, ishape = node.shape(0), node.shape(1)
    rank = len(shape)
    index, updates = b.op("cast", node.tensor(1), generic="scalar"), node.tensor(2)
    index = b.op("select", b.op("lt", index, 0.0), b.op("add", index, float(shape[axis])), index)
    padding = [(0, 0 if d == axis else n - i) for d, (i, n) in enumerate(zip(ishape, shape))]
    if any(after for _, after in padding):  # items beyond the indices' extents are never written
        index = b.op("pad", index, padding=padding, border="constant", value=-1.0)
        updates = b.op("pad", updates, padding=padding, border="constant", value=0.0)
    places = np.arange(shape[axis], dtype=np.float32).reshape([-1 if d == axis else 1 for d in range(rank)])
    out = node.tensor(0)
    for i in range(ishape[axis]):
        written = b.op("eq", b.op("slice", index, axes=[axis], begin=[i], end=[i + 1]), node.as_tensor(places))
        out = b.op("select", written, b.op("slice", updates, axes=[axis], begin=[i], end=[i + 1]), out)
    return out if out is not node.raw(0) else b.op("copy", out)


# ------------------------------------------------------------------------------------------------ GatherND
@import_rule("gather", ONNX, "GatherND")
def gather_nd(b: Builder, node: OnnxNode) -> Any:
    """out[β, i...] = data[β, index[β, i..., :]] (β the first `batch_dims` axes): a `gather` of the flattened data
    at linear positions."""
    batch = int(node.attr("batch_dims", 0))
    shape, ishape = node.shape(0), node.shape(1)
    depth = ishape[-1] if ishape else 0
    if not ishape or batch < 0 or batch + depth > len(shape) or batch >= len(ishape) or \
            tuple(ishape[:batch]) != tuple(shape[:batch]):
        raise node.fail(f"indices of shape {list(ishape)} (batch_dims {batch}) do not fit data of shape "
                        f"{list(shape)}")
    count = math.prod(shape)
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    rows, tail = tuple(ishape[:-1]), tuple(shape[batch + depth:])
    tail_offsets = np.arange(math.prod(tail), dtype=np.int64)  # the items of each gathered slice
    batch_offsets = sum((np.indices(rows)[d] * strides[d] for d in range(batch)), np.zeros(rows, np.int64))
    if node.known(1):
        index = _normalized(node, node.const(1), np.array(shape[batch:batch + depth], np.int64), "indices")
        starts = batch_offsets + sum((index[..., j] * strides[batch + j] for j in range(depth)),
                                     np.zeros(rows, np.int64))
        table = (starts[..., None] + tail_offsets).reshape(rows + tail)
        if node.known(0):
            return node.const(0).reshape(-1)[table]
        return b.op("gather", b.op("reshape", node.tensor(0), shape=[count]), _indices(b, node, table), axis=0)
    if count > EXACT_INDEX:
        raise node.fail(f"gathering from {count} items: linear indices computed from the graph's inputs are "
                        f"computed on scalars, exact only up to {EXACT_INDEX}")
    index = b.op("cast", node.tensor(1), generic="scalar")
    starts = None
    for j in range(depth):
        column = b.op("slice", index, axes=[len(ishape) - 1], begin=[j], end=[j + 1])
        extent = float(shape[batch + j])
        column = b.op("select", b.op("lt", column, 0.0), b.op("add", column, extent), column)
        if strides[batch + j] != 1:
            column = b.op("mul", column, float(strides[batch + j]))
        starts = column if starts is None else b.op("add", starts, column)
    offsets = (batch_offsets[..., None] + tail_offsets).astype(np.float32)  # rows + (slice items,)
    if starts is None:
        return b.op("reshape", b.op("gather", b.op("reshape", node.tensor(0), shape=[count]),
                                    _indices(b, node, offsets.astype(np.int64)), axis=0), shape=list(rows + tail))
    if offsets.any():
        starts = b.op("add", starts, node.as_tensor(offsets) if offsets.size > 1 else float(offsets.item()))
    positions = b.op("cast", starts, generic="integer")
    gathered = b.op("gather", b.op("reshape", node.tensor(0), shape=[count]), positions, axis=0)
    return gathered if b.shape(gathered) == rows + tail else b.op("reshape", gathered, shape=list(rows + tail))
