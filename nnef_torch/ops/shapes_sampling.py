"""Shape rules of up- and down-sampling (spec 4.3.4), the local (windowed) normalizations (4.9.4) and the
region-of-interest ops (4.6).
"""
from __future__ import annotations

from collections.abc import Sequence

from nnef_torch.ops.registry import shape_rule
from nnef_torch.ops.shapes_common import (
    FILTER_BORDERS,
    RESIZE_METHODS,
    Shape,
    check_choice,
    check_length,
    check_positive,
    check_rank_at_least,
    fail,
    fmt,
)

# Up- and down-sampling by integer factors in the spatial dimensions (spec 4.3.4).

def _check_factor(op: str, input: Shape, factor: Sequence[int]) -> None:
    check_rank_at_least(op, 'input', input, 2)
    check_length(op, 'factor', factor, len(input) - 2, what="spatial dimension")
    check_positive(op, 'factor', factor)


def _downsample(op: str, input: Shape, factor: Sequence[int]) -> Shape:
    _check_factor(op, input, factor)
    spatial = input[2:]
    if any(extent % f != 0 for extent, f in zip(spatial, factor)):
        fail(op, f"'factor' {fmt(factor)} must divide the spatial extents {fmt(spatial)} of input {fmt(input)}")
    return tuple(input[:2]) + tuple(extent // f for extent, f in zip(spatial, factor))


def _upsample(op: str, input: Shape, factor: Sequence[int]) -> Shape:
    _check_factor(op, input, factor)
    return tuple(input[:2]) + tuple(extent * f for extent, f in zip(input[2:], factor))


@shape_rule('nearest_downsample')
def nearest_downsample(input: Shape, *, factor: Sequence[int]) -> Shape:
    return _downsample('nearest_downsample', input, factor)


@shape_rule('area_downsample')
def area_downsample(input: Shape, *, factor: Sequence[int]) -> Shape:
    return _downsample('area_downsample', input, factor)


@shape_rule('nearest_upsample')
def nearest_upsample(input: Shape, *, factor: Sequence[int]) -> Shape:
    return _upsample('nearest_upsample', input, factor)


@shape_rule('multilinear_upsample')
def multilinear_upsample(input: Shape, *, factor: Sequence[int], method: str, border: str) -> Shape:
    check_choice('multilinear_upsample', 'method', method, RESIZE_METHODS)
    check_choice('multilinear_upsample', 'border', border, FILTER_BORDERS)
    return _upsample('multilinear_upsample', input, factor)


# Local normalizations (spec 4.9.4): a box window of `size` over every dimension, stride 1 and automatic padding,
# so the shape is kept.

def _local(op: str, input: Shape, size: Sequence[int]) -> Shape:
    check_length(op, 'size', size, len(input), what="input dimension")
    check_positive(op, 'size', size)
    return tuple(input)


@shape_rule('local_response_normalization')
def local_response_normalization(input: Shape, *, size: Sequence[int], alpha: float, beta: float,
                                 bias: float) -> Shape:
    return _local('local_response_normalization', input, size)


@shape_rule('local_mean_normalization')
def local_mean_normalization(input: Shape, *, size: Sequence[int]) -> Shape:
    return _local('local_mean_normalization', input, size)


@shape_rule('local_variance_normalization')
def local_variance_normalization(input: Shape, *, size: Sequence[int], bias: float, epsilon: float) -> Shape:
    return _local('local_variance_normalization', input, size)


@shape_rule('local_contrast_normalization')
def local_contrast_normalization(input: Shape, *, size: Sequence[int], bias: float, epsilon: float) -> Shape:
    return _local('local_contrast_normalization', input, size)


# Region of interest ops (spec 4.6): output [N, C, *output_size] for N regions of a [B, C, ...] input.

def _roi(op: str, input: Shape, rois: Shape, batch_index: Shape, output_size: Sequence[int]) -> Shape:
    check_rank_at_least(op, 'input', input, 2)
    spatial = len(input) - 2
    check_length(op, 'output_size', output_size, spatial, what="spatial dimension")
    check_positive(op, 'output_size', output_size)
    # rois hold a begin and an end per spatial dimension (spec: [N, 2 * M]; the Khronos tools require [N, 4]).
    if len(rois) != 2 or rois[1] != 2 * spatial:
        fail(op, f"rois must have shape [N,{2 * spatial}] (two coordinates per spatial dimension of input "
                 f"{fmt(input)}), found {fmt(rois)}")
    # The spec writes [N, 1], the Khronos tools [N]; with trailing singleton dimensions they are the same.
    if tuple(batch_index) not in ((rois[0],), (rois[0], 1)):
        fail(op, f"batch_index must have shape [{rois[0]}] (one batch index per region in rois {fmt(rois)}), "
                 f"found {fmt(batch_index)}")
    return (rois[0], input[1]) + tuple(output_size)


@shape_rule('avg_roi_pool')
def avg_roi_pool(input: Shape, rois: Shape, batch_index: Shape, *, output_size: Sequence[int]) -> Shape:
    return _roi('avg_roi_pool', input, rois, batch_index, output_size)


@shape_rule('max_roi_pool')
def max_roi_pool(input: Shape, rois: Shape, batch_index: Shape, *, output_size: Sequence[int]) -> Shape:
    return _roi('max_roi_pool', input, rois, batch_index, output_size)


@shape_rule('roi_resample')
def roi_resample(input: Shape, rois: Shape, batch_index: Shape, *, output_size: Sequence[int],
                 method: str) -> Shape:
    check_choice('roi_resample', 'method', method, RESIZE_METHODS)
    return _roi('roi_resample', input, rois, batch_index, output_size)


def _roi_align(op: str, input: Shape, rois: Shape, batch_index: Shape, output_size: Sequence[int],
               sampling_rate: Sequence[int], resize_method: str) -> Shape:
    check_choice(op, 'resize_method', resize_method, RESIZE_METHODS)
    output = _roi(op, input, rois, batch_index, output_size)
    check_length(op, 'sampling_rate', sampling_rate, len(input) - 2, what="spatial dimension")
    check_positive(op, 'sampling_rate', sampling_rate)
    return output


@shape_rule('avg_roi_align')
def avg_roi_align(input: Shape, rois: Shape, batch_index: Shape, *, output_size: Sequence[int],
                  sampling_rate: Sequence[int], resize_method: str) -> Shape:
    return _roi_align('avg_roi_align', input, rois, batch_index, output_size, sampling_rate, resize_method)


@shape_rule('max_roi_align')
def max_roi_align(input: Shape, rois: Shape, batch_index: Shape, *, output_size: Sequence[int],
                  sampling_rate: Sequence[int], resize_method: str) -> Shape:
    return _roi_align('max_roi_align', input, rois, batch_index, output_size, sampling_rate, resize_method)
