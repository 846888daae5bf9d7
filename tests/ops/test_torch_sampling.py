"""Torch implementations of up- and down-sampling, the local normalizations and the RoI ops.

References: the Khronos executor, which runs multilinear_upsample only for factor 2, 'symmetric' / 'asymmetric'
and 'constant' / 'replicate' borders, and the other resampling ops and the local normalizations only lowered into
their stdlib bodies (box, debox, ...): `khronos(op, lowered=[op])`. Everything else (other factors, methods and
borders; the RoI ops, which it cannot run at all) has a numpy function written here from the definition.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np
import pytest
import torch
from ops.test_torch_tensor import khronos  # the one-op Session document with lowering (not in the harness yet)
from ops.torch_harness import OpCase, case_ids, check_case, gradcheck_case

import nnef_torch.ops.torch_sampling  # noqa: F401  (registers the ops)
from nnef_torch.importer.tracer import OpTracer
from nnef_torch.ops import registry

rng = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def lowered(op: str, *inner: str):
    """Run `op` in the executor expanded into its stdlib body (and the bodies of the compounds it calls)."""
    return khronos(op, lowered=[op, *inner])


# Multilinear upsampling, from the spec text: output i sits at input coordinate c(i), between j = floor(c) and
# j + 1 with weights 1 - u and u (u = c - j); positions outside the input are read according to the border.

def _read(x: np.ndarray, k: int, border: str) -> np.ndarray:
    size = x.shape[-1]
    if 0 <= k < size:
        return x[..., k]
    if border == 'constant':
        return np.zeros(x.shape[:-1])
    if border == 'reflect' and size > 1:
        k = -k if k < 0 else 2 * (size - 1) - k
    elif border == 'reflect-even':
        k = -k - 1 if k < 0 else 2 * size - 1 - k
    return x[..., min(max(k, 0), size - 1)]


def _upsample_last(x: np.ndarray, f: int, method: str, border: str) -> np.ndarray:
    size = x.shape[-1]
    columns = []
    for i in range(size * f):
        if method == 'aligned':
            c = i * (size - 1) / (size * f - 1) if size > 1 else 0.0
        elif method == 'symmetric':
            c = (i - (f - 1) / 2) / f
        else:
            c = i / f
        j = math.floor(c)
        u = c - j
        columns.append((1 - u) * _read(x, j, border) + u * _read(x, j + 1, border))
    return np.stack(columns, -1)


def multilinear_ref(x, *, factor, method='symmetric', border='replicate'):
    x = x.astype(np.float64)
    for axis, f in enumerate(factor):
        x = np.moveaxis(_upsample_last(np.moveaxis(x, 2 + axis, -1), f, method, border), -1, 2 + axis)
    return x


def area_ref(x, *, factor):
    shape = list(x.shape[:2]) + [item for e, f in zip(x.shape[2:], factor) for item in (e // f, f)]
    return x.astype(np.float64).reshape(shape).mean(tuple(3 + 2 * i for i in range(len(factor))))


# RoI ops, from the spec text and the choices documented in torch_sampling.py.

def _round(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def _roi_pool_ref(reduce: str):
    def ref(x, rois, batch_index, *, output_size):
        m = len(output_size)
        out = np.zeros((rois.shape[0], x.shape[1]) + tuple(output_size))
        for n in range(rois.shape[0]):
            image = x[int(batch_index.reshape(-1)[n])].astype(np.float64)
            begin = [_round(float(v)) for v in rois[n, :m]]
            end = [_round(float(v)) for v in rois[n, m:]]
            for cell in np.ndindex(*output_size):
                ranges = []
                for d in range(m):
                    r, p = end[d] - begin[d], output_size[d]
                    start = begin[d] + cell[d] * (r // p)
                    ranges.append(range(start, start - (-r // p)))
                values = [image[(slice(None),) + pos] if all(0 <= k < e for k, e in zip(pos, image.shape[1:]))
                          else np.zeros(image.shape[0]) for pos in product(*ranges)]
                if values:
                    out[(n, slice(None)) + cell] = np.mean(values, 0) if reduce == 'avg' else np.max(values, 0)
        return out
    return ref


def _sample_positions(begin: float, end: float, count: int, extent: int, method: str) -> list[list[tuple]]:
    """Per output position: the (input index, weight) pairs of the linear interpolation, clamped to the input."""
    r = end - begin
    rows = []
    for i in range(count):
        if method == 'symmetric':
            c = begin + (i + 0.5) * r / count - 0.5
        elif method == 'asymmetric':
            c = begin + i * r / count
        else:
            c = begin + i * (r - 1) / max(count - 1, 1)
        j = math.floor(c)
        u = c - j
        rows.append([(min(max(j, 0), extent - 1), 1 - u), (min(max(j + 1, 0), extent - 1), u)])
    return rows


def roi_resample_ref(x, rois, batch_index, *, output_size, method='symmetric'):
    m = len(output_size)
    out = np.zeros((rois.shape[0], x.shape[1]) + tuple(output_size))
    for n in range(rois.shape[0]):
        image = x[int(batch_index.reshape(-1)[n])].astype(np.float64)
        samples = [_sample_positions(float(rois[n, d]), float(rois[n, m + d]), output_size[d], image.shape[1 + d],
                                     method) for d in range(m)]
        for cell in np.ndindex(*output_size):
            for combo in product(*[samples[d][cell[d]] for d in range(m)]):
                weight = np.prod([w for _, w in combo])
                out[(n, slice(None)) + cell] += weight * image[(slice(None),) + tuple(k for k, _ in combo)]
    return out


def _roi_align_ref(reduce: str):
    def ref(x, rois, batch_index, *, output_size, sampling_rate, resize_method='symmetric'):
        size = [p * s for p, s in zip(output_size, sampling_rate)]
        resized = roi_resample_ref(x, rois, batch_index, output_size=size, method=resize_method)
        shape = list(resized.shape[:2]) + [item for p, s in zip(output_size, sampling_rate) for item in (p, s)]
        axes = tuple(3 + 2 * i for i in range(len(size)))
        blocks = resized.reshape(shape)
        return blocks.mean(axes) if reduce == 'avg' else blocks.max(axes)
    return ref


IMAGE = f32(2, 3, 6, 7)
ROIS = np.array([[0.8, 1.2, 5.3, 6.1], [2.2, 0.1, 4.4, 3.9], [-1.2, 4.1, 3.2, 9.3]], np.float32)
BATCH = np.array([1, 0, 1], np.int64)
TIES = np.array([[0.5, 1.5, 2.5, 4.5], [-0.5, 2.5, 1.5, 6.5]], np.float32)  # rounding half away from zero
SMALL = np.array([[1.0, 2.0, 2.0, 3.0], [3.0, 3.0, 3.0, 5.0]], np.float32)  # r < P, and an empty region
ROIS_1D = np.array([[0.7, 5.2], [2.1, 3.3]], np.float32)
ROIS_3D = np.array([[0.2, 1.1, 0.6, 3.3, 4.2, 3.7]], np.float32)
N = {'batch_index': BATCH}

CASES = [
    # down-sampling (lowered into box)
    OpCase('nearest_downsample', {'input': f32(2, 3, 4, 6)}, {'factor': [2, 3]}, ref=lowered('nearest_downsample')),
    OpCase('nearest_downsample', {'input': f32(1, 2, 6)}, {'factor': [3]}, ref=lowered('nearest_downsample'),
           id='nearest_downsample_1d'),
    OpCase('nearest_downsample', {'input': f32(1, 2, 4, 4)}, {'factor': [1, 1]}, ref=lowered('nearest_downsample'),
           id='nearest_downsample_identity'),
    OpCase('area_downsample', {'input': f32(2, 3, 4, 6)}, {'factor': [2, 3]}, ref=lowered('area_downsample')),
    OpCase('area_downsample', {'input': f32(1, 2, 4, 2, 6)}, {'factor': [2, 1, 3]}, ref=lowered('area_downsample'),
           id='area_downsample_3d'),
    OpCase('area_downsample', {'input': f32(1, 2, 4, 2, 2, 4)}, {'factor': [2, 1, 2, 2]}, ref=area_ref,
           id='area_downsample_4d'),
    # nearest up-sampling (lowered into debox): F.interpolate for powers of two, else broadcast and merge
    OpCase('nearest_upsample', {'input': f32(2, 3, 2, 3)}, {'factor': [2, 4]}, ref=lowered('nearest_upsample')),
    OpCase('nearest_upsample', {'input': f32(2, 3, 2, 3)}, {'factor': [3, 2]}, ref=lowered('nearest_upsample'),
           id='nearest_upsample_odd'),
    OpCase('nearest_upsample', {'input': f32(1, 2, 3)}, {'factor': [5]}, ref=lowered('nearest_upsample'),
           id='nearest_upsample_1d'),
    OpCase('nearest_upsample', {'input': f32(1, 2, 2, 2, 2)}, {'factor': [3, 1, 2]}, ref=lowered('nearest_upsample'),
           id='nearest_upsample_3d'),
    # multilinear up-sampling: the executor's cases
    OpCase('multilinear_upsample', {'input': f32(2, 3, 3, 4)}, {'factor': [2, 2]}, id='multilinear_default'),
    OpCase('multilinear_upsample', {'input': f32(2, 3, 3, 4)}, {'factor': [2, 2], 'method': 'symmetric',
                                                                'border': 'constant'}, id='multilinear_sym_constant'),
    OpCase('multilinear_upsample', {'input': f32(2, 3, 3, 4)}, {'factor': [2, 2], 'method': 'asymmetric',
                                                                'border': 'constant'}, id='multilinear_asym_constant'),
    OpCase('multilinear_upsample', {'input': f32(2, 3, 3, 4)}, {'factor': [2, 2], 'method': 'asymmetric',
                                                                'border': 'replicate'},
           id='multilinear_asym_replicate'),
    OpCase('multilinear_upsample', {'input': f32(1, 2, 5)}, {'factor': [2], 'method': 'symmetric',
                                                             'border': 'constant'}, id='multilinear_1d_sym_constant'),
    OpCase('multilinear_upsample', {'input': f32(1, 2, 5)}, {'factor': [2], 'method': 'asymmetric',
                                                             'border': 'replicate'}, id='multilinear_1d_asym'),
    # multilinear up-sampling: the spec's formulas
    *[OpCase('multilinear_upsample', {'input': f32(1, 2, 3, 4)}, {'factor': factor, 'method': method,
                                                                 'border': border}, ref=multilinear_ref,
             id=f'multilinear_{method}_{border}_{"x".join(map(str, factor))}')
      for factor in ([3, 3], [4, 2]) for method in ('symmetric', 'asymmetric')
      for border in ('constant', 'replicate', 'reflect', 'reflect-even')],
    *[OpCase('multilinear_upsample', {'input': f32(1, 2, 3, 4)}, {'factor': factor, 'method': 'aligned',
                                                                 'border': 'constant'}, ref=multilinear_ref,
             id=f'multilinear_aligned_{"x".join(map(str, factor))}') for factor in ([2, 2], [3, 2])],
    OpCase('multilinear_upsample', {'input': f32(1, 2, 1, 3)}, {'factor': [2, 3], 'method': 'symmetric',
                                                                'border': 'reflect'}, ref=multilinear_ref,
           id='multilinear_reflect_extent_one'),
    OpCase('multilinear_upsample', {'input': f32(1, 2, 2, 3, 2)}, {'factor': [3, 2, 2], 'method': 'asymmetric',
                                                                   'border': 'constant'}, ref=multilinear_ref,
           id='multilinear_3d'),
    OpCase('multilinear_upsample', {'input': f32(1, 2, 2, 3, 2)}, {'factor': [2, 3, 2]}, ref=multilinear_ref,
           id='multilinear_3d_default'),
    # local normalizations (lowered into box with zero borders)
    OpCase('local_response_normalization', {'input': f32(2, 5, 3, 3)}, {'size': [1, 3, 1, 1], 'alpha': 0.5,
                                                                         'beta': 0.75, 'bias': 2.0},
           ref=lowered('local_response_normalization'), id='lrn_channels'),
    OpCase('local_response_normalization', {'input': f32(2, 5, 4)}, {'size': [1, 5, 1]},
           ref=lowered('local_response_normalization'), id='lrn_channels_1d'),
    OpCase('local_response_normalization', {'input': f32(2, 5, 3, 3)}, {'size': [1, 4, 1, 1], 'beta': 0.75},
           ref=lowered('local_response_normalization'), id='lrn_channels_even'),
    OpCase('local_response_normalization', {'input': f32(2, 5, 3, 4)}, {'size': [1, 3, 2, 3]},
           ref=lowered('local_response_normalization'), id='lrn_channels_spatial'),
    OpCase('local_response_normalization', {'input': f32(3, 5)}, {'size': [1, 2]},
           ref=lowered('local_response_normalization'), id='lrn_rank2'),
    OpCase('local_response_normalization', {'input': f32(3, 2, 4, 4)}, {'size': [2, 1, 1, 3]},
           ref=lowered('local_response_normalization'), id='lrn_batch_window'),
    OpCase('local_mean_normalization', {'input': f32(2, 3, 4, 5)}, {'size': [1, 1, 3, 3]},
           ref=lowered('local_mean_normalization')),
    OpCase('local_mean_normalization', {'input': f32(2, 3, 4, 5)}, {'size': [1, 1, 2, 4]},
           ref=lowered('local_mean_normalization'), id='local_mean_even'),
    OpCase('local_variance_normalization', {'input': f32(2, 3, 4, 5)}, {'size': [1, 1, 3, 3], 'bias': 0.5,
                                                                        'epsilon': 0.1},
           ref=lowered('local_variance_normalization')),
    OpCase('local_variance_normalization', {'input': f32(2, 3, 4, 5)}, {'size': [1, 1, 3, 3], 'epsilon': 2.0},
           ref=lowered('local_variance_normalization'), id='local_variance_epsilon_wins'),
    OpCase('local_contrast_normalization', {'input': f32(2, 3, 4, 5)}, {'size': [1, 3, 3, 2], 'bias': 0.1},
           ref=lowered('local_contrast_normalization', 'local_mean_normalization',
                                                 'local_variance_normalization')),
    # RoI pooling: rounded regions split into ceil / floor cells
    OpCase('avg_roi_pool', {'input': IMAGE, 'rois': ROIS, **N}, {'output_size': [2, 3]},
           ref=_roi_pool_ref('avg')),
    OpCase('max_roi_pool', {'input': IMAGE, 'rois': ROIS, **N}, {'output_size': [2, 3]},
           ref=_roi_pool_ref('max')),
    OpCase('avg_roi_pool', {'input': IMAGE, 'rois': TIES, 'batch_index': np.array([[0], [1]])},
           {'output_size': [2, 2]}, ref=_roi_pool_ref('avg'), id='avg_roi_pool_ties'),
    OpCase('max_roi_pool', {'input': IMAGE, 'rois': TIES, 'batch_index': np.array([0, 1])},
           {'output_size': [2, 2]}, ref=_roi_pool_ref('max'), id='max_roi_pool_ties'),
    OpCase('avg_roi_pool', {'input': IMAGE, 'rois': SMALL, 'batch_index': np.array([0, 1])},
           {'output_size': [2, 3]}, ref=_roi_pool_ref('avg'), id='avg_roi_pool_small_and_empty'),
    OpCase('max_roi_pool', {'input': IMAGE, 'rois': SMALL, 'batch_index': np.array([0, 1])},
           {'output_size': [2, 3]}, ref=_roi_pool_ref('max'), id='max_roi_pool_small_and_empty'),
    OpCase('max_roi_pool', {'input': f32(2, 3, 7), 'rois': ROIS_1D, 'batch_index': np.array([1, 0])},
           {'output_size': [3]}, ref=_roi_pool_ref('max'), id='max_roi_pool_1d'),
    OpCase('avg_roi_pool', {'input': f32(1, 2, 4, 5, 4), 'rois': ROIS_3D, 'batch_index': np.array([0])},
           {'output_size': [2, 2, 1]}, ref=_roi_pool_ref('avg'), id='avg_roi_pool_3d'),
    # RoI resampling and align
    *[OpCase('roi_resample', {'input': IMAGE, 'rois': ROIS, **N}, {'output_size': [4, 3], 'method': method},
             ref=roi_resample_ref, id=f'roi_resample_{method}') for method in ('symmetric', 'asymmetric', 'aligned')],
    OpCase('roi_resample', {'input': f32(2, 3, 7), 'rois': ROIS_1D, 'batch_index': np.array([1, 0])},
           {'output_size': [5]}, ref=roi_resample_ref, id='roi_resample_1d'),
    OpCase('roi_resample', {'input': f32(1, 2, 4, 5, 4), 'rois': ROIS_3D, 'batch_index': np.array([0])},
           {'output_size': [2, 3, 2], 'method': 'aligned'}, ref=roi_resample_ref, id='roi_resample_3d'),
    OpCase('avg_roi_align', {'input': IMAGE, 'rois': ROIS, **N}, {'output_size': [2, 3], 'sampling_rate': [2, 2]},
           ref=_roi_align_ref('avg')),
    OpCase('avg_roi_align', {'input': IMAGE, 'rois': ROIS, **N},
           {'output_size': [2, 2], 'sampling_rate': [1, 3], 'resize_method': 'aligned'},
           ref=_roi_align_ref('avg'), id='avg_roi_align_aligned'),
    OpCase('max_roi_align', {'input': IMAGE, 'rois': ROIS, **N}, {'output_size': [2, 3], 'sampling_rate': [2, 2]},
           ref=_roi_align_ref('max')),
    OpCase('max_roi_align', {'input': IMAGE, 'rois': ROIS, **N},
           {'output_size': [3, 2], 'sampling_rate': [2, 1], 'resize_method': 'asymmetric'},
           ref=_roi_align_ref('max'), id='max_roi_align_asymmetric'),
    OpCase('max_roi_align', {'input': f32(1, 2, 4, 5, 4), 'rois': ROIS_3D, 'batch_index': np.array([0])},
           {'output_size': [1, 2, 1], 'sampling_rate': [2, 2, 2]}, ref=_roi_align_ref('max'), id='max_roi_align_3d'),
]

# Gradients on small inputs (gradcheck costs one forward per input element). The RoI coordinates keep every
# sample off integer positions and every rounded coordinate off .5, where the ops have kinks or jumps.
GRAD_IMAGE = f32(2, 1, 5, 6)
GRAD_ROIS = np.array([[0.83, 1.27, 4.31, 5.14], [-0.71, 2.13, 2.37, 7.46]], np.float32)
GRAD_ROI = {'input': GRAD_IMAGE, 'rois': GRAD_ROIS, 'batch_index': np.array([1, 0])}


def _grad(op: str, inputs: dict[str, Any], id: str | None = None, **attribs: Any) -> OpCase:
    return OpCase(op, inputs, attribs, id=id)


GRAD_CASES = [
    _grad('nearest_downsample', {'input': f32(1, 2, 4, 6)}, factor=[2, 3]),
    _grad('area_downsample', {'input': f32(1, 2, 4, 6)}, factor=[2, 3]),
    _grad('area_downsample', {'input': f32(1, 1, 2, 2, 2, 2)}, 'area_downsample_4d', factor=[2, 1, 2, 2]),
    _grad('nearest_upsample', {'input': f32(1, 2, 2, 3)}, factor=[2, 2]),
    _grad('nearest_upsample', {'input': f32(1, 2, 2, 3)}, 'nearest_upsample_odd', factor=[3, 2]),
    _grad('multilinear_upsample', {'input': f32(1, 2, 2, 3)}, 'multilinear_default', factor=[2, 2]),
    _grad('multilinear_upsample', {'input': f32(1, 2, 2, 3)}, 'multilinear_asym_constant', factor=[2, 2],
          method='asymmetric', border='constant'),
    _grad('multilinear_upsample', {'input': f32(1, 1, 2, 3)}, 'multilinear_sym_reflect_3x3', factor=[3, 3],
          method='symmetric', border='reflect'),
    _grad('multilinear_upsample', {'input': f32(1, 1, 2, 2)}, 'multilinear_asym_replicate_4x2', factor=[4, 2],
          method='asymmetric', border='replicate'),
    _grad('multilinear_upsample', {'input': f32(1, 1, 2, 3)}, 'multilinear_aligned', factor=[3, 2],
          method='aligned'),
    _grad('multilinear_upsample', {'input': f32(1, 1, 2, 2, 2)}, 'multilinear_3d', factor=[2, 2, 2],
          method='asymmetric', border='constant'),
    _grad('local_response_normalization', {'input': f32(1, 5, 2, 2)}, 'lrn_channels', size=[1, 3, 1, 1]),
    _grad('local_response_normalization', {'input': f32(1, 5, 2, 2)}, 'lrn_channels_even', size=[1, 4, 1, 1],
          alpha=0.5, beta=0.75),
    _grad('local_response_normalization', {'input': f32(2, 2, 2, 3)}, 'lrn_batch_window', size=[2, 1, 1, 3]),
    _grad('local_mean_normalization', {'input': f32(1, 2, 3, 4)}, size=[1, 1, 3, 3]),
    _grad('local_variance_normalization', {'input': f32(1, 2, 3, 4)}, size=[1, 1, 3, 3], bias=0.5, epsilon=0.1),
    _grad('local_contrast_normalization', {'input': f32(1, 2, 3, 4)}, size=[1, 2, 3, 2], bias=0.1),
    _grad('avg_roi_pool', GRAD_ROI, output_size=[2, 2]),
    _grad('max_roi_pool', GRAD_ROI, output_size=[2, 3]),
    *[_grad('roi_resample', GRAD_ROI, f'roi_resample_{method}', output_size=[3, 2], method=method)
      for method in ('symmetric', 'asymmetric', 'aligned')],
    _grad('avg_roi_align', GRAD_ROI, output_size=[2, 2], sampling_rate=[2, 1]),
    _grad('max_roi_align', GRAD_ROI, output_size=[2, 2], sampling_rate=[2, 3]),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_sampling_op(case: OpCase) -> None:
    check_case(case)


@pytest.mark.parametrize("case", GRAD_CASES, ids=case_ids(GRAD_CASES))
def test_gradcheck(case: OpCase) -> None:
    gradcheck_case(case)


def test_roi_resample_of_whole_input_is_multilinear_upsample() -> None:
    """The region [0, extent) resampled to factor * extent is multilinear_upsample with the 'replicate' border."""
    x = torch.from_numpy(IMAGE)
    rois = torch.tensor([[0.0, 0.0, 6.0, 7.0]])
    for method in ('symmetric', 'asymmetric', 'aligned'):
        resampled = registry.entry('roi_resample').torch(x[:1], rois, torch.tensor([0]), output_size=[12, 21],
                                                         method=method)
        upsampled = registry.entry('multilinear_upsample').torch(x[:1], factor=[2, 3], method=method)
        torch.testing.assert_close(resampled, upsampled, rtol=0, atol=1e-5)


def test_float64_kept() -> None:
    x = torch.from_numpy(IMAGE).double()
    for op, attribs in [('multilinear_upsample', {'factor': [3, 3], 'border': 'constant'}),
                        ('local_response_normalization', {'size': [1, 4, 1, 1]})]:
        assert registry.entry(op).torch(x, **attribs).dtype == torch.float64
    rois = torch.from_numpy(ROIS).double()
    assert registry.entry('avg_roi_align').torch(x, rois, torch.from_numpy(BATCH), output_size=[2, 2],
                                                 sampling_rate=[2, 2]).dtype == torch.float64


# Batch dimensions stay free in the traced code: trace at batch 1, run at batch 3.

def _traced(op: str, shape: Sequence[int], **attribs: Any) -> torch.fx.GraphModule:
    root = torch.nn.Module()
    tracer = OpTracer(root)
    result = registry.entry(op).torch(tracer.placeholder("x", shape, torch.float32), **attribs)
    tracer.create_node("output", "output", (tracer.create_arg(result),), {})
    return torch.fx.GraphModule(root, tracer.graph)


DYNAMIC = [
    ('nearest_downsample', {'factor': [2, 3]}),
    ('area_downsample', {'factor': [2, 3]}),
    ('nearest_upsample', {'factor': [2, 2]}),
    ('nearest_upsample', {'factor': [3, 1]}),
    ('multilinear_upsample', {'factor': [2, 2]}),
    ('multilinear_upsample', {'factor': [3, 2], 'method': 'asymmetric', 'border': 'reflect'}),
    ('local_response_normalization', {'size': [1, 3, 1, 1]}),
    ('local_contrast_normalization', {'size': [1, 1, 3, 3]}),
]


@pytest.mark.parametrize("op, attribs", DYNAMIC, ids=[row[0] for row in DYNAMIC])
def test_batch_stays_dynamic(op: str, attribs: dict[str, Any]) -> None:
    module = _traced(op, (1, 2, 6, 6), **attribs)
    x = torch.from_numpy(f32(3, 2, 6, 6))
    torch.testing.assert_close(module(x), registry.entry(op).torch(x, **attribs))
