"""Import rules of LightNet's detection post-processing ops: sort1d, sort1d_by_key, pick1d, submean,
transform_bboxSQD and detect_yolov3, as TensorLight's kernels (their only implementations) compute them; and of
print and fprint."""
from __future__ import annotations

from typing import Any

import numpy as np

from nnef_torch.formats.lightnet.node import LnNode
from nnef_torch.formats.lightnet.rules.common import LIGHTNET, constant, nnef_type
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule


def _positions(b: Builder, node: LnNode, count: int) -> Any:
    """The positions 0, 1, ... of a vector of `count` items (what a stable sort orders ties by)."""
    return constant(b, np.arange(node.literals("the positions of the sorted items", count), dtype=np.float32),
                    "TL_FLOAT")


@import_rule("lightnet_sort1d", LIGHTNET, "sort1d")
def sort1d(b: Builder, node: LnNode) -> Any:
    """A vector sorted, stably, in the direction `dir`."""
    (count,) = node.rank("src_key", 1)
    node.floating("src_key")
    return b.op("lightnet_sort1d", node.input("src_key"), _positions(b, node, count),
                descending=node.str("dir") == "TL_SORT_DIR_DESCENDING", out_shape=(count,))


@import_rule("lightnet_sort1d_by_key", LIGHTNET, "sort1d_by_key")
def sort1d_by_key(b: Builder, node: LnNode) -> Any:
    """`src_key` sorted, stably, in the direction `dir`, and the TL_INT32 vector `src_val` permuted alike."""
    (count,) = node.rank("src_key", 1)
    node.floating("src_key")
    if node.shape("src_val") != (count,) or node.dtype("src_val") != "TL_INT32":
        raise node.fail(f"'src_val' should be a TL_INT32 vector of {count} items (as 'src_key'), found "
                        f"{node.dtype('src_val')} {list(node.shape('src_val'))}")
    node.out_dtypes["dst_val"] = "TL_INT32"
    return b.op("lightnet_sort1d_by_key", node.input("src_key"), node.input("src_val"),
                _positions(b, node, count), descending=node.str("dir") == "TL_SORT_DIR_DESCENDING",
                out_shape=((count,), (count,)))


@import_rule("lightnet_pick1d", LIGHTNET, "pick1d")
def pick1d(b: Builder, node: LnNode) -> Any:
    """`len` rows of `stride` items picked from the vector `src` by the first `len` items of `src_index`:
    dst[i * stride + j] = src[src_index[i] * stride + j]."""
    (items,) = node.rank("src", 1)
    (indices,) = node.rank("src_index", 1)
    if node.dtype("src_index") != "TL_INT32":
        raise node.fail(f"'src_index' should be TL_INT32, found {node.dtype('src_index')}")
    count, stride = node.int("len"), node.int("stride")
    if not 0 < count <= indices:
        raise node.fail(f"'len' ({count}) should be between 1 and the length of 'src_index' ({indices})")
    if items % stride:
        raise node.fail(f"'stride' ({stride}) should divide the length of 'src' ({items})")
    return b.op("lightnet_pick1d", node.input("src"), node.input("src_index"), count=count, stride=stride,
                out_shape=(count * stride,))


@import_rule("lightnet_submean", LIGHTNET, "submean")
def submean(b: Builder, node: LnNode) -> Any:
    """An image [H, W, 3] less the per-channel `mean`, as [3, H, W] of `dtype` (floating: NNEF subtracts
    scalars; an integer image is converted first)."""
    height, width, channels = node.rank("src", 3)
    dtype = node.str("dtype")
    if channels != 3:
        raise node.fail(f"'src' should be an image of 3 channels [H, W, 3], found {list(node.shape('src'))}")
    if nnef_type(dtype) != "scalar":
        raise node.unsupported(f"'dtype' {dtype}: nnef_torch converts submean to floating types only")
    if node.dtype("src") == "TL_BOOL":
        raise node.fail("'src' should not be TL_BOOL")
    node.out_dtypes["dst"] = dtype
    x = node.input("src")
    if nnef_type(node.dtype("src")) != "scalar":
        x = b.op("cast", x, generic="scalar")
    return b.op("lightnet_submean", x, mean=node.doubles("mean"), out_shape=(channels, height, width))


@import_rule("lightnet_transform_bbox_sqd", LIGHTNET, "transform_bboxSQD")
def transform_bbox_sqd(b: Builder, node: LnNode) -> Any:
    """SqueezeDet's boxes: anchors moved and scaled by the deltas, as corners in the image, clamped to it."""
    shape = node.rank("src_delta", 5)
    if shape[4] != 4:
        raise node.fail(f"the last dimension of 'src_delta' {list(shape)} should be 4")
    if node.dtype("src_delta") != "TL_FLOAT":
        raise node.fail(f"'src_delta' should be TL_FLOAT, found {node.dtype('src_delta')}")
    node.same_type("src_delta", "src_anchor")
    node.same_shape("src_delta", "src_anchor")
    return b.op("lightnet_transform_bbox_sqd", node.input("src_delta"), node.input("src_anchor"),
                **{key: node.int(key) for key in ("width", "height", "img_width", "img_height", "x_shift",
                                                  "y_shift")}, out_shape=shape)


@import_rule("sigmoid", LIGHTNET, "detect_yolov3")
def detect_yolov3(b: Builder, node: LnNode) -> Any:
    """YOLOv3's detection layer: feature [1, A * (5 + classes), H, W] read as [1, A, 5 + classes, H, W], with
    anchors [A, 2] (w, h in pixels). box_centers [1, A, 2, H, W]: (sigmoid + cell) * img / grid; box_sizes: the
    anchor times exp clamped to [1e-9, 50]; boxes [1, A, 4, H, W]: the corners (x_min, y_min, x_max, y_max);
    confs [1, A, 1, H, W] and probs [1, A, classes, H, W]: sigmoids."""
    batch, depth, height, width = node.rank("feature", 4)
    anchors, pair = node.rank("anchors", 2)
    if node.dtype("feature") != "TL_FLOAT" or node.dtype("anchors") != "TL_FLOAT":
        raise node.fail("'feature' and 'anchors' should be TL_FLOAT")
    if batch != 1 or pair != 2 or depth % anchors or depth // anchors <= 5:
        raise node.fail(f"'feature' {list(node.shape('feature'))} should be [1, A * (5 + classes), H, W] for "
                        f"'anchors' [A, 2], found 'anchors' {list(node.shape('anchors'))}")
    features = b.op("reshape", node.input("feature"), shape=[1, anchors, depth // anchors, height, width])
    logistic = b.op("sigmoid", features)

    def part(x: Any, begin: int, end: int) -> Any:
        return b.op("slice", x, axes=[2], begin=[begin], end=[end])

    node.literals("the cells of the grid", width + height)
    grid_x = constant(b, np.arange(width, dtype=np.float32).reshape(1, 1, 1, 1, width), "TL_FLOAT")
    grid_y = constant(b, np.arange(height, dtype=np.float32).reshape(1, 1, 1, height, 1), "TL_FLOAT")
    x_step = float(np.float32(node.int("img_width")) / np.float32(width))
    y_step = float(np.float32(node.int("img_height")) / np.float32(height))
    center_x = b.op("mul", b.op("add", part(logistic, 0, 1), grid_x), x_step)
    center_y = b.op("mul", b.op("add", part(logistic, 1, 2), grid_y), y_step)
    centers = b.op("concat", [center_x, center_y], axis=2)
    scales = b.op("clamp", b.op("exp", part(features, 2, 4)), 1e-9, 50.0)
    sizes = b.op("mul", b.op("reshape", node.input("anchors"), shape=[1, anchors, 2, 1, 1]), scales)
    half = b.op("div", sizes, 2.0)
    boxes = b.op("concat", [b.op("sub", centers, half), b.op("add", centers, half)], axis=2)
    return centers, sizes, boxes, part(logistic, 4, 5), part(logistic, 5, depth // anchors)


def _text(node: LnNode, name: str) -> str:
    """A string param kept in the NNEF document, whose strings hold printable ASCII (and tabs) only."""
    value = node.str(name)
    bad = next((char for char in value if not (char.isascii() and char.isprintable()) and char != "\t"), None)
    if bad is not None:
        raise node.unsupported(f"param '{name}' holds {bad!r}: NNEF strings hold printable ASCII only")
    return value


@import_rule("lightnet_print", LIGHTNET, "print")
def print_(b: Builder, node: LnNode) -> Any:
    """Writes `msg` and the tensor to standard output when the module runs (kept though nothing reads it)."""
    b.op("lightnet_print", node.input("src"), msg=_text(node, "msg"))
    return ()


@import_rule("lightnet_fprint", LIGHTNET, "fprint")
def fprint(b: Builder, node: LnNode) -> Any:
    """Writes `msg` and the tensor to the text file `file` when the module runs."""
    b.op("lightnet_fprint", node.input("src"), msg=_text(node, "msg"), file=_text(node, "file"))
    return ()
