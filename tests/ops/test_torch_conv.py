"""Torch implementations of `pad` and the convolutions (conv, deconv, separable_conv, separable_deconv).

The Khronos executor is the reference for 'constant' borders (and `pad` within one reflection); the numpy loops
of `window_numpy` for the other borders, for cropping or far-reaching padding, and for the separable compounds.
"""
from __future__ import annotations

import numpy as np
import pytest
from ops import window_numpy as ref
from ops.torch_harness import (
    OpCase,
    assert_close,
    case_ids,
    check_case,
    gradcheck_case,
    run_eager,
    run_reference,
    run_traced,
)

import nnef_torch.ops.torch_window  # noqa: F401  (registers the ops)

rng = np.random.default_rng(0)


def rnd(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


BORDERS = ("replicate", "reflect", "reflect-even")


PAD_CASES = [
    *[OpCase('pad', {'input': rnd(1, 2, 4, 5)}, {'padding': [(0, 0), (0, 0), (1, 2), (2, 1)], 'border': border},
             id=f'pad_{border}') for border in ("constant",) + BORDERS],
    OpCase('pad', {'input': rnd(2, 3, 4)}, {'padding': [(0, 0), (1, 1), (2, 0)], 'border': 'constant', 'value': 1.5},
           id='pad_constant_value'),
    *[OpCase('pad', {'input': rnd(3, 4, 2, 3)}, {'padding': [(1, 2), (0, 1), (1, 0), (0, 0)], 'border': border},
             id=f'pad_batch_channel_{border}') for border in BORDERS],
    *[OpCase('pad', {'input': rnd(5)}, {'padding': [(2, 3)], 'border': border}, id=f'pad_1d_{border}')
      for border in BORDERS],
    *[OpCase('pad', {'input': rnd(1, 1, 2, 3, 4)}, {'padding': [(0, 0), (0, 0), (1, 1), (0, 2), (2, 1)],
                                                    'border': border}, id=f'pad_5d_{border}') for border in BORDERS],
    OpCase('pad', {'input': rnd(2, 2, 2, 3, 2, 3)}, {'padding': [(0, 0), (1, 0), (0, 0), (0, 0), (1, 1), (0, 2)],
                                                     'border': 'replicate'}, ref=ref.pad, id='pad_6d_replicate'),
    *[OpCase('pad', {'input': rnd(1, 2, 5, 6)}, {'padding': [(0, 0), (0, 0), (-1, 2), (2, -3)], 'border': border},
             ref=ref.pad, id=f'pad_crop_{border}') for border in ("constant",) + BORDERS],
    *[OpCase('pad', {'input': rnd(1, 1, 3, 2)}, {'padding': [(0, 0), (0, 0), (7, 5), (3, 4)], 'border': border},
             ref=ref.pad, id=f'pad_far_{border}') for border in BORDERS],
    OpCase('pad', {'input': rnd(1, 1, 1, 4)}, {'padding': [(0, 0), (0, 0), (2, 1), (0, 0)], 'border': 'reflect'},
           ref=ref.pad, id='pad_reflect_extent_1'),
    OpCase('pad', {'input': rnd(2, 1, 4)}, {'padding': [(0, 0), (-2, 4), (1, -2)], 'border': 'constant', 'value': -1.0},
           ref=ref.pad, id='pad_crop_beyond_extent'),
]

CONV_CASES = [
    OpCase('conv', {'input': rnd(2, 4, 9), 'filter': rnd(3, 4, 3), 'bias': rnd(1, 3)}, {}, id='conv1d'),
    OpCase('conv', {'input': rnd(2, 4, 9), 'filter': rnd(3, 4, 3), 'bias': 0.0},
           {'padding': [(1, 2)], 'stride': [2], 'dilation': [2]}, id='conv1d_stride_dilation'),
    OpCase('conv', {'input': rnd(1, 3, 7, 6), 'filter': rnd(4, 3, 3, 3), 'bias': rnd(1, 4)}, {}, id='conv2d'),
    OpCase('conv', {'input': rnd(1, 3, 8, 8), 'filter': rnd(4, 3, 3, 3), 'bias': 0.0}, {'stride': [2, 2]},
           id='conv2d_stride2_auto_asymmetric'),
    OpCase('conv', {'input': rnd(1, 3, 7, 7), 'filter': rnd(2, 3, 3, 3), 'bias': 0.0},
           {'padding': [(2, 2), (2, 2)], 'dilation': [2, 2]}, id='conv2d_dilation'),
    OpCase('conv', {'input': rnd(1, 3, 7, 7), 'filter': rnd(2, 3, 3, 2), 'bias': 0.0},
           {'dilation': [2, 3], 'stride': [2, 1]}, id='conv2d_dilation_auto'),
    OpCase('conv', {'input': rnd(1, 2, 6, 5), 'filter': rnd(3, 2, 3, 3), 'bias': 0.0},
           {'padding': [(0, 2), (1, 0)]}, id='conv2d_asymmetric'),
    OpCase('conv', {'input': rnd(1, 2, 6, 5), 'filter': rnd(3, 2, 3, 3), 'bias': 0.0},
           {'padding': [(-1, 1), (0, -1)]}, id='conv2d_negative_padding'),
    OpCase('conv', {'input': rnd(1, 2, 5, 5), 'filter': rnd(3, 2, 3, 3), 'bias': 0.0},
           {'padding': [(3, 3), (2, 4)]}, id='conv2d_large_padding'),
    OpCase('conv', {'input': rnd(2, 4, 6, 6), 'filter': rnd(6, 2, 3, 3), 'bias': rnd(1, 6)}, {'groups': 2},
           id='conv2d_groups'),
    OpCase('conv', {'input': rnd(1, 3, 5, 5), 'filter': rnd(6, 1, 3, 3), 'bias': rnd(1, 6)}, {'groups': 0},
           id='conv2d_depthwise_multiplier'),
    OpCase('conv', {'input': rnd(1, 3, 5, 5), 'filter': rnd(3, 1, 3, 3), 'bias': 0.0}, {'groups': 3},
           id='conv2d_depthwise_explicit'),
    OpCase('conv', {'input': rnd(1, 2, 5, 4), 'filter': rnd(3, 2, 3, 3), 'bias': 0.5}, {}, id='conv2d_bias_literal'),
    OpCase('conv', {'input': rnd(1, 2, 5, 4), 'filter': rnd(3, 2, 3, 3), 'bias': rnd(1, 1)}, {},
           id='conv2d_bias_singular'),
    OpCase('conv', {'input': rnd(1, 3, 7, 7), 'filter': rnd(4, 3, 1, 1), 'bias': 0.0}, {'stride': [2, 2]},
           id='conv2d_pointwise_stride'),
    OpCase('conv', {'input': rnd(1, 2, 6, 5), 'filter': rnd(2, 2, 5, 1), 'bias': 0.0}, {}, id='conv2d_5x1'),
    OpCase('conv', {'input': rnd(1, 2, 4, 5, 4), 'filter': rnd(3, 2, 3, 2, 3), 'bias': rnd(1, 3)},
           {'stride': [1, 2, 1]}, id='conv3d'),
    OpCase('conv', {'input': rnd(1, 2, 5, 5, 4), 'filter': rnd(2, 2, 3, 3, 3), 'bias': 0.0},
           {'padding': [(1, 0), (2, 2), (0, 1)], 'dilation': [1, 2, 1]}, id='conv3d_asymmetric_dilation'),
    # other borders: numpy
    *[OpCase('conv', {'input': rnd(1, 2, 6, 5), 'filter': rnd(3, 2, 3, 3), 'bias': rnd(1, 3)}, {'border': border},
             ref=ref.conv, id=f'conv2d_{border}') for border in BORDERS],
    *[OpCase('conv', {'input': rnd(1, 2, 7, 7), 'filter': rnd(2, 2, 3, 3), 'bias': 0.0},
             {'border': border, 'padding': [(0, 3), (2, 1)], 'stride': [2, 2], 'dilation': [2, 1]}, ref=ref.conv,
             id=f'conv2d_{border}_asymmetric_stride_dilation') for border in BORDERS],
    *[OpCase('conv', {'input': rnd(1, 2, 6, 5), 'filter': rnd(2, 2, 3, 3), 'bias': 0.0},
             {'border': border, 'padding': [(-1, 2), (1, 0)]}, ref=ref.conv, id=f'conv2d_{border}_crop')
      for border in BORDERS],
    *[OpCase('conv', {'input': rnd(1, 1, 3, 2), 'filter': rnd(1, 1, 3, 3), 'bias': 0.0},
             {'border': border, 'padding': [(4, 3), (3, 4)]}, ref=ref.conv, id=f'conv2d_{border}_far')
      for border in BORDERS],
    *[OpCase('conv', {'input': rnd(2, 2, 7), 'filter': rnd(3, 2, 4), 'bias': 0.0},
             {'border': border, 'stride': [2]}, ref=ref.conv, id=f'conv1d_{border}') for border in BORDERS],
    *[OpCase('conv', {'input': rnd(1, 2, 3, 4, 3), 'filter': rnd(2, 2, 2, 3, 3), 'bias': 0.0},
             {'border': border}, ref=ref.conv, id=f'conv3d_{border}') for border in BORDERS],
    OpCase('conv', {'input': rnd(1, 4, 5, 5), 'filter': rnd(4, 1, 3, 3), 'bias': 0.0},
           {'border': 'reflect', 'groups': 0, 'stride': [2, 2]}, ref=ref.conv, id='conv2d_reflect_depthwise'),
]

DECONV_CASES = [
    OpCase('deconv', {'input': rnd(1, 2, 5, 5), 'filter': rnd(2, 3, 3, 3), 'bias': rnd(1, 3)}, {}, id='deconv2d'),
    OpCase('deconv', {'input': rnd(1, 2, 5, 4), 'filter': rnd(2, 3, 3, 3), 'bias': rnd(1, 3)}, {'stride': [2, 2]},
           id='deconv2d_stride2_auto_crop'),
    OpCase('deconv', {'input': rnd(1, 2, 5, 4), 'filter': rnd(2, 3, 4, 4), 'bias': 0.0}, {'stride': [2, 2]},
           id='deconv2d_stride2_auto_4x4'),
    OpCase('deconv', {'input': rnd(1, 2, 5, 5), 'filter': rnd(2, 3, 3, 3), 'bias': rnd(1, 3)},
           {'stride': [2, 2], 'padding': [(1, 1), (1, 1)], 'output_shape': [1, 3, 10, 9]},
           id='deconv2d_output_padding'),
    OpCase('deconv', {'input': rnd(1, 2, 5, 5), 'filter': rnd(2, 3, 3, 3), 'bias': 0.0},
           {'stride': [2, 2], 'output_shape': [1, 3, 9, 10]}, id='deconv2d_output_shape_auto'),
    OpCase('deconv', {'input': rnd(1, 2, 4, 4), 'filter': rnd(2, 2, 3, 3), 'bias': 0.0},
           {'stride': [3, 2], 'output_shape': [1, 2, 14, 8], 'padding': [(0, 0), (1, 1)]},
           id='deconv2d_output_shape_stride3'),
    OpCase('deconv', {'input': rnd(1, 2, 4, 5), 'filter': rnd(2, 3, 3, 2), 'bias': 0.0},
           {'stride': [2, 1], 'dilation': [2, 3], 'padding': [(1, 2), (0, 1)]}, id='deconv2d_dilation'),
    OpCase('deconv', {'input': rnd(1, 2, 4, 5), 'filter': rnd(2, 3, 3, 3), 'bias': 0.0},
           {'padding': [(0, 2), (2, 0)]}, id='deconv2d_asymmetric'),
    OpCase('deconv', {'input': rnd(1, 2, 6, 5), 'filter': rnd(2, 3, 3, 3), 'bias': rnd(1, 3)},
           {'padding': [(-1, 1), (0, -1)]}, id='deconv2d_negative_padding'),
    OpCase('deconv', {'input': rnd(1, 2, 4, 4), 'filter': rnd(2, 3, 3, 3), 'bias': rnd(1, 3)},
           {'padding': [(3, 2), (2, 3)], 'stride': [2, 2]}, id='deconv2d_large_padding'),
    OpCase('deconv', {'input': rnd(2, 4, 4, 4), 'filter': rnd(4, 3, 3, 3), 'bias': rnd(1, 6)}, {'groups': 2},
           id='deconv2d_groups'),
    OpCase('deconv', {'input': rnd(1, 3, 4, 4), 'filter': rnd(3, 1, 3, 3), 'bias': rnd(1, 3)},
           {'groups': 0, 'stride': [2, 2]}, id='deconv2d_depthwise'),
    OpCase('deconv', {'input': rnd(1, 4, 4, 4), 'filter': rnd(4, 1, 3, 3), 'bias': 0.0},
           {'groups': 0, 'output_shape': [1, 2, 4, 4]}, id='deconv2d_depthwise_output_shape'),
    OpCase('deconv', {'input': rnd(1, 2, 4, 4), 'filter': rnd(2, 3, 3, 3), 'bias': 0.25}, {},
           id='deconv2d_bias_literal'),
    OpCase('deconv', {'input': rnd(2, 3, 5), 'filter': rnd(3, 2, 3), 'bias': rnd(1, 2)}, {'stride': [2]},
           id='deconv1d'),
    OpCase('deconv', {'input': rnd(1, 2, 3, 3, 2), 'filter': rnd(2, 2, 3, 2, 3), 'bias': 0.0},
           {'stride': [2, 1, 2]}, id='deconv3d'),
    # other borders: numpy
    *[OpCase('deconv', {'input': rnd(1, 2, 4, 5), 'filter': rnd(2, 3, 3, 3), 'bias': rnd(1, 3)}, {'border': border},
             ref=ref.deconv, id=f'deconv2d_{border}') for border in BORDERS],
    *[OpCase('deconv', {'input': rnd(1, 2, 4, 4), 'filter': rnd(2, 2, 3, 3), 'bias': rnd(1, 2)},
             {'border': border, 'stride': [2, 2], 'dilation': [1, 2], 'padding': [(0, 3), (2, 1)]},
             ref=ref.deconv, id=f'deconv2d_{border}_stride_dilation') for border in BORDERS],
    *[OpCase('deconv', {'input': rnd(1, 2, 3, 4), 'filter': rnd(2, 2, 3, 3), 'bias': 0.0},
             {'border': border, 'stride': [2, 2], 'output_shape': [1, 2, 6, 7]}, ref=ref.deconv,
             id=f'deconv2d_{border}_output_shape') for border in BORDERS],
    *[OpCase('deconv', {'input': rnd(2, 2, 4), 'filter': rnd(2, 2, 3), 'bias': 0.0},
             {'border': border, 'padding': [(-1, 2)], 'stride': [3]}, ref=ref.deconv, id=f'deconv1d_{border}_crop')
      for border in BORDERS],
    OpCase('deconv', {'input': rnd(1, 3, 3, 3), 'filter': rnd(3, 1, 3, 3), 'bias': 0.0},
           {'border': 'reflect-even', 'groups': 0, 'stride': [2, 2]}, ref=ref.deconv,
           id='deconv2d_reflect_even_depthwise'),
]

SEPARABLE_CASES = [
    OpCase('separable_conv', {'input': rnd(1, 3, 6, 6), 'plane_filter': rnd(3, 1, 3, 3),
                              'point_filter': rnd(4, 3, 1, 1), 'bias': rnd(1, 4)}, {},
           ref=ref.separable_conv, id='separable_conv'),
    OpCase('separable_conv', {'input': rnd(1, 2, 7, 6), 'plane_filter': rnd(4, 1, 3, 3),
                              'point_filter': rnd(6, 2, 1, 1), 'bias': 0.0},
           {'groups': 2, 'stride': [2, 2], 'dilation': [1, 2], 'border': 'reflect', 'padding': [(1, 1), (2, 1)]},
           ref=ref.separable_conv, id='separable_conv_multiplier_groups_reflect'),
    OpCase('separable_conv', {'input': rnd(2, 2, 7), 'plane_filter': rnd(2, 1, 3), 'point_filter': rnd(3, 2, 1),
                              'bias': 0.0}, {'border': 'replicate', 'stride': [2]},
           ref=ref.separable_conv, id='separable_conv1d_replicate'),
    OpCase('separable_deconv', {'input': rnd(1, 4, 3, 3), 'plane_filter': rnd(3, 1, 3, 3),
                                'point_filter': rnd(4, 3, 1, 1), 'bias': rnd(1, 3)}, {'stride': [2, 2]},
           ref=ref.separable_deconv, id='separable_deconv'),
    OpCase('separable_deconv', {'input': rnd(1, 4, 3, 4), 'plane_filter': rnd(2, 1, 3, 3),
                                'point_filter': rnd(4, 1, 1, 1), 'bias': 0.0},
           {'groups': 2, 'stride': [2, 2], 'output_shape': [1, 2, 5, 7], 'border': 'reflect-even'},
           ref=ref.separable_deconv, id='separable_deconv_groups_reflect_even'),
]

CASES = PAD_CASES + CONV_CASES + DECONV_CASES + SEPARABLE_CASES


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_conv_ops(case: OpCase) -> None:
    check_case(case)


# Gradients (float64) on tiny inputs: one row per code path (fused padding, explicit border, output padding, crop).
GRAD_CASES = [
    OpCase('pad', {'input': rnd(1, 1, 3, 3)}, {'padding': [(0, 0), (0, 0), (1, 2), (2, 0)], 'border': 'reflect-even'},
           id='pad_reflect_even'),
    OpCase('pad', {'input': rnd(2, 2, 3)}, {'padding': [(1, 0), (0, 1), (2, 1)], 'border': 'replicate'},
           id='pad_replicate_all_dims'),
    OpCase('pad', {'input': rnd(1, 1, 3, 3)}, {'padding': [(0, 0), (0, 0), (-1, 2), (1, 1)], 'border': 'reflect'},
           id='pad_reflect_crop'),
    OpCase('conv', {'input': rnd(1, 2, 4, 4), 'filter': rnd(2, 2, 3, 3), 'bias': rnd(1, 2)}, {}, id='conv2d'),
    OpCase('conv', {'input': rnd(1, 2, 5, 4), 'filter': rnd(2, 1, 2, 3), 'bias': rnd(1, 2)},
           {'border': 'replicate', 'stride': [2, 1], 'groups': 0}, id='conv2d_replicate_depthwise'),
    OpCase('conv', {'input': rnd(1, 1, 5, 4), 'filter': rnd(2, 1, 2, 2), 'bias': 0.0},
           {'border': 'reflect-even', 'padding': [(0, 2), (1, 0)], 'dilation': [2, 1]}, id='conv2d_reflect_even'),
    OpCase('conv', {'input': rnd(1, 2, 5), 'filter': rnd(2, 2, 3), 'bias': rnd(1, 2)}, {'border': 'reflect'},
           id='conv1d_reflect'),
    OpCase('conv', {'input': rnd(1, 1, 3, 3, 3), 'filter': rnd(1, 1, 2, 2, 2), 'bias': 0.0}, {}, id='conv3d'),
    OpCase('deconv', {'input': rnd(1, 2, 3, 3), 'filter': rnd(2, 2, 3, 3), 'bias': rnd(1, 2)}, {'stride': [2, 2]},
           id='deconv2d_crop'),
    OpCase('deconv', {'input': rnd(1, 2, 3, 3), 'filter': rnd(2, 1, 3, 3), 'bias': rnd(1, 2)},
           {'stride': [2, 2], 'padding': [(1, 1), (1, 1)], 'output_shape': [1, 2, 6, 6], 'groups': 2},
           id='deconv2d_output_padding_groups'),
    OpCase('deconv', {'input': rnd(1, 1, 3, 3), 'filter': rnd(1, 2, 2, 2), 'bias': 0.0},
           {'border': 'reflect', 'stride': [2, 1]}, id='deconv2d_reflect'),
    OpCase('separable_conv', {'input': rnd(1, 2, 4, 4), 'plane_filter': rnd(2, 1, 2, 2),
                              'point_filter': rnd(2, 2, 1, 1), 'bias': rnd(1, 2)}, {'border': 'replicate'},
           id='separable_conv'),
    OpCase('separable_deconv', {'input': rnd(1, 2, 2, 3), 'plane_filter': rnd(2, 1, 2, 2),
                                'point_filter': rnd(2, 2, 1, 1), 'bias': rnd(1, 2)}, {'stride': [2, 2]},
           id='separable_deconv'),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=case_ids(GRAD_CASES))
def test_conv_ops_gradients(case: OpCase) -> None:
    gradcheck_case(case)


# The spec gives filters no 'ignore' border (the shape rule rejects it in a document); called directly, the torch
# functions take it as zeros outside, the same as 'constant'.
IGNORE_CASES = [
    OpCase('conv', {'input': rnd(1, 2, 6, 5), 'filter': rnd(3, 2, 3, 3), 'bias': rnd(1, 3)},
           {'border': 'ignore', 'padding': [(0, 2), (1, 1)]}, id='conv2d_ignore'),
    OpCase('deconv', {'input': rnd(1, 2, 4, 5), 'filter': rnd(2, 3, 3, 3), 'bias': rnd(1, 3)},
           {'border': 'ignore', 'stride': [2, 2]}, id='deconv2d_ignore'),
]


@pytest.mark.parametrize("case", IGNORE_CASES, ids=case_ids(IGNORE_CASES))
def test_filter_ignore_border_is_constant(case: OpCase) -> None:
    expected = run_reference(OpCase(case.op, case.inputs, {**case.attribs, 'border': 'constant'}))
    assert_close(run_eager(case), expected, case.tol, case.name())
    assert_close(run_traced(case), expected, case.tol, case.name())
