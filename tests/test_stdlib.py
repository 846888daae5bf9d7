"""The standard library data file: the 119 operations of NNEF 1.0.5, with their declared signatures."""
from __future__ import annotations

from fragment_libraries import library_fragments

from nnef_torch.format.printer import print_fragment
from nnef_torch.ir.deviations import LENIENT_OPS
from nnef_torch.ops.registry import shape_rules
from nnef_torch.stdlib import standard_fragments

SPEC_1_0_5 = ("external variable constant update reshape transpose concat split slice squeeze unsqueeze stack unstack "
              "tile pad gather cast add sub mul div pow exp log sin cos tan sinh cosh tanh asin acos atan asinh acosh "
              "atanh abs sign rcp neg copy lt gt le ge eq ne and or not floor ceil round select sqr sqrt rsqr rsqrt "
              "log2 min max clamp matmul conv deconv box debox argmax_pool sample desample nearest_downsample "
              "area_downsample nearest_upsample multilinear_upsample sum_reduce max_reduce min_reduce argmax_reduce "
              "argmin_reduce any_reduce all_reduce mean_reduce moments relu sigmoid softabs softmax softplus elu selu "
              "gelu silu prelu leaky_relu max_pool_with_index max_pool avg_pool rms_pool linear separable_conv "
              "separable_deconv local_response_normalization local_mean_normalization local_variance_normalization "
              "local_contrast_normalization l1_normalization l2_normalization batch_normalization avg_roi_pool "
              "max_roi_pool roi_resample avg_roi_align max_roi_align min_max_linear_quantize "
              "zero_point_linear_quantize linear_quantize logarithmic_quantize copy_n add_n").split()


def test_the_stdlib_declares_exactly_the_119_operations_of_nnef_1_0_5():
    assert len(SPEC_1_0_5) == 119
    assert sorted(standard_fragments()) == sorted(SPEC_1_0_5)


def test_every_standard_operation_has_a_shape_rule():
    # beyond the standard ops, only fragments of the package's own libraries (front ends), tested with them
    assert set(SPEC_1_0_5) <= set(shape_rules())
    assert set(shape_rules()) - set(SPEC_1_0_5) <= library_fragments() | LENIENT_OPS  # and what real producers write


def test_later_signatures():
    std = standard_fragments()
    heads = {name: print_fragment(std[name]).split("\n")[0] for name in ("reshape", "slice", "elu", "gelu", "cast")}
    assert "axis_start: integer = 0, axis_count: integer = -1" in heads["reshape"]
    assert "stride: integer[] = []" in heads["slice"]
    assert "alpha: scalar = 1.0" in heads["elu"]
    assert "cast<?>( input: tensor<> )" in heads["cast"]
    assert "sigmoid(1.702 * x)" in print_fragment(std["gelu"])
    quantize = std["zero_point_linear_quantize"]
    assert [str(p.type) for p in quantize.params[:3]] == ["tensor<scalar>", "tensor<integer>", "tensor<scalar>"]
