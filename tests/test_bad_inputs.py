"""The bad-input suite: malformed NNEF documents, one row each (graph.quant rows: tests/format/test_quant_file.py) (spec 3.1-3.3, 4, 5.3, 6).

Each row names the error class, the line and column where the error IS according to the spec (not where some
implementation happens to notice it), and a piece of the message. Every row also states what the Khronos `nnef`
package (the independent oracle) does with the same text, and that is checked too where it is installed:

- PARSE: `nnef.parse_string(text, lowered=[])` rejects it.
- LOWERED: it is rejected only when the document's own fragments are expanded (`lowered=[their names]`): Khronos
  checks fragment bodies only as far as it expands them.
- SHAPES: it is rejected only by `nnef.infer_shapes` (argument validity of chapter 4).
- ACCEPTS: Khronos accepts a document that the spec forbids; the row's comment says which rule it misses.
- CRASHES: Khronos kills the process (stack overflow, SIGFPE) instead of reporting an error. (All Khronos checks
  run in a child process for this reason.)
- SLOW: Khronos takes minutes on it; the row's comment records what it does, and it is not run.
- NONE: not a document property (an argument of our API), so there is nothing to ask Khronos.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

import pytest

from nnef_torch.errors import (
    SHOWN_LINE,
    NNEFError,
    NNEFSemanticError,
    NNEFShapeError,
    NNEFSyntaxError,
    NNEFTypeError,
)
from nnef_torch.format.parser import parse_document
from nnef_torch.ir.lower import lower

PARSE, LOWERED, SHAPES, ACCEPTS, CRASHES, SLOW, NONE = "parse", "lowered", "shapes", "accepts", "crashes", "slow", \
    "none"


@dataclass(frozen=True)
class Bad:
    id: str
    text: str
    error: type[NNEFError]
    line: int
    column: int | None  # None where no column is meaningful
    message: str  # a substring of the message
    khronos: str = PARSE  # what the Khronos package does with it (see the module docstring)
    input_shapes: dict | None = field(default=None, compare=False)


def body(*statements: str, operators: bool = False) -> str:
    """A graph `G( input ) -> ( output )` with `input` of shape [1,4,8,8] (line 5) and then `statements`, which
    start on line 6, column 5. Line 2 enables operator expressions when asked, else it is a comment."""
    lines = ["version 1.0;",
             "extension KHR_enable_operator_expressions;" if operators else "# flat syntax only",
             "graph G( input ) -> ( output )",
             "{",
             "    input = external(shape = [1,4,8,8]);"]
    return "\n".join(lines + ["    " + statement for statement in statements] + ["}", ""])


def fragments(definitions: str, *statements: str) -> str:
    """`definitions` from line 3 on (both extensions enabled), then a graph whose body is `statements`."""
    head = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
    graph = ["graph G( input ) -> ( output )", "{", "    input = external(shape = [1,4,8,8]);"]
    graph += ["    " + statement for statement in statements or ("output = f(input);",)]
    return head + textwrap.dedent(definitions).strip("\n") + "\n" + "\n".join(graph + ["}", ""])


def doc(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


LEXICAL = [
    Bad("lex_bad_character", body("output = relu(input) @;"), NNEFSyntaxError, 6, 26, "unexpected character '@'"),
    Bad("lex_non_ascii_letter", body("outpüt = relu(input);"), NNEFSyntaxError, 6, 9, "unexpected character 'ü'"),
    # regression: '²'.isdigit() is true, and the lexer crashed with AttributeError on it
    Bad("lex_non_ascii_digit", body("output = mul(input, ²);"), NNEFSyntaxError, 6, 25,
        "unexpected character '²'"),
    Bad("lex_control_character", body("output = relu(\x07input);"), NNEFSyntaxError, 6, 19,
        "unexpected character '\\x07'"),
    # the string that is not closed starts at its opening quote
    Bad("lex_unterminated_string", body("filter = variable(shape = [4,4,1,1], label = 'filter);",
                                        "output = conv(input, filter);"), NNEFSyntaxError, 6, 50,
        "unterminated string"),
    Bad("lex_unterminated_string_at_end", doc("""
        version 1.0;
        graph G( input ) -> ( output )
        {
            input = external(shape = [1]);
            output = variable(shape = [1], label = "abc\\"""), NNEFSyntaxError, 5, 44, "unterminated string"),
    # ACCEPTS: the Khronos lexer takes any byte up to the closing quote; spec 3.1 allows printable ASCII only
    Bad("lex_control_character_in_string", body("filter = variable(shape = [4,4,1,1], label = 'fil\x01ter');",
                                                "output = conv(input, filter);"), NNEFSyntaxError, 6, 54,
        "printable ASCII", khronos=ACCEPTS),
    Bad("lex_non_ascii_in_string", body("filter = variable(shape = [4,4,1,1], label = 'filtér');",
                                        "output = conv(input, filter);"), NNEFSyntaxError, 6, 55,
        "printable ASCII", khronos=ACCEPTS),
    # ACCEPTS: Khronos reads numbers with atof, which gives inf without complaint
    Bad("lex_scalar_out_of_range", body("output = mul(input, 1e999);"), NNEFSyntaxError, 6, 25, "out of range",
        khronos=ACCEPTS),
    # SHAPES: Khronos reads integers with atoi, which wraps this one to -1; only infer_shapes then objects to
    # bits = -1, so the overflow itself goes unnoticed
    Bad("lex_integer_out_of_range",
        body("output = linear_quantize(input, min = 0.0, max = 1.0, bits = 99999999999999999999);"),
        NNEFSyntaxError, 6, 66, "out of range", khronos=SHAPES),
    # regression: int() refuses more than 4300 digits, and the ValueError escaped the lexer
    Bad("lex_integer_of_5000_digits",
        body("output = linear_quantize(input, min = 0.0, max = 1.0, bits = " + "9" * 5000 + ");"),
        NNEFSyntaxError, 6, 66, "out of range", khronos=SHAPES),
    Bad("lex_exponent_without_digits", body("output = mul(input, 1.5e);"), NNEFSyntaxError, 6, 25,
        "malformed numeric literal '1.5e'"),
    Bad("lex_letter_after_number", body("output = mul(input, 2x);"), NNEFSyntaxError, 6, 25,
        "malformed numeric literal '2x'"),
]

SYNTAX = [
    # a missing ';' is missing at the end of its line, not at the start of the next one
    Bad("syntax_missing_semicolon_at_end", body("output = relu(input)"), NNEFSyntaxError, 6, 25, "expected ';'"),
    Bad("syntax_missing_semicolon_between", body("hidden = relu(input)", "output = relu(hidden);"),
        NNEFSyntaxError, 6, 25, "expected ';', found 'output'"),
    Bad("syntax_missing_semicolon_same_line", body("hidden = relu(input) output = relu(hidden);"),
        NNEFSyntaxError, 6, 26, "expected ';', found 'output'"),
    Bad("syntax_missing_arrow", doc("""
        version 1.0;
        graph G( input ) ( output )
        {
            input = external(shape = [1]);
            output = relu(input);
        }
        """), NNEFSyntaxError, 2, 18, "expected '->'"),
    Bad("syntax_version_not_real", body("output = relu(input);").replace("1.0", "1", 1), NNEFSyntaxError, 1, 9,
        "version number"),
    # spec 3.2.4: major and minor version separated by a dot
    Bad("syntax_version_with_exponent", body("output = relu(input);").replace("1.0", "1.0e0", 1), NNEFSyntaxError,
        1, 9, "version number"),
    # the spec defines 1.0 only; like Khronos, refuse a major version this reader does not know
    Bad("semantic_unsupported_version", body("output = relu(input);").replace("1.0", "2.0", 1),
        NNEFSemanticError, 1, 9, "unsupported NNEF version 2.0"),
    # the graph is missing at the end of the text: just after the last token
    Bad("syntax_missing_graph", doc("""
        version 1.0;
        extension KHR_enable_fragment_definitions;
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> );
        """), NNEFSyntaxError, 3, 58, "expected 'fragment' or 'graph', found end of input"),
    Bad("syntax_tokens_after_graph", body("output = relu(input);") + "output = relu(input);\n", NNEFSyntaxError,
        8, 1, "expected end of input, found 'output'"),
    Bad("syntax_unknown_tensor_item_type", fragments("""
        fragment f( x: tensor<float> ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """), NNEFSyntaxError, 3, 23, "expected a type name"),
    Bad("syntax_tensor_type_without_brackets", fragments("""
        fragment f( x: tensor, n: integer ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """), NNEFSyntaxError, 3, 22, "expected '<'"),
    Bad("syntax_one_item_tuple_type", fragments("""
        fragment f( x: tensor<scalar>, p: (integer) ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """), NNEFSyntaxError, 3, 35, "tuple type needs at least two"),
    Bad("syntax_bad_generic_declaration", fragments("""
        fragment f<scalar>( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """), NNEFSyntaxError, 3, 12, "expected '?'"),
    Bad("syntax_positional_after_named", body("output = add(x = input, input);"), NNEFSyntaxError, 6, 29,
        "positional arguments must precede named arguments"),
    Bad("syntax_empty_body", doc("""
        version 1.0;
        graph G( input ) -> ( output )
        {
        }
        """), NNEFSyntaxError, 4, 1, "at least one assignment"),
    Bad("syntax_empty_graph_parameters", doc("""
        version 1.0;
        graph G( ) -> ( output )
        {
            output = external(shape = [1]);
        }
        """), NNEFSyntaxError, 2, 10, "expected an identifier, found ')'"),
    Bad("syntax_missing_equals", body("output relu(input);"), NNEFSyntaxError, 6, 12, "expected '='"),
    Bad("syntax_literal_on_left_side", body("1.0 = relu(input);"), NNEFSyntaxError, 6, 5, "left-hand side"),
    Bad("syntax_keyword_as_identifier", doc("""
        version 1.0;
        graph G( tensor ) -> ( output )
        {
            tensor = external(shape = [1]);
            output = relu(tensor);
        }
        """), NNEFSyntaxError, 2, 10, "expected an identifier, found 'tensor'"),
    Bad("syntax_unclosed_parenthesis", body("output = relu(input;"), NNEFSyntaxError, 6, 24, "expected ')'"),
    Bad("syntax_missing_argument_expression", body("output = relu(,);"), NNEFSyntaxError, 6, 19,
        "expected an expression, found ','"),
    Bad("syntax_if_without_else", body("output = input if true;", operators=True), NNEFSyntaxError, 6, 27,
        "expected 'else'"),
    Bad("syntax_comprehension_without_yield", body("output = reshape(input, shape = [for i in [1,4,8,8] i]);",
                                                   operators=True), NNEFSyntaxError, 6, 57, "expected 'yield'"),
    # default values are literal expressions (spec 3.2.2)
    Bad("syntax_default_not_literal", fragments("""
        fragment f( x: tensor<scalar>, n: integer = 1 + 2 ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """), NNEFSyntaxError, 3, 47, "expected ')', found '+'"),
    Bad("syntax_extension_without_name", doc("""
        version 1.0;
        extension;
        graph G( input ) -> ( output )
        {
            input = external(shape = [1]);
            output = relu(input);
        }
        """), NNEFSyntaxError, 2, 10, "expected an identifier"),
    Bad("syntax_fragment_without_results", fragments("""
        fragment f( x: tensor<scalar> );
        """), NNEFSyntaxError, 3, 32, "expected '->'"),
    # An implementation limit, not a rule of the spec, which sets none: this document is valid and Khronos (ACCEPTS)
    # is right. Ours refuses more than 50 levels (here at the 49th '(', since 'shape = [' is 3 levels deep already)
    # with a syntax error, where Python's recursion limit would otherwise end the parse with a RecursionError.
    Bad("syntax_nesting_too_deep", body("output = reshape(input, shape = [" + "(" * 60 + "256" + ")" * 60 + "]);",
                                        operators=True), NNEFSyntaxError, 6, 86, "nest at most 50 levels",
        khronos=ACCEPTS),
]

INVOCATIONS = [
    Bad("undefined_operation", body("output = relux(input);"), NNEFSemanticError, 6, 14,
        "undefined operation 'relux'"),
    # the error is the first argument too many, not the operation name
    Bad("too_many_arguments", body("output = relu(input, input);"), NNEFSemanticError, 6, 26,
        "'relu' takes at most 1 arguments, 2 given"),
    Bad("missing_argument", body("output = conv(input);"), NNEFSemanticError, 6, 14,
        "missing argument 'filter' of 'conv'"),
    Bad("unknown_named_argument", body("output = relu(input, alpha = 2.0);"), NNEFSemanticError, 6, 26,
        "no parameter named 'alpha'"),
    Bad("duplicate_named_argument", body("output = softmax(input, axes = [1], axes = [2]);"), NNEFSemanticError,
        6, 41, "'axes' of 'softmax' is given more than once"),
    Bad("named_argument_also_positional", body("output = relu(input, x = input);"), NNEFSemanticError, 6, 26,
        "'x' of 'relu' is given more than once"),
    Bad("attribute_passed_positionally", body("output = softmax(input, [1]);"), NNEFSemanticError, 6, 29,
        "attribute 'axes' of 'softmax' must be passed by name"),
    # an integer casts to tensor<integer>, never to tensor<scalar> (spec 3.3.1, type casting)
    Bad("integer_literal_for_scalar_tensor", body("output = add(input, 1);"), NNEFTypeError, 6, 25,
        "argument 'y' of 'add' must be tensor<scalar>, found integer"),
    Bad("string_for_integer", body("output = linear_quantize(input, min = 0.0, max = 1.0, bits = 'eight');"),
        NNEFTypeError, 6, 59, "argument 'bits' of 'linear_quantize' must be integer, found string"),
    Bad("scalars_for_integer_array", body("output = reshape(input, shape = [1.0, 256.0]);"), NNEFTypeError, 6, 29,
        "must be integer[], found scalar[]"),
    Bad("generic_deduction_ambiguous", body("condition = gt(input, 0.0);", "output = select(condition, input, 1);"),
        NNEFTypeError, 7, 14, "generic type of 'select' is ambiguous"),
    Bad("generic_deduction_fails", fragments("""
        fragment zeros<?>( shape: integer[] ) -> ( output: tensor<?> );
        """, "output = zeros(shape = [1,4,8,8]);"), NNEFTypeError, 7, 14, "generic type of 'zeros' cannot be deduced"),
    # ACCEPTS: Khronos ignores the <scalar>; spec 3.3.2 allows name<type> for generic fragments only
    Bad("explicit_generic_on_non_generic", body("output = relu<scalar>(input);"), NNEFSemanticError, 6, 14,
        "'relu' is not generic", khronos=ACCEPTS),
    # CRASHES: Khronos dies on <?> in the graph body, where there is no generic type to propagate
    Bad("generic_propagation_in_graph", body("output = copy<?>(input);"), NNEFSemanticError, 6, 14,
        "'<?>' may only be used inside a generic fragment", khronos=CRASHES),
    Bad("generic_propagation_in_non_generic_fragment", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = copy<?>(x);
        }
        """), NNEFSemanticError, 5, 9, "'<?>' may only be used inside a generic fragment"),
    # invocation chaining needs a single tensor result (spec 3.3.3)
    Bad("chained_invocation_with_two_results", body("output = relu(moments(input, axes = [1]));", operators=True),
        NNEFSemanticError, 6, 19, "'moments' has several results"),
    Bad("tuple_left_side_for_one_result", body("hidden, output = relu(input);"), NNEFTypeError, 6, 5,
        "cannot unpack tensor<scalar> into a tuple of 2"),
    # the left-hand side must be structurally equivalent to the result type: an array of names here
    Bad("identifier_for_array_result", body("output = split(input, axis = 1, ratios = [1, 1]);"), NNEFTypeError,
        6, 5, "'output' has type tensor<scalar>[]"),
]

EXTENSIONS = [
    Bad("operator_expression_without_extension", body("output = relu(input) + input;"), NNEFSemanticError, 6, 26,
        "KHR_enable_operator_expressions"),
    # ACCEPTS: Khronos allows nested invocations in flat syntax; in spec 3.2.1 an argument of the flat syntax is an
    # identifier, a literal, an array or a tuple, and invocation chaining comes with the extension (3.2.3)
    Bad("chained_invocation_without_extension", body("output = add(relu(input), input);"), NNEFSemanticError,
        6, 18, "KHR_enable_operator_expressions", khronos=ACCEPTS),
    Bad("identifier_right_side_without_extension", body("output = input;"), NNEFSemanticError, 6, 14,
        "KHR_enable_operator_expressions"),
    Bad("fragment_without_extension", doc("""
        version 1.0;
        # no extension line
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = relu(x);
        }
        graph G( input ) -> ( output )
        {
            input = external(shape = [1]);
            output = f(input);
        }
        """), NNEFSemanticError, 3, 1, "KHR_enable_fragment_definitions"),
]

EXPRESSION_TYPES = [
    Bad("if_condition_not_logical", body("output = input if 1 else input;", operators=True), NNEFTypeError, 6, 23,
        "condition of 'if' must be logical, not integer"),
    Bad("integer_plus_scalar", body("output = reshape(input, shape = [1 + 2.0, 4, 8, 8]);", operators=True),
        NNEFTypeError, 6, 40, "'+' cannot be applied to integer and scalar"),
    Bad("not_of_integer", body("output = input if !1 else input;", operators=True), NNEFTypeError, 6, 23,
        "unary '!' cannot be applied to integer"),
    Bad("array_items_without_common_type", body("output = reshape(input, shape = [1, 'a']);"), NNEFTypeError, 6, 37,
        "array items have no common type"),
    Bad("length_of_integer", body("output = reshape(input, shape = [length_of(1), 4, 8, 8]);", operators=True),
        NNEFTypeError, 6, 38, "'length_of' cannot be applied to integer"),
]

FRAGMENTS = [
    Bad("fragment_duplicate_parameter", fragments("""
        fragment f( x: tensor<scalar>, x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """), NNEFSemanticError, 3, 32, "declares 'x' twice"),
    Bad("fragment_result_named_like_parameter", fragments("""
        fragment f( x: tensor<scalar> ) -> ( x: tensor<scalar> )
        {
            x = relu(x);
        }
        """), NNEFSemanticError, 3, 38, "declares 'x' twice"),
    Bad("fragment_tensor_after_attribute", fragments("""
        fragment f( alpha: scalar, x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = x * alpha;
        }
        """, "output = f(alpha = 1.0, x = input);"), NNEFSemanticError, 3, 28, "must precede attributes"),
    Bad("fragment_non_tensor_result", fragments("""
        fragment f( x: tensor<scalar> ) -> ( n: integer )
        {
            n = 1;
        }
        """), NNEFTypeError, 3, 38, "must be a tensor type, not integer"),
    Bad("fragment_unbound_tensor_result", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<> )
        {
            y = x;
        }
        """), NNEFTypeError, 3, 38, "cannot be the unbound tensor<>"),
    Bad("fragment_default_of_wrong_type", fragments("""
        fragment f( x: tensor<scalar>, n: integer = 1.5 ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """), NNEFTypeError, 3, 45, "default value of 'n' has type scalar, expected integer"),
    Bad("fragment_generic_but_unused", fragments("""
        fragment f<?>( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """), NNEFSemanticError, 3, 1, "declared generic but no parameter or result uses '?'"),
    # the error is the first use of '?', which the missing <?> leaves undeclared
    Bad("fragment_question_mark_without_generic", fragments("""
        fragment f( x: tensor<?> ) -> ( y: tensor<?> )
        {
            y = x;
        }
        """), NNEFSemanticError, 3, 13, "must be declared generic with <?>"),
    Bad("fragment_tuple_mixes_tensor_and_attribute", fragments("""
        fragment f( x: tensor<scalar>, p: (tensor<scalar>, integer) ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """), NNEFTypeError, 3, 32, "mixes tensor and non-tensor items"),
    Bad("fragment_assigns_parameter", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            x = relu(x);
            y = x;
        }
        """), NNEFSemanticError, 5, 5, "parameter 'x' of 'f' cannot be assigned"),
    # a result that is never assigned is missing where it is declared
    Bad("fragment_result_never_assigned", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar>, z: tensor<scalar> )
        {
            y = x;
        }
        """, "output, extra = f(input);"), NNEFSemanticError, 3, 57, "result 'z' of fragment 'f' is never assigned"),
    Bad("fragment_result_assigned_twice", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = x;
            y = relu(x);
        }
        """), NNEFSemanticError, 6, 5, "'y' is assigned more than once"),
    Bad("fragment_local_used_before_assignment", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = add(x, t);
            t = relu(x);
        }
        """), NNEFSemanticError, 5, 16, "'t' is used before it is assigned"),
    Bad("fragment_result_of_wrong_type", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = argmax_reduce(x, axes = [1]);
        }
        """), NNEFTypeError, 5, 5, "declared tensor<scalar> but assigned tensor<integer>"),
    Bad("variable_inside_fragment", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = variable(shape = [1], label = 'w');
        }
        """), NNEFSemanticError, 5, 9, "'variable' may only be used in the graph body"),
    Bad("update_inside_fragment", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = update(x, x);
        }
        """), NNEFSemanticError, 5, 9, "'update' may only be used in the graph body"),
    Bad("external_inside_fragment", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = external(shape = [1]);
        }
        """), NNEFSemanticError, 5, 9, "'external' may only be used in the graph body"),
    Bad("fragment_redefines_standard_operation", fragments("""
        fragment relu( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        """, "output = relu(input);"), NNEFSemanticError, 3, 1, "'relu' redefines a standard operation"),
    Bad("fragment_defined_twice", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = x;
        }
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = relu(x);
        }
        """), NNEFSemanticError, 7, 1, "'f' is defined twice"),
    # CRASHES: expanding 'f' without end overflows the Khronos parser's stack (SIGSEGV) when it lowers 'f'
    Bad("fragment_unbounded_recursion", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = f(x);
        }
        """), NNEFSemanticError, 5, 9, "unbounded recursion", khronos=CRASHES),
]

GRAPH = [
    Bad("graph_parameter_not_external", doc("""
        version 1.0;
        graph G( input ) -> ( output )
        {
            input = variable(shape = [1], label = 'v');
            output = relu(input);
        }
        """), NNEFSemanticError, 4, 5, "graph parameter 'input' must be defined by external"),
    Bad("external_not_graph_parameter", body("other = external(shape = [1]);", "output = relu(input);"),
        NNEFSemanticError, 6, 5, "'other' is defined by external but is not a graph parameter"),
    # a parameter that no external defines is missing where the declaration names it
    Bad("graph_parameter_never_defined", doc("""
        version 1.0;
        graph G( input, other ) -> ( output )
        {
            input = external(shape = [1]);
            output = relu(input);
        }
        """), NNEFSemanticError, 2, 17, "graph parameter 'other' is never defined by external"),
    Bad("graph_parameter_declared_twice", doc("""
        version 1.0;
        graph G( input, input ) -> ( output )
        {
            input = external(shape = [1]);
            output = relu(input);
        }
        """), NNEFSemanticError, 2, 17, "graph parameter 'input' is declared twice"),
    Bad("identifier_assigned_twice", body("output = relu(input);", "output = relu(input);"), NNEFSemanticError,
        7, 5, "'output' is assigned more than once"),
    Bad("identifier_used_before_definition", body("output = add(input, hidden);", "hidden = relu(input);"),
        NNEFSemanticError, 6, 25, "'hidden' is used before it is assigned"),
    # ACCEPTS (both): Khronos lets graph identifiers hold integers and tensor arrays; spec 3.3.2 says "all
    # individual identifiers in the graph body must be of type tensor"
    Bad("integer_identifier_in_graph", body("n = 3;", "output = relu(input);", operators=True), NNEFTypeError,
        6, 5, "identifiers in the graph body must be tensors; 'n' has type integer", khronos=ACCEPTS),
    Bad("array_identifier_in_graph", body("both = [input, input];", "output = relu(input);", operators=True),
        NNEFTypeError, 6, 5, "'both' has type tensor<scalar>[]", khronos=ACCEPTS),
    Bad("graph_result_never_assigned", body("hidden = relu(input);"), NNEFSemanticError, 3, 23,
        "graph result 'output' is never assigned"),
]

EVALUATION = [
    Bad("index_out_of_range", body("output = reshape(input, shape = [[1,4,8,8]][1]);", operators=True),
        NNEFSemanticError, 6, 49, "index 1 is out of range for length 1"),
    # LOWERED: Khronos evaluates a fragment body only when it expands the fragment
    Bad("index_out_of_range_in_fragment", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = reshape(x, shape = [[256]][1]);
        }
        """), NNEFSemanticError, 5, 36, "index 1 is out of range for length 1", khronos=LOWERED),
    Bad("integer_division_by_zero", body("output = reshape(input, shape = [1, 4, 8, 8 / 0]);", operators=True),
        NNEFSemanticError, 6, 49, "integer division by zero", khronos=CRASHES),  # SIGFPE in Khronos
    # the error is the array whose length differs from the first one's
    Bad("comprehension_lengths_differ",
        body("output = reshape(input, shape = [for i in [1, 4, 8, 8], j in [1] yield i * j]);", operators=True),
        NNEFSemanticError, 6, 66, "'i' has 4 items, 'j' has 1"),
    # An implementation limit (2^24 items): the spec sets none. SLOW: Khronos spends about a minute building the
    # 10^8 items, then its reshape volume check rejects the document (SHAPES); too slow to run here.
    Bad("array_repetition_too_long", body("output = reshape(input, shape = [1] * 100000000);", operators=True),
        NNEFSemanticError, 6, 41, "too long", khronos=SLOW),
    Bad("integer_of_bad_string", body("output = reshape(input, shape = [integer('four'), 64]);", operators=True),
        NNEFSemanticError, 6, 38, "'four' is not an integer literal"),
    # SHAPES (this row and the next): Khronos computes in a C++ int without an overflow check; only the reshape
    # volume check then fails on the wrapped value
    Bad("integer_of_huge_scalar", body("output = reshape(input, shape = [integer(1e300)]);", operators=True),
        NNEFSemanticError, 6, 38, "integer overflow", khronos=SHAPES),
    Bad("integer_overflow", body("output = reshape(input, shape = [2 ^ 100]);", operators=True), NNEFSemanticError,
        6, 40, "integer overflow", khronos=SHAPES),
]

VARIABLES = [
    # label rules are argument validity of `variable` (spec 4.1.3)
    # ACCEPTS: Khronos checks no label (it only uses labels to find .dat files)
    Bad("variable_empty_label", body("filter = variable(shape = [4,4,1,1], label = '');",
                                     "output = conv(input, filter);"), NNEFShapeError, 6, 14,
        "'label' must be a non-empty string", khronos=ACCEPTS),
    Bad("variable_bad_label_characters", body("filter = variable(shape = [4,4,1,1], label = 'conv 1:filter');",
                                              "output = conv(input, filter);"), NNEFShapeError, 6, 14,
        "found 'conv 1:filter'", khronos=ACCEPTS),
    Bad("variable_shared_label_different_shapes",
        body("a = variable(shape = [4,4,1,1], label = 'w');", "b = variable(shape = [4,4,3,3], label = 'W');",
             "output = add(conv(input, a), conv(input, b));", operators=True), NNEFShapeError, 7, 9,
        "share label 'W'", khronos=ACCEPTS),
    Bad("update_of_non_variable", body("output = update(input, input);"), NNEFSemanticError, 6, 14,
        "'input' is not a variable"),
    # ACCEPTS: Khronos lets a variable be updated twice; spec 4.8: "each variable can only be updated once"
    Bad("variable_updated_twice", body("w = variable(shape = [1,4,8,8], label = 'w');", "a = update(w, input);",
                                       "output = update(w, input);"), NNEFSemanticError, 8, 14,
        "'w' is updated more than once", khronos=ACCEPTS),
]

SHAPES_ = [
    # ACCEPTS: Khronos takes extent 0; spec 4.1.1: items in shape must be strictly positive
    Bad("external_shape_not_positive", doc("""
        version 1.0;
        graph G( input ) -> ( output )
        {
            input = external(shape = [1,0]);
            output = relu(input);
        }
        """), NNEFShapeError, 4, 13, "external", khronos=ACCEPTS),
    Bad("update_shape_mismatch", body("w = variable(shape = [1,4], label = 'w');", "output = update(w, input);"),
        NNEFShapeError, 7, 14, "update", khronos=SHAPES),
    Bad("conv_channel_mismatch", body("filter = variable(shape = [8,3,3,3], label = 'filter');",
                                      "output = conv(input, filter);"), NNEFShapeError, 7, 14, "conv", khronos=SHAPES),
    Bad("reshape_volume_mismatch", body("output = reshape(input, shape = [1,4,8,9]);"), NNEFShapeError, 6, 14,
        "reshape", khronos=SHAPES),
    # ACCEPTS: Khronos clamps begin and end (a later-version rule) and gives extent 0; spec 4.5.4 wants both in
    # (-x, x] and end > begin
    Bad("slice_out_of_range", body("output = slice(input, axes = [1], begin = [5], end = [6]);"), NNEFShapeError,
        6, 14, "slice", khronos=ACCEPTS),
    Bad("split_ratios_do_not_divide", body("[a, b] = split(input, axis = 1, ratios = [1, 2]);",
                                           "output = add(a, b);"), NNEFShapeError, 6, 14, "split", khronos=SHAPES),
    Bad("transpose_not_permutation", body("output = transpose(input, axes = [0, 1, 1, 2]);"), NNEFShapeError, 6, 14,
        "transpose", khronos=SHAPES),
    Bad("binary_broadcast_mismatch", body("bias = variable(shape = [1,3,8,8], label = 'bias');",
                                          "output = add(input, bias);"), NNEFShapeError, 7, 14, "broadcast",
        khronos=SHAPES),
    Bad("matmul_inner_dimensions", body("w = variable(shape = [4,5], label = 'w');",
                                        "flat = reshape(input, shape = [1, 256]);", "output = matmul(flat, w);"),
        NNEFShapeError, 8, 14, "matmul", khronos=SHAPES),
    # ACCEPTS: Khronos checks no border string; spec 4.3 lists the allowed ones
    Bad("bad_border_string", body("output = max_pool(input, size = [1,1,2,2], border = 'mirror');"), NNEFShapeError,
        6, 14, "'mirror'", khronos=ACCEPTS),
    Bad("pool_size_length", body("output = max_pool(input, size = [2,2]);"), NNEFShapeError, 6, 14, "size",
        khronos=SHAPES),
    # NONE: input_shapes is an argument of lower(), not part of the text; the graph declaration is the place
    Bad("input_shapes_names_unknown_input", body("output = relu(input);"), NNEFSemanticError, 3, None,
        "input_shapes names ['image']", khronos=NONE, input_shapes={"image": [1, 4, 8, 8]}),
]

ROWS = LEXICAL + SYNTAX + INVOCATIONS + EXTENSIONS + EXPRESSION_TYPES + FRAGMENTS + GRAPH + EVALUATION + VARIABLES \
    + SHAPES_
CATEGORIES = {"lexical": LEXICAL, "syntax": SYNTAX, "invocations": INVOCATIONS, "extensions": EXTENSIONS,
              "expression types": EXPRESSION_TYPES, "fragments": FRAGMENTS, "graph": GRAPH,
              "evaluation": EVALUATION, "variables": VARIABLES, "shapes": SHAPES_}


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_document_is_rejected_at_its_position(row: Bad):
    check_rejected(row)


def check_rejected(row: Bad) -> None:
    with pytest.raises(NNEFError) as info:
        lower(parse_document(row.text, "graph.nnef"), text=row.text, input_shapes=row.input_shapes)
    _check(info.value, row, "graph.nnef")


def _check(error: NNEFError, row: Bad, file: str) -> None:
    assert type(error) is row.error, f"{type(error).__name__}: {error}"
    assert error.location is not None and error.location.file == file, str(error)
    assert (error.location.line, error.location.column if row.column is not None else None) == \
        (row.line, row.column), str(error)
    assert row.message in error.message, str(error)
    shown = str(error).splitlines()  # compiler style: 'file:line:column: error: ...', the line, a caret under it
    source = row.text.splitlines()[row.line - 1].replace("\t", " ")
    assert len(shown) == 3 and shown[0].startswith(f"{file}:{row.line}:"), str(error)
    if len(source) <= SHOWN_LINE:
        assert shown[1] == "    " + source, str(error)
        assert shown[2] == "    " + " " * (error.location.column - 1) + "^", str(error)
    else:  # a long line: a window of it around the column, the caret under the same character
        window, caret = shown[1][4:], shown[2].index("^") - 4
        assert len(window) <= SHOWN_LINE + 6 and window.strip(".") in source, str(error)
        assert window[caret] == source[error.location.column - 1], str(error)


# Text that does not begin as an NNEF document does (`version`) may be no NNEF at all, such as a file planted
# beside a model or named by mistake: the error quotes nothing of it, neither a token nor the line.
NOT_NNEF = {"missing_version": "graph G( input ) -> ( output )\n{\n    output = relu(input);\n}\n",
            "password_file": "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n",
            "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n",
            "binary": "\x7fELF\x02\x01\x01\x00secret", "unterminated_string": "'secret\n",
            "long_number": "1" * 100 + "secret", "comment_then_garbage": "# a comment\n  secret = 1;\n"}


@pytest.mark.parametrize("name", sorted(NOT_NNEF))
def test_text_not_beginning_with_version_is_refused_quoting_nothing(name):
    text = NOT_NNEF[name]
    with pytest.raises(NNEFSyntaxError, match="expected 'version' at the start") as info:
        parse_document(text, "graph.nnef")
    error = info.value.with_source(text, "graph.nnef")  # as a caller attaching the source would
    shown = str(error)
    assert error.location.file == "graph.nnef" and "\n" not in shown, shown
    assert not any(word in shown for word in ("root", "secret", "graph G", "OPENSSH", "relu", "111")), shown
    assert (error.location.line, error.location.column) == ((2, 3) if name == "comment_then_garbage" else (1, 1))


def test_message_about_a_long_line_shows_a_window_of_it():
    """A message quotes at most SHOWN_LINE characters of the line and 16 items of a list, however long they are."""
    text = body("output = squeeze(input, axes = [" + ", ".join(["0"] * 100_000) + "]);")
    with pytest.raises(NNEFShapeError, match="must be unique") as info:
        lower(parse_document(text, "graph.nnef"), text=text)
    shown = str(info.value).splitlines()
    assert len(shown) == 3 and "(100,000 items)" in shown[0] and len(shown[0]) < 200
    assert shown[1] == "    " + text.splitlines()[5][:SHOWN_LINE] + "..." and shown[2] == "    " + " " * 13 + "^"


def test_source_line_after_a_form_feed_is_the_line_counted():
    text = body("output = relux(input);").replace("# flat syntax only", "# flat syntax only\f")
    with pytest.raises(NNEFError) as info:
        lower(parse_document(text, "graph.nnef"), text=text)
    assert info.value.location.line == 6
    assert str(info.value).splitlines()[1].strip() == "output = relux(input);"


def test_ids_are_unique_and_the_table_is_large_enough(capsys):
    ids = [row.id for row in ROWS]
    assert len(ids) == len(set(ids))
    assert len(ROWS) >= 70
    with capsys.disabled():
        print("\n[bad inputs] " + ", ".join(f"{name} {len(rows)}" for name, rows in CATEGORIES.items())
              + f"; total {len(ROWS)} (graph.quant rows: tests/format/test_quant_file.py); Khronos: "
              + ", ".join(f"{verdict} {sum(row.khronos == verdict for row in ROWS)}"
                          for verdict in (PARSE, LOWERED, SHAPES, ACCEPTS, CRASHES, SLOW, NONE)))


# ---- the Khronos oracle ------------------------------------------------------------------------------------

# Runs in a child process, since the Khronos parser can die on bad input (stack overflow, SIGFPE): reads a JSON
# list of documents and prints one verdict per line as soon as it has it.
_CHILD = r"""
import json, re, sys
import nnef

def verdict(text):
    try:
        graph = nnef.parse_string(text, lowered=[])
    except Exception:  # nnef.Error; non-ASCII text makes the binding raise UnicodeDecodeError instead
        return "parse"
    own = re.findall(r"^fragment\s+(\w+)", text, flags=re.MULTILINE)
    if own:
        try:
            graph = nnef.parse_string(text, lowered=own)
        except Exception:
            return "lowered"
    try:
        nnef.infer_shapes(graph)
    except Exception:
        return "shapes"
    return "accepts"

for text in json.load(sys.stdin):
    print(verdict(text), flush=True)
"""


def khronos_verdicts_of(rows: list[Bad]) -> dict[str, str]:
    """What the Khronos package does with each row's text: PARSE, LOWERED, SHAPES, ACCEPTS or CRASHES."""
    pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    rows = [row for row in rows if row.khronos not in (NONE, SLOW)]
    verdicts: dict[str, str] = {}
    while len(verdicts) < len(rows):
        todo = rows[len(verdicts):]
        child = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps([row.text for row in todo]),
                               capture_output=True, text=True, timeout=300)
        answers = child.stdout.split()
        verdicts.update((row.id, answer) for row, answer in zip(todo, answers))
        if len(answers) < len(todo):  # the child died on the next document
            verdicts[todo[len(answers)].id] = CRASHES
    return verdicts


@pytest.fixture(scope="module")
def khronos_verdicts() -> dict[str, str]:
    return khronos_verdicts_of(ROWS)


@pytest.mark.parametrize("row", [row for row in ROWS if row.khronos not in (NONE, SLOW)],
                         ids=[row.id for row in ROWS if row.khronos not in (NONE, SLOW)])
def test_khronos_agrees(row: Bad, khronos_verdicts: dict[str, str]):
    assert khronos_verdicts[row.id] == row.khronos
