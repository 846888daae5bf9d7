"""Loop-based numpy references of the NNEF sliding-window ops, written from the spec definitions (4.3, 4.9) for
the cases the Khronos executor does not run (borders other than 'constant'/'ignore', arg-max and sampling,
compounds). Slow and plain on purpose: small shapes only. Nothing here calls torch or nnef_torch.
"""
from __future__ import annotations

import itertools

import numpy as np

_NUMPY_MODES = {"replicate": "edge", "reflect": "reflect", "reflect-even": "symmetric"}


def auto_padding(extents, size, stride, dilation):
    result = []
    for extent, f, s, d in zip(extents, size, stride, dilation):
        out = -(-extent // s)
        total = max(0, (out - 1) * s + (f - 1) * d + 1 - extent)
        result.append((total // 2, total - total // 2))
    return result


def geometry(extents, size, padding, stride, dilation):
    stride = list(stride) or [1] * len(size)
    dilation = list(dilation) or [1] * len(size)
    padding = [tuple(p) for p in padding] or auto_padding(extents, size, stride, dilation)
    return padding, stride, dilation


def border_pad(x: np.ndarray, padding, border: str, value: float = 0.0) -> np.ndarray:
    """x extended by (before, after) per leading dimension under `border`; negative amounts crop."""
    padding = list(padding) + [(0, 0)] * (x.ndim - len(padding))
    grow = [(max(p, 0), max(q, 0)) for p, q in padding]
    if border in ("constant", "ignore"):
        y = np.pad(x, grow, mode="constant", constant_values=value)
    else:
        y = np.pad(x, grow, mode=_NUMPY_MODES[border])
    crop = tuple(slice(-min(p, 0), n - (-min(q, 0))) for n, (p, q) in zip(y.shape, padding))
    return y[crop]


def inside_mask(shape, padding) -> np.ndarray:
    return border_pad(np.ones(shape, dtype=bool), padding, "constant", False)


def _windows(x, size, border, padding, stride, dilation, fill=0.0):
    """(output shape, for each output position: window values and inside flags, row-major in the window)."""
    padding, stride, dilation = geometry(x.shape, size, padding, stride, dilation)
    xp = border_pad(x, padding, border, fill)
    mask = inside_mask(x.shape, padding) if border == "ignore" else np.ones(xp.shape, dtype=bool)
    out = [(n - (f - 1) * d - 1) // s + 1 for n, f, s, d in zip(xp.shape, size, stride, dilation)]
    taps = list(itertools.product(*[range(f) for f in size]))
    result = {}
    for o in itertools.product(*[range(n) for n in out]):
        positions = [tuple(oi * s + j * d for oi, j, s, d in zip(o, tap, stride, dilation)) for tap in taps]
        result[o] = (np.array([xp[p] for p in positions], dtype=np.float64),
                     np.array([mask[p] for p in positions], dtype=bool))
    return out, result


def box(x, size, border="constant", padding=(), stride=(), dilation=(), normalize=False):
    out, windows = _windows(x, size, border, padding, stride, dilation)
    y = np.zeros(out)
    for o, (values, inside) in windows.items():
        y[o] = values[inside].sum()
        if normalize:
            y[o] /= inside.sum() if border == "ignore" else len(values)
    return y


def avg_pool(x, size, border="constant", padding=(), stride=(), dilation=()):
    return box(x, size, border, padding, stride, dilation, normalize=True)


def rms_pool(x, size, border="constant", padding=(), stride=(), dilation=()):
    return np.sqrt(avg_pool(x.astype(np.float64) ** 2, size, border, padding, stride, dilation))


def argmax_pool(x, size, border="constant", padding=(), stride=(), dilation=()):
    out, windows = _windows(x, size, border, padding, stride, dilation)
    y = np.zeros(out, dtype=np.int64)
    for o, (values, inside) in windows.items():
        y[o] = int(np.argmax(np.where(inside, values, -np.inf)))  # np.argmax: the first maximum
    return y


def max_pool(x, size, border="constant", padding=(), stride=(), dilation=()):
    out, windows = _windows(x, size, border, padding, stride, dilation)
    y = np.zeros(out)
    for o, (values, inside) in windows.items():
        y[o] = np.where(inside, values, -np.inf).max()
    return y


def sample(x, index, size, border="constant", padding=(), stride=(), dilation=()):
    out, windows = _windows(x, size, border, padding, stride, dilation)
    y = np.zeros(out)
    for o, (values, _) in windows.items():
        y[o] = values[index[o]]
    return y


def max_pool_with_index(x, size, border="constant", padding=(), stride=(), dilation=()):
    index = argmax_pool(x, size, border, padding, stride, dilation)
    return sample(x, index, size, border, padding, stride, dilation), index


def upscaled_shape(shape, size, padding, stride, dilation, output_shape):
    stride = list(stride) or [1] * len(size)
    dilation = list(dilation) or [1] * len(size)
    if output_shape:
        return list(output_shape)
    if padding:
        return [(n - 1) * s + (f - 1) * d + 1 - p - q
                for n, f, (p, q), s, d in zip(shape, size, padding, stride, dilation)]
    return [n * s for n, s in zip(shape, stride)]


def _reverse_terms(shape, big, size, padding, stride, dilation, border):
    """For each upscaled position i: the (input position k, tap j) pairs with k * s + j * d = i + p.
    Input positions may lie outside [0, shape) (the border decides their value) unless border is 'ignore'."""
    terms = {}
    for i in itertools.product(*[range(n) for n in big]):
        for j in itertools.product(*[range(f) for f in size]):
            t = [ii + p - ji * d for ii, ji, d, (p, _) in zip(i, j, dilation, padding)]
            if any(ti % s for ti, s in zip(t, stride)):
                continue
            k = tuple(ti // s for ti, s in zip(t, stride))
            if border == "ignore" and not all(0 <= ki < n for ki, n in zip(k, shape)):
                continue
            terms.setdefault(i, []).append((k, j))
    return terms


def _extended(x, border, terms, lead=0):
    """x extended under `border` as far as `terms` reach (over its dims after `lead`), and a function from positions
    (of those dims) to values (sub-arrays over the `lead` dims)."""
    ks = [k for pairs in terms.values() for k, _ in pairs] or [(0,) * (x.ndim - lead)]
    margins = [(max(0, -min(k[n] for k in ks)), max(0, max(k[n] for k in ks) - (x.shape[lead + n] - 1)))
               for n in range(x.ndim - lead)]
    xe = border_pad(x, [(0, 0)] * lead + margins, "constant" if border == "ignore" else border)
    return lambda k: xe[(slice(None),) * lead + tuple(ki + before for ki, (before, _) in zip(k, margins))]


def debox(x, size, border="constant", padding=(), stride=(), dilation=(), output_shape=(), normalize=False):
    big = upscaled_shape(x.shape, size, padding, stride, dilation, output_shape)
    padding, stride, dilation = geometry(big, size, padding, stride, dilation)
    terms = _reverse_terms(x.shape, big, size, padding, stride, dilation, border)
    value = _extended(x.astype(np.float64), border, terms)
    y = np.zeros(big)
    for i, pairs in terms.items():
        y[i] = sum(value(k) for k, _ in pairs)
        if normalize:
            y[i] /= len(pairs) if border == "ignore" else np.prod(size)
    return y


def desample(x, index, size, border="constant", padding=(), stride=(), dilation=(), output_shape=()):
    big = upscaled_shape(x.shape, size, padding, stride, dilation, output_shape)
    padding, stride, dilation = geometry(big, size, padding, stride, dilation)
    y = np.zeros(big)
    for k in itertools.product(*[range(n) for n in x.shape]):
        j = np.unravel_index(index[k], size)
        i = tuple(ki * s + ji * d - p for ki, ji, s, d, (p, _) in zip(k, j, stride, dilation, padding))
        if all(0 <= ii < n for ii, n in zip(i, big)):
            y[i] += x[k]
    return y


def _groups(groups, channels):
    return groups or channels


def conv(x, w, bias=0.0, border="constant", padding=(), stride=(), dilation=(), groups=1):
    x, w = x.astype(np.float64), w.astype(np.float64)
    spatial = x.shape[2:]
    padding, stride, dilation = geometry(spatial, w.shape[2:], padding, stride, dilation)
    xp = border_pad(x, [(0, 0), (0, 0)] + list(padding), "constant" if border == "ignore" else border)
    out = [(n - (f - 1) * d - 1) // s + 1 for n, f, s, d in zip(xp.shape[2:], w.shape[2:], stride, dilation)]
    groups = _groups(groups, x.shape[1])
    cin, cout = x.shape[1] // groups, w.shape[0] // groups
    y = np.zeros([x.shape[0], w.shape[0]] + out)
    for o in itertools.product(*[range(n) for n in out]):
        for j in itertools.product(*[range(f) for f in w.shape[2:]]):
            pos = tuple(oi * s + ji * d for oi, ji, s, d in zip(o, j, stride, dilation))
            for g in range(groups):
                patch = xp[(slice(None), slice(g * cin, (g + 1) * cin)) + pos]  # [N, cin]
                taps = w[(slice(g * cout, (g + 1) * cout), slice(None)) + j]  # [cout, cin]
                y[(slice(None), slice(g * cout, (g + 1) * cout)) + o] += patch @ taps.T
    return y + _bias(bias, y.ndim)


def deconv(x, w, bias=0.0, border="constant", padding=(), stride=(), dilation=(), output_shape=(), groups=1):
    x, w = x.astype(np.float64), w.astype(np.float64)
    size = w.shape[2:]
    groups = groups or (output_shape[1] if output_shape else x.shape[1])
    big = upscaled_shape(x.shape[2:], size, padding, stride, dilation, list(output_shape)[2:])
    padding, stride, dilation = geometry(big, size, padding, stride, dilation)
    terms = _reverse_terms(x.shape[2:], big, size, padding, stride, dilation,
                           "ignore" if border in ("constant", "ignore") else border)
    value = _extended(x, border, terms, lead=2)
    cin, cout = x.shape[1] // groups, w.shape[1]
    y = np.zeros([x.shape[0], cout * groups] + list(big))
    for i, pairs in terms.items():
        for k, j in pairs:
            values = value(k)  # [N, C]
            for g in range(groups):
                taps = w[(slice(g * cin, (g + 1) * cin), slice(None)) + j]  # [cin, cout]
                y[(slice(None), slice(g * cout, (g + 1) * cout)) + i] += values[:, g * cin:(g + 1) * cin] @ taps
    return y + _bias(bias, y.ndim)


def _bias(bias, rank):
    if np.isscalar(bias):
        return bias
    bias = np.asarray(bias, dtype=np.float64)
    return bias.reshape(bias.shape + (1,) * (rank - bias.ndim))


def separable_conv(x, plane, point, bias=0.0, border="constant", padding=(), stride=(), dilation=(), groups=1):
    filtered = conv(x, plane, 0.0, border, padding, stride, dilation, groups=0)
    return conv(filtered, point, bias, groups=groups)


def separable_deconv(x, plane, point, bias=0.0, border="constant", padding=(), stride=(), dilation=(),
                     output_shape=(), groups=1):
    filtered = deconv(x, point, 0.0, groups=groups)
    return deconv(filtered, plane, bias, border, padding, stride, dilation, output_shape, groups=0)


def pad(x, padding, border="constant", value=0.0):
    return border_pad(x, padding, border, value)

