"""Twins of LightNet's ops, written by hand in numpy from the op definitions (`protos/op/*.op`, `ln_util.c`) and
TensorLight's kernels: loops over the definitions, not nnef_torch's code."""
from __future__ import annotations

import math

import numpy as np


def window(x: np.ndarray, size: list[int], stride: list[int], dilation: list[int], padding: list[int],
           fill: float) -> tuple[np.ndarray, list[int]]:
    """The input padded by [top, left, bottom, right] (negative: cropped) with `fill`, and the output extents."""
    top, left, bottom, right = padding
    x = x[:, :, max(0, -top):x.shape[2] - max(0, -bottom), max(0, -left):x.shape[3] - max(0, -right)]
    x = np.pad(x, ((0, 0), (0, 0), (max(0, top), max(0, bottom)), (max(0, left), max(0, right))),
               constant_values=fill)
    extents = [(x.shape[2 + i] - ((size[i] - 1) * dilation[i] + 1)) // stride[i] + 1 for i in range(2)]
    return x, extents


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, *, group: int, stride: list[int], dilation: list[int],
           padding: list[int]) -> np.ndarray:
    size = list(w.shape[2:])
    padded, (oh, ow) = window(x.astype(np.float64), size, stride, dilation, padding, 0.0)
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    per_in, per_out = x.shape[1] // group, w.shape[0] // group
    for o in range(w.shape[0]):
        g = o // per_out
        for i in range(oh):
            for j in range(ow):
                rows = i * stride[0] + dilation[0] * np.arange(size[0])
                cols = j * stride[1] + dilation[1] * np.arange(size[1])
                patch = padded[:, g * per_in:(g + 1) * per_in][:, :, rows][:, :, :, cols]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3)) + b[o]
    return out.astype(np.float32)


def deconv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, *, group: int, stride: list[int], dilation: list[int],
             padding: list[int], output_padding: list[int]) -> np.ndarray:
    """Each input item spreads weight * value over the output (stride apart, dilated); the full result is cropped
    by padding [top, left, bottom, right], extended by output_padding after the end, and biased."""
    n, c, h, wd = x.shape
    per_in, per_out = c // group, w.shape[1]
    size = w.shape[2:]
    full = np.zeros((n, per_out * group, (h - 1) * stride[0] + (size[0] - 1) * dilation[0] + 1 + output_padding[0],
                     (wd - 1) * stride[1] + (size[1] - 1) * dilation[1] + 1 + output_padding[1]))
    for ci in range(c):
        g = ci // per_in
        for i in range(h):
            for j in range(wd):
                for ki in range(size[0]):
                    for kj in range(size[1]):
                        full[:, g * per_out:(g + 1) * per_out, i * stride[0] + ki * dilation[0],
                             j * stride[1] + kj * dilation[1]] += x[:, ci, i, j, None] * w[ci, :, ki, kj]
    top, left, bottom, right = padding
    out = full[:, :, top:full.shape[2] - bottom, left:full.shape[3] - right]
    return (out + b.reshape(1, -1, 1, 1)).astype(np.float32)


def pool(x: np.ndarray, *, size: list[int], stride: list[int], padding: list[int], kind: str) -> np.ndarray:
    """Max or average over the windows' real items (padding is never a maximum and never counted)."""
    padded, (oh, ow) = window(x.astype(np.float64), size, stride, [1, 1], padding, np.nan)
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = padded[:, :, i * stride[0]:i * stride[0] + size[0], j * stride[1]:j * stride[1] + size[1]]
            out[:, :, i, j] = np.nanmax(patch, axis=(2, 3)) if kind == "max" else np.nanmean(patch, axis=(2, 3))
    return out.astype(np.float32)


def batchnorm(x: np.ndarray, scale: np.ndarray, offset: np.ndarray, mean: np.ndarray, var: np.ndarray,
              epsilon: float) -> np.ndarray:
    def c(v: np.ndarray) -> np.ndarray:
        return v.reshape(1, -1, 1, 1).astype(np.float64)
    return ((x - c(mean)) / np.sqrt(c(var) + np.float32(epsilon)) * c(scale) + c(offset)).astype(np.float32)


def nearest(x: np.ndarray, dims: list[int]) -> np.ndarray:
    """TensorLight's nearest resize: source coordinate roundf((dst + 0.5) * scale - 0.5), scale = src / dst as
    floats, the arithmetic in double and the rounding of the float it gives."""
    out = x
    for axis, new in enumerate(dims):
        old = out.shape[axis]
        scale = np.float32(old) / np.float32(new)
        index = []
        for d in range(new):
            value = np.float32((d + 0.5) * float(scale) - 0.5)
            index.append(int(math.copysign(math.floor(abs(float(value)) + 0.5), float(value))))
        out = np.take(out, index, axis=axis)
    return out


def linear(x: np.ndarray, dims: list[int]) -> np.ndarray:
    """Linear interpolation between the items around each target centre ((dst + 0.5) * src / dst - 0.5),
    clamped to the ends."""
    out = x.astype(np.float64)
    for axis, new in enumerate(dims):
        old = out.shape[axis]
        if old == new:
            continue
        pieces = []
        for d in range(new):
            position = min(max((d + 0.5) * old / new - 0.5, 0.0), old - 1)
            low = int(math.floor(position))
            high = min(low + 1, old - 1)
            weight = position - low
            pieces.append(np.take(out, [low], axis=axis) * (1 - weight) + np.take(out, [high], axis=axis) * weight)
        out = np.concatenate(pieces, axis=axis)
    return out.astype(np.float32)


def stable_sort(key: np.ndarray, descending: bool) -> np.ndarray:
    """The permutation sorting `key`, equal keys keeping their order."""
    items = list(range(len(key)))
    return np.array(sorted(items, key=lambda i: (-key[i] if descending else key[i], i)), dtype=np.int64)


def bbox_sqd(delta: np.ndarray, anchor: np.ndarray, width: int, height: int, img_width: int, img_height: int,
             x_shift: int, y_shift: int) -> np.ndarray:
    out = np.zeros_like(delta)
    x_scale, y_scale = img_width / width, img_height / height
    flat_d, flat_a, flat_o = delta.reshape(-1, 4), anchor.reshape(-1, 4), out.reshape(-1, 4)
    for (dx, dy, dw, dh), (ax, ay, aw, ah), o in zip(flat_d.astype(np.float64), flat_a.astype(np.float64), flat_o):
        cx = (ax + dx * aw) * x_scale + x_shift
        cy = (ay + dy * ah) * y_scale + y_shift
        w = aw * (math.exp(dw) if dw < 1 else dw * 2.718281828) * x_scale
        h = ah * (math.exp(dh) if dh < 1 else dh * 2.718281828) * y_scale
        o[:] = [min(max(cx - w / 2, 0), img_width - 1), min(max(cy - h / 2, 0), img_height - 1),
                max(min(cx + w / 2, img_width - 1), 0), max(min(cy + h / 2, img_height - 1), 0)]
    return out


def yolov3(feature: np.ndarray, anchors: np.ndarray, img_width: int, img_height: int) -> list[np.ndarray]:
    """box_centers, box_sizes, boxes, confs, probs, per anchor a, channel, row i and column j."""
    count = anchors.shape[0]
    _, depth, grid_h, grid_w = feature.shape
    f = feature.reshape(count, depth // count, grid_h, grid_w).astype(np.float64)
    sig = 1 / (1 + np.exp(-f))
    centers = np.zeros((1, count, 2, grid_h, grid_w))
    sizes = np.zeros((1, count, 2, grid_h, grid_w))
    for a in range(count):
        for i in range(grid_h):
            for j in range(grid_w):
                centers[0, a, :, i, j] = [(sig[a, 0, i, j] + j) * img_width / grid_w,
                                          (sig[a, 1, i, j] + i) * img_height / grid_h]
                sizes[0, a, :, i, j] = [anchors[a, k] * min(max(math.exp(f[a, 2 + k, i, j]), 1e-9), 50)
                                        for k in range(2)]
    boxes = np.concatenate([centers - sizes / 2, centers + sizes / 2], axis=2)
    return [v.astype(np.float32) for v in (centers, sizes, boxes, sig[None, :, 4:5], sig[None, :, 5:])]
