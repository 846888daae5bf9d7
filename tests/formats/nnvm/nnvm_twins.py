"""Twins of NNVM operators for `nnvm_op_rows.py`, written by hand from NNVM's documented meaning (and TVM's
kernels where the documentation is silent): element by element where the meaning is a loop, in torch or numpy."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


def t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x))

def resize_twin(x: np.ndarray, size: tuple[int, int], bilinear: bool, align_corners: bool = False) -> np.ndarray:
    """TVM's resize of an NCHW array, element by element: nearest reads index i * in // out; bilinear the
    coordinate i * ratio in float32, between its floor and its ceiling clamped to the last index."""
    n, c, h, w = x.shape
    out = np.zeros((n, c) + tuple(size), np.float32)
    if not bilinear:
        for i in range(size[0]):
            for j in range(size[1]):
                out[:, :, i, j] = x[:, :, i * h // size[0], j * w // size[1]]
        return out

    def ratio(extent: int, target: int) -> np.float32:
        if align_corners:
            return np.float32((extent - 1) / (target - 1)) if target > 1 else np.float32(0)
        return np.float32(extent / target)

    ry, rx = ratio(h, size[0]), ratio(w, size[1])
    for i in range(size[0]):
        for j in range(size[1]):
            y, xx = np.float32(i) * ry, np.float32(j) * rx
            y0, x0 = int(math.floor(y)), int(math.floor(xx))
            y1, x1 = min(int(math.ceil(y)), h - 1), min(int(math.ceil(xx)), w - 1)
            ly, lx = y - y0, xx - x0
            out[:, :, i, j] = (x[:, :, y0, x0] * (1 - lx) * (1 - ly) + x[:, :, y0, x1] * lx * (1 - ly)
                               + x[:, :, y1, x0] * (1 - lx) * ly + x[:, :, y1, x1] * lx * ly)
    return out


def pool_twin(x: np.ndarray, kernel: int, stride: int, pads: tuple[int, int, int, int], ceil: bool, kind: str,
              include_pad: bool = False) -> np.ndarray:
    """TVM's pool2d on NCHW: pads (top, left, bottom, right), ceil_mode extends the bottom and right; max ignores
    padding, avg divides by the whole window with count_include_pad and by the input items in it otherwise."""
    n, c, h, w = x.shape
    top, left, bottom, right = pads
    rows = (h + top + bottom - kernel + (stride - 1 if ceil else 0)) // stride + 1
    cols = (w + left + right - kernel + (stride - 1 if ceil else 0)) // stride + 1
    out = np.zeros((n, c, rows, cols), np.float32)
    for i in range(rows):
        for j in range(cols):
            y0, x0 = i * stride - top, j * stride - left
            ys = [y for y in range(y0, y0 + kernel) if 0 <= y < h]
            xs = [v for v in range(x0, x0 + kernel) if 0 <= v < w]
            window = x[:, :, ys][:, :, :, xs]
            if kind == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                out[:, :, i, j] = window.sum(axis=(2, 3)) / (kernel * kernel if include_pad else len(ys) * len(xs))
    return out


def prior_twin(x: np.ndarray, sizes: list[float], ratios: list[float], steps: tuple[float, float] = (-1, -1),
               offsets: tuple[float, float] = (0.5, 0.5), clip: bool = False) -> np.ndarray:
    """multibox_prior, box by box: per cell, one box per size at the first ratio, then one per further ratio at the
    first size, as (xmin, ymin, xmax, ymax)."""
    _, _, h, w = x.shape
    step_y = steps[0] if steps[0] > 0 else 1.0 / h
    step_x = steps[1] if steps[1] > 0 else 1.0 / w
    boxes = []
    for i in range(h):
        for j in range(w):
            cy, cx = (i + offsets[0]) * step_y, (j + offsets[1]) * step_x
            shapes = [(s * h / w / 2, s / 2) for s in sizes]
            shapes += [(sizes[0] * h / w * math.sqrt(r) / 2, sizes[0] / math.sqrt(r) / 2) for r in ratios[1:]]
            boxes += [[cx - bw, cy - bh, cx + bw, cy + bh] for bw, bh in shapes]
    out = np.array(boxes, np.float32)[None]
    return np.clip(out, 0, 1) if clip else out


def reorg_twin(x: np.ndarray, stride: int) -> np.ndarray:
    """Darknet's reorg_cpu with forward = 0, one sample at a time, on flat arrays."""
    n, c, h, w = x.shape
    out_c = c // (stride * stride)
    out = np.zeros(x.size, np.float32)
    flat = x.reshape(-1)
    for b in range(n):
        for k in range(c):
            for j in range(h):
                for i in range(w):
                    in_index = i + w * (j + h * (k + c * b))
                    c2, offset = k % out_c, k // out_c
                    w2, h2 = i * stride + offset % stride, j * stride + offset // stride
                    out[in_index] = flat[w2 + w * stride * (h2 + h * stride * (c2 + out_c * b))]
    return out.reshape(n, c * stride * stride, h // stride, w // stride)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def region_twin(x: np.ndarray, count: int, classes: int, coords: int, background: int, use_softmax: int
                ) -> np.ndarray:
    """Darknet's region layer: per box, logistic on x, y and (without background) the objectness; a softmax over
    the class scores."""
    n, c, h, w = x.shape
    entries = classes + coords + 1
    out = x.reshape(n, count, entries, h, w).copy()
    out[:, :, 0:2] = sigmoid(out[:, :, 0:2])
    if not background:
        out[:, :, coords] = sigmoid(out[:, :, coords])
    if use_softmax:
        first = coords + (0 if background else 1)
        out[:, :, first:] = softmax(out[:, :, first:], 2)
    return out.reshape(n, c, h, w)


def yolo_twin(x: np.ndarray, count: int, classes: int) -> np.ndarray:
    n, c, h, w = x.shape
    out = x.reshape(n, count, classes + 5, h, w).copy()
    out[:, :, :2] = sigmoid(out[:, :, :2])
    out[:, :, 4:] = sigmoid(out[:, :, 4:])
    return out.reshape(n, c, h, w)


def argreduce(x: np.ndarray, axes: tuple[int, ...], keepdims: bool, largest: bool) -> np.ndarray:
    """The index within the reduced axes (row-major over them) of the first extreme item."""
    kept = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, kept + list(axes))
    flat = moved.reshape([x.shape[a] for a in kept] + [-1])
    found = (np.argmax if largest else np.argmin)(flat, axis=-1).astype(np.int32)
    if keepdims:
        return found.reshape([1 if a in axes else x.shape[a] for a in range(x.ndim)])
    return found.reshape([x.shape[a] for a in kept] or [1])


def blocked(x: np.ndarray, block: int) -> np.ndarray:
    """NCHW -> NCHW{block}c."""
    n, c, h, w = x.shape
    return x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2)


def nchwc_conv_twin(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> torch.Tensor:
    """conv2d in NCHW4c with OIHW4i4o weights: unpack to NCHW / OIHW, convolve, pack again."""
    n, outer, h, wd, block = x.shape
    data = t(x).permute(0, 1, 4, 2, 3).reshape(n, outer * block, h, wd)
    o, i, kh, kw, bi, bo = w.shape
    weight = t(w).permute(0, 5, 1, 4, 2, 3).reshape(o * bo, i * bi, kh, kw)
    y = F.conv2d(data, weight, t(b).reshape(-1), padding=1)
    return y.reshape(n, o, bo, h, wd).permute(0, 1, 3, 4, 2)
