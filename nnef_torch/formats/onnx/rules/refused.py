"""ONNX operators of the default domain that have no NNEF form, with the reason: listed with the unknown ones before
anything is converted, and in the documentation's coverage table."""
from __future__ import annotations

from nnef_torch.ops.registry import refuse_import

ONNX = "onnx"

refuse_import(ONNX, "its output's shape depends on the data; NNEF shapes are known when the graph is read",
              "NonZero", "Unique", "NonMaxSuppression", "Compress")
refuse_import(ONNX, "it draws random values; an NNEF graph is deterministic", "RandomNormal", "RandomUniform",
              "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli")
refuse_import(ONNX, "it works on strings; NNEF tensors hold numbers and logicals", "StringNormalizer",
              "TfIdfVectorizer", "RegexFullMatch", "StringConcat", "StringSplit")
