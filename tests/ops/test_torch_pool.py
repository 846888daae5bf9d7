"""Torch implementations of box / debox, the pooling ops and index-based sampling (argmax_pool, sample, desample,
max_pool_with_index).

The Khronos executor is the reference for box, debox, avg_pool and max_pool with 'constant' and 'ignore' borders
(its debox ignores `normalize`, dividing its input in place instead, and writes out of bounds for a strided
debox with 'ignore' and normalize: those rows use numpy); the numpy
loops of `window_numpy` for the other borders, more than 5 dimensions and the ops the executor lacks.
"""
from __future__ import annotations

import numpy as np
import pytest
from ops import window_numpy as ref
from ops.torch_harness import OpCase, case_ids, check_case, gradcheck_case

import nnef_torch.ops.torch_window  # noqa: F401  (registers the ops)

rng = np.random.default_rng(0)


def rnd(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def indices(shape, size) -> np.ndarray:
    return rng.integers(0, int(np.prod(size)), size=shape).astype(np.int64)


BORDERS = ("replicate", "reflect", "reflect-even")
P0 = [(0, 0), (0, 0)]

BOX_CASES = [
    OpCase('box', {'input': rnd(1, 2, 5, 6)}, {'size': [1, 1, 3, 3]}, id='box2d'),
    OpCase('box', {'input': rnd(1, 2, 5, 6)}, {'size': [1, 1, 3, 3], 'normalize': True}, id='box2d_normalize'),
    OpCase('box', {'input': rnd(1, 2, 6, 6)}, {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2], 'border': 'ignore',
                                              'normalize': True}, id='box2d_ignore_auto_asymmetric'),
    OpCase('box', {'input': rnd(1, 2, 5, 6)}, {'size': [1, 1, 3, 3], 'border': 'ignore', 'normalize': True},
           id='box2d_ignore_fused'),
    OpCase('box', {'input': rnd(1, 2, 5, 6)}, {'size': [1, 1, 3, 2], 'border': 'ignore'}, id='box2d_ignore_sum'),
    OpCase('box', {'input': rnd(1, 2, 7, 6)}, {'size': [1, 1, 3, 2], 'dilation': [1, 1, 2, 3], 'normalize': True},
           id='box2d_dilation'),
    OpCase('box', {'input': rnd(1, 2, 7, 6)}, {'size': [1, 1, 3, 2], 'dilation': [1, 1, 2, 2], 'border': 'ignore',
                                              'normalize': True, 'stride': [1, 1, 2, 1]}, id='box2d_ignore_dilation'),
    OpCase('box', {'input': rnd(2, 5, 3, 3)}, {'size': [1, 3, 1, 1], 'border': 'ignore', 'normalize': True,
                                              'padding': [(0, 0), (1, 1), (0, 0), (0, 0)]}, id='box_channels'),
    OpCase('box', {'input': rnd(4, 2, 3, 3)}, {'size': [2, 1, 1, 1], 'stride': [2, 1, 1, 1]}, id='box_batch'),
    OpCase('box', {'input': rnd(4, 5)}, {'size': [2, 3], 'border': 'ignore', 'normalize': True}, id='box_rank2'),
    OpCase('box', {'input': rnd(2, 3, 7)}, {'size': [1, 1, 3]}, id='box1d'),
    OpCase('box', {'input': rnd(2, 3, 7)}, {'size': [1, 1, 4], 'border': 'ignore', 'normalize': True,
                                           'stride': [1, 1, 2]}, id='box1d_ignore'),
    OpCase('box', {'input': rnd(1, 2, 4, 5, 4)}, {'size': [1, 1, 2, 3, 2], 'stride': [1, 1, 2, 1, 2]}, id='box3d'),
    OpCase('box', {'input': rnd(2, 3, 3, 4, 3)}, {'size': [2, 2, 2, 2, 1], 'border': 'ignore', 'normalize': True},
           id='box_4_window_dims'),
    OpCase('box', {'input': rnd(1, 2, 6, 5)}, {'size': [1, 1, 3, 3], 'padding': P0 + [(-1, 1), (2, -1)]},
           id='box_negative_padding'),
    OpCase('box', {'input': rnd(1, 2, 5, 5)}, {'size': [1, 1, 2, 3], 'padding': P0 + [(2, 3), (3, 1)]},
           id='box_large_padding'),
    OpCase('box', {'input': rnd(1, 2, 5, 5)}, {'size': [1, 1, 1, 1], 'stride': [1, 1, 2, 2]}, id='box_size1_stride'),
    OpCase('box', {'input': rnd(1, 2, 3, 4)}, {'size': [1, 1, 1, 1]}, id='box_identity'),
    OpCase('box', {'input': rnd(2, 1, 2, 3, 2, 3)}, {'size': [2, 1, 2, 2, 2, 2], 'normalize': True}, ref=ref.box,
           id='box_rank6'),
    *[OpCase('box', {'input': rnd(1, 2, 5, 6)}, {'size': [1, 1, 3, 3], 'border': border, 'normalize': True,
                                                'stride': [1, 1, 2, 1]}, ref=ref.box, id=f'box2d_{border}')
      for border in BORDERS],
    *[OpCase('box', {'input': rnd(3, 4, 2, 3)}, {'size': [2, 3, 1, 2], 'border': border, 'dilation': [1, 1, 1, 2],
                                                'padding': [(1, 0), (1, 1), (0, 0), (2, 0)]}, ref=ref.box,
             id=f'box_batch_channel_{border}') for border in BORDERS],
    *[OpCase('box', {'input': rnd(1, 1, 3, 2)}, {'size': [1, 1, 3, 3], 'border': border,
                                                'padding': P0 + [(3, 4), (4, 1)]}, ref=ref.box,
             id=f'box_far_{border}') for border in BORDERS],
]

POOL_CASES = [
    OpCase('avg_pool', {'input': rnd(1, 3, 6, 6)}, {'size': [1, 1, 2, 2], 'stride': [1, 1, 2, 2]}, id='avg2d_2x2'),
    OpCase('avg_pool', {'input': rnd(1, 3, 7, 8)}, {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2],
                                                   'border': 'ignore'}, id='avg2d_ignore_asymmetric'),
    OpCase('avg_pool', {'input': rnd(1, 3, 5, 5)}, {'size': [1, 1, 3, 3], 'border': 'ignore',
                                                   'padding': P0 + [(1, 1), (1, 1)]}, id='avg2d_ignore_fused'),
    OpCase('avg_pool', {'input': rnd(1, 3, 5, 5)}, {'size': [1, 1, 3, 3], 'border': 'constant'},
           id='avg2d_constant_fused'),
    OpCase('avg_pool', {'input': rnd(1, 2, 5, 5)}, {'size': [1, 1, 2, 2], 'padding': P0 + [(2, 2), (1, 1)],
                                                   'border': 'constant'}, id='avg2d_large_padding'),
    OpCase('avg_pool', {'input': rnd(2, 3, 6, 4, 5)}, {'size': [1, 1, 3, 2, 3], 'stride': [1, 1, 2, 2, 1],
                                                      'border': 'ignore'}, id='avg3d_ignore'),
    OpCase('avg_pool', {'input': rnd(2, 6, 4)}, {'size': [1, 3, 2], 'border': 'ignore', 'stride': [1, 2, 1]},
           id='avg_channels_1d'),
    *[OpCase('avg_pool', {'input': rnd(1, 2, 5, 4)}, {'size': [1, 1, 3, 2], 'border': border}, ref=ref.avg_pool,
             id=f'avg2d_{border}') for border in BORDERS],
    OpCase('max_pool', {'input': rnd(1, 3, 6, 6)}, {'size': [1, 1, 2, 2], 'stride': [1, 1, 2, 2]}, id='max2d_2x2'),
    OpCase('max_pool', {'input': rnd(1, 3, 5, 5)}, {'size': [1, 1, 3, 3], 'border': 'constant'},
           id='max2d_constant_padding'),
    OpCase('max_pool', {'input': rnd(1, 3, 5, 5)}, {'size': [1, 1, 3, 3], 'border': 'ignore'},
           id='max2d_ignore_fused'),
    OpCase('max_pool', {'input': rnd(1, 3, 8, 7)}, {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2],
                                                   'border': 'ignore'}, id='max2d_ignore_asymmetric'),
    OpCase('max_pool', {'input': rnd(1, 2, 7, 7)}, {'size': [1, 1, 3, 2], 'dilation': [1, 1, 2, 3],
                                                   'border': 'ignore'}, id='max2d_ignore_dilation'),
    OpCase('max_pool', {'input': rnd(2, 5, 3, 3)}, {'size': [1, 3, 1, 1], 'border': 'ignore',
                                                   'padding': [(0, 0), (1, 1), (0, 0), (0, 0)]}, id='max_channels'),
    OpCase('max_pool', {'input': rnd(2, 3, 9)}, {'size': [1, 1, 3], 'stride': [1, 1, 2]}, id='max1d'),
    OpCase('max_pool', {'input': rnd(1, 2, 4, 5, 4)}, {'size': [1, 1, 2, 3, 2], 'border': 'ignore'}, id='max3d'),
    OpCase('max_pool', {'input': rnd(2, 3, 3, 4, 3)}, {'size': [2, 2, 2, 2, 2], 'border': 'ignore'},
           id='max_5_window_dims'),
    OpCase('max_pool', {'input': rnd(1, 2, 6, 5)}, {'size': [1, 1, 3, 3], 'padding': P0 + [(-1, 1), (2, -1)],
                                                   'border': 'ignore'}, id='max_negative_padding'),
    *[OpCase('max_pool', {'input': rnd(1, 2, 5, 4)}, {'size': [1, 1, 3, 3], 'border': border,
                                                     'stride': [1, 1, 2, 1]}, ref=ref.max_pool, id=f'max2d_{border}')
      for border in BORDERS],
    OpCase('rms_pool', {'input': rnd(1, 2, 5, 5)}, {'size': [1, 1, 3, 3]}, ref=ref.rms_pool, id='rms2d'),
    OpCase('rms_pool', {'input': rnd(1, 2, 6, 5)}, {'size': [1, 1, 2, 3], 'border': 'ignore', 'stride': [1, 1, 2, 2]},
           ref=ref.rms_pool, id='rms2d_ignore'),
    OpCase('rms_pool', {'input': rnd(1, 2, 5, 5)}, {'size': [1, 1, 3, 3], 'border': 'reflect-even'},
           ref=ref.rms_pool, id='rms2d_reflect_even'),
]

DEBOX_CASES = [
    OpCase('debox', {'input': rnd(1, 2, 3, 4)}, {'size': [1, 1, 2, 2], 'stride': [1, 1, 2, 2],
                                                'padding': P0 + [(0, 0), (0, 0)]}, id='debox_nearest_upsample'),
    OpCase('debox', {'input': rnd(1, 2, 3, 4)}, {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2]}, id='debox2d_stride'),
    OpCase('debox', {'input': rnd(1, 2, 4, 4)}, {'size': [1, 1, 3, 3], 'normalize': True}, ref=ref.debox,
           id='debox2d_normalize'),
    OpCase('debox', {'input': rnd(1, 2, 4, 4)}, {'size': [1, 1, 3, 3], 'normalize': True, 'border': 'ignore'},
           ref=ref.debox, id='debox2d_ignore'),
    OpCase('debox', {'input': rnd(1, 2, 4, 4)}, {'size': [1, 1, 3, 3], 'border': 'ignore'}, id='debox2d_ignore_sum'),
    OpCase('debox', {'input': rnd(1, 2, 3, 3)}, {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2], 'normalize': True,
                                                'border': 'ignore'}, ref=ref.debox, id='debox2d_ignore_stride'),
    OpCase('debox', {'input': rnd(1, 2, 3, 3)}, {'size': [1, 1, 3, 2], 'stride': [1, 1, 2, 2],
                                                'output_shape': [1, 2, 6, 5]}, id='debox2d_output_shape'),
    OpCase('debox', {'input': rnd(1, 2, 4, 3)}, {'size': [1, 1, 2, 3], 'dilation': [1, 1, 2, 2],
                                                'padding': P0 + [(1, 0), (2, 1)]}, id='debox2d_dilation'),
    OpCase('debox', {'input': rnd(2, 3, 2, 2)}, {'size': [1, 3, 1, 1], 'normalize': True}, ref=ref.debox,
           id='debox_channels'),
    OpCase('debox', {'input': rnd(2, 3, 5)}, {'size': [1, 1, 3], 'stride': [1, 1, 3]}, id='debox1d_repeat'),
    OpCase('debox', {'input': rnd(2, 3, 5)}, {'size': [1, 1, 2], 'stride': [1, 1, 2], 'border': 'ignore',
                                             'normalize': True}, ref=ref.debox, id='debox1d_repeat_ignore'),
    OpCase('debox', {'input': rnd(2, 3, 4)}, {'size': [1, 1, 1], 'stride': [1, 1, 2], 'border': 'ignore',
                                             'normalize': True}, ref=ref.debox, id='debox1d_ignore_gaps'),
    OpCase('debox', {'input': rnd(2, 3, 4, 3)}, {'size': [2, 1, 2, 3], 'stride': [2, 1, 2, 3], 'normalize': True},
           id='debox_repeat_batch', ref=ref.debox),
    OpCase('debox', {'input': rnd(2, 3, 5)}, {'size': [1, 1, 3], 'stride': [1, 1, 2]}, id='debox1d'),
    OpCase('debox', {'input': rnd(2, 2, 2, 3, 2)}, {'size': [2, 2, 2, 2, 1], 'stride': [1, 1, 2, 1, 1]},
           id='debox_4_window_dims'),
    OpCase('debox', {'input': rnd(1, 2, 5, 4)}, {'size': [1, 1, 3, 3], 'padding': P0 + [(-1, 1), (0, -1)]},
           id='debox_negative_padding'),
    *[OpCase('debox', {'input': rnd(1, 2, 3, 3)}, {'size': [1, 1, 3, 2], 'stride': [1, 1, 2, 1], 'border': border,
                                                  'normalize': True}, ref=ref.debox, id=f'debox2d_{border}')
      for border in BORDERS],
]

INDEX_CASES = [
    OpCase('argmax_pool', {'input': rnd(1, 2, 5, 5)}, {'size': [1, 1, 3, 3]}, ref=ref.argmax_pool,
           id='argmax2d_constant'),
    OpCase('argmax_pool', {'input': rnd(1, 2, 6, 7)}, {'size': [1, 1, 3, 2], 'stride': [1, 1, 2, 2],
                                                      'dilation': [1, 1, 2, 1], 'border': 'ignore'},
           ref=ref.argmax_pool, id='argmax2d_ignore_dilation'),
    OpCase('argmax_pool', {'input': rnd(1, 2, 5, 5)}, {'size': [1, 1, 3, 3], 'border': 'ignore'},
           ref=ref.argmax_pool, id='argmax2d_ignore_fused'),
    OpCase('argmax_pool', {'input': rnd(2, 4, 3, 3)}, {'size': [1, 2, 2, 1], 'stride': [1, 2, 1, 1]},
           ref=ref.argmax_pool, id='argmax_channels'),
    OpCase('argmax_pool', {'input': rnd(2, 3, 3, 4, 3)}, {'size': [2, 2, 2, 2, 2], 'stride': [1, 1, 2, 1, 1]},
           ref=ref.argmax_pool, id='argmax_5_window_dims'),
    OpCase('argmax_pool', {'input': rnd(2, 3, 4, 3)}, {'size': [2, 2, 3, 2], 'border': 'ignore',
                                                      'dilation': [1, 2, 1, 1]},
           ref=ref.argmax_pool, id='argmax_4_window_dims_ignore_dilation'),
    OpCase('argmax_pool', {'input': rnd(2, 3, 7)}, {'size': [1, 1, 3], 'stride': [1, 1, 2], 'border': 'reflect'},
           ref=ref.argmax_pool, id='argmax1d_reflect'),
    OpCase('argmax_pool', {'input': rnd(1, 2, 3, 4, 3)}, {'size': [1, 1, 2, 3, 2], 'border': 'replicate',
                                                         'dilation': [1, 1, 1, 1, 2]},
           ref=ref.argmax_pool, id='argmax3d_replicate'),
    OpCase('max_pool_with_index', {'input': rnd(1, 2, 5, 6)}, {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2],
                                                              'border': 'ignore'},
           ref=ref.max_pool_with_index, results=2, id='max_with_index_ignore'),
    OpCase('max_pool_with_index', {'input': rnd(1, 2, 5, 6)}, {'size': [1, 1, 2, 2], 'stride': [1, 1, 2, 2]},
           ref=ref.max_pool_with_index, results=2, id='max_with_index_2x2'),
    OpCase('max_pool_with_index', {'input': rnd(2, 3, 3, 3, 2)}, {'size': [2, 2, 2, 2, 2], 'border': 'reflect-even'},
           ref=ref.max_pool_with_index, results=2, id='max_with_index_5_window_dims'),
    OpCase('max_pool_with_index', {'input': rnd(1, 2, 4, 4)}, {'size': [1, 1, 1, 1]},
           ref=ref.max_pool_with_index, results=2, id='max_with_index_identity'),
    OpCase('sample', {'input': rnd(1, 2, 5, 6), 'index': indices((1, 2, 5, 6), [1, 1, 3, 3])},
           {'size': [1, 1, 3, 3]}, ref=ref.sample, id='sample2d'),
    OpCase('sample', {'input': rnd(1, 2, 6, 7), 'index': indices((1, 2, 3, 4), [1, 1, 3, 2])},
           {'size': [1, 1, 3, 2], 'stride': [1, 1, 2, 2], 'dilation': [1, 1, 1, 2], 'border': 'reflect'},
           ref=ref.sample, id='sample2d_reflect_stride_dilation'),
    OpCase('sample', {'input': rnd(2, 4, 3), 'index': indices((1, 2, 3), [2, 3, 2])},
           {'size': [2, 3, 2], 'stride': [2, 2, 1], 'padding': [(0, 0), (1, 1), (1, 0)], 'border': 'replicate'},
           ref=ref.sample, id='sample_all_dims_replicate'),
    OpCase('sample', {'input': rnd(1, 2, 4, 4), 'index': indices((1, 2, 4, 4), [1, 1, 1, 1])}, {'size': [1, 1, 1, 1]},
           ref=ref.sample, id='sample_size1'),
    OpCase('desample', {'input': rnd(1, 2, 3, 3), 'index': indices((1, 2, 3, 3), [1, 1, 2, 2])},
           {'size': [1, 1, 2, 2], 'stride': [1, 1, 2, 2]}, ref=ref.desample, id='desample2d_unpool'),
    OpCase('desample', {'input': rnd(1, 2, 3, 4), 'index': indices((1, 2, 3, 4), [1, 1, 3, 3])},
           {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2], 'output_shape': [1, 2, 6, 7]}, ref=ref.desample,
           id='desample2d_output_shape_overlap'),
    OpCase('desample', {'input': rnd(2, 2, 3, 3), 'index': indices((2, 2, 3, 3), [2, 1, 2, 3])},
           {'size': [2, 1, 2, 3], 'dilation': [1, 1, 2, 1], 'padding': [(1, 0), (0, 0), (-1, 2), (1, 1)],
            'border': 'ignore'}, ref=ref.desample, id='desample_batch_dilation_crop'),
    OpCase('desample', {'input': rnd(2, 3, 4), 'index': indices((2, 3, 4), [1, 1, 3])},
           {'size': [1, 1, 3], 'stride': [1, 1, 3]}, ref=ref.desample, id='desample1d'),
]

CASES = BOX_CASES + POOL_CASES + DEBOX_CASES + INDEX_CASES


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_pool_ops(case: OpCase) -> None:
    check_case(case)


# Gradients (float64) on tiny inputs, one row per code path.
GRAD_CASES = [
    OpCase('box', {'input': rnd(1, 2, 4, 4)}, {'size': [1, 1, 3, 3], 'normalize': True, 'border': 'ignore',
                                              'stride': [1, 1, 2, 1]}, id='box_ignore'),
    OpCase('box', {'input': rnd(1, 1, 5, 4)}, {'size': [1, 1, 2, 2], 'dilation': [1, 1, 2, 1], 'border': 'reflect'},
           id='box_reflect_dilation'),
    OpCase('box', {'input': rnd(2, 3, 2, 2)}, {'size': [2, 2, 2, 2], 'normalize': True}, id='box_4_window_dims'),
    OpCase('avg_pool', {'input': rnd(1, 2, 4, 4)}, {'size': [1, 1, 3, 3], 'border': 'constant'}, id='avg_pool'),
    OpCase('rms_pool', {'input': rnd(1, 2, 4, 4)}, {'size': [1, 1, 2, 2], 'border': 'replicate'}, id='rms_pool'),
    OpCase('max_pool', {'input': rnd(1, 2, 4, 4)}, {'size': [1, 1, 3, 3], 'border': 'constant'}, id='max_constant'),
    OpCase('max_pool', {'input': rnd(1, 2, 5, 4)}, {'size': [1, 1, 3, 3], 'border': 'ignore', 'stride': [1, 1, 2, 2]},
           id='max_ignore'),
    OpCase('max_pool_with_index', {'input': rnd(2, 2, 2, 3)}, {'size': [2, 2, 2, 2], 'border': 'ignore'},
           results=2, id='max_with_index_unfolded'),
    OpCase('debox', {'input': rnd(1, 2, 3, 3)}, {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2], 'normalize': True,
                                                'border': 'ignore'}, id='debox_ignore'),
    OpCase('debox', {'input': rnd(2, 1, 2, 3)}, {'size': [2, 1, 1, 2], 'stride': [2, 1, 1, 2], 'normalize': True},
           id='debox_repeat'),
    OpCase('debox', {'input': rnd(1, 1, 3, 2)}, {'size': [1, 1, 2, 2], 'stride': [1, 1, 2, 1],
                                                'border': 'reflect-even'}, id='debox_reflect_even'),
    OpCase('sample', {'input': rnd(1, 2, 4, 4), 'index': indices((1, 2, 2, 2), [1, 1, 3, 3])},
           {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2], 'border': 'replicate'}, id='sample'),
    OpCase('desample', {'input': rnd(1, 2, 2, 2), 'index': indices((1, 2, 2, 2), [1, 1, 3, 3])},
           {'size': [1, 1, 3, 3], 'stride': [1, 1, 2, 2]}, id='desample'),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=case_ids(GRAD_CASES))
def test_pool_ops_gradients(case: OpCase) -> None:
    gradcheck_case(case)
