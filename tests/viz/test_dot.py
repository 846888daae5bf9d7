"""DOT text of scenes, checked against the IR graph they come from: what pydot parses back (nodes, edges, argument
labels, colours, clusters) is computed here again from graph.operations, graph.outputs and graph.quantization."""
from __future__ import annotations

import html
import re
import shutil
import subprocess

import pydot
import pytest

import nnef_torch
from nnef_torch.cli import demo_model_path
from nnef_torch.ir.graph import Ref
from nnef_torch.reader import read_graph
from nnef_torch.viz import families
from nnef_torch.viz.dot import QUANT_COLOUR, dot_text
from nnef_torch.viz.from_ir import scene_of
from nnef_torch.viz.scene import BIND, FUNCTION, GET_ITEM, IF, LET, TUPLE, Edge, Node, Scene, TensorType

NESTED = """version 1.0;
extension KHR_enable_fragment_definitions;
fragment inner( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { t = relu(x); y = add(t, x); }
fragment outer( x: tensor<scalar>, w: tensor<scalar> ) -> ( y: tensor<scalar> ) { a = inner(x); y = mul(a, w); }
graph nested( input ) -> ( out )
{
    input = external<scalar>(shape = [1, 3]);
    w = variable<scalar>(shape = [1, 3], label = 'w');
    h = outer(input, w);
    out = inner(h);
}
"""
# pydot's parser calls pyparsing's old method names
pytestmark = pytest.mark.filterwarnings("ignore:'[A-Za-z]+' deprecated - use:DeprecationWarning")

DECLARATIONS = {"external", "variable", "constant"}
DEFAULT_STATEMENTS = {"graph", "node", "edge"}


def unquote(text):
    return text[1:-1].replace('\\"', '"') if text and text.startswith('"') else text


def parse(text):
    graphs = pydot.graph_from_dot_data(text)
    assert graphs is not None and len(graphs) == 1
    return graphs[0]


def all_nodes(graph):
    """Node statements of a pydot graph and its subgraphs, by name, leaving out the legend's."""
    found, pending = {}, [graph]
    while pending:
        current = pending.pop()
        for node in current.get_nodes():
            name = node.get_name()
            if name not in DEFAULT_STATEMENTS and not name.startswith("legend_"):
                found[name] = {key: unquote(value) for key, value in node.get_attributes().items()}
        pending.extend(current.get_subgraphs())
    return found


def all_edges(graph):
    return [(edge.get_source(), edge.get_destination(), {k: unquote(v) for k, v in edge.get_attributes().items()})
            for edge in graph.get_edges()]


def expected_edges(graph):
    """(source key, target key, argument) for every tensor argument, and one edge into each graph output."""
    producer, edges = {}, []
    for index, op in enumerate(graph.operations):
        for param, value in op.inputs.items():
            refs = [(param, value)] if isinstance(value, Ref) else [
                (f"{param}[{i}]", item) for i, item in enumerate(value) if isinstance(item, Ref)] \
                if isinstance(value, (list, tuple)) else []
            edges.extend((f"n{producer[ref.name]}", f"n{index}", label) for label, ref in refs)
        for ref in op.outputs.values():
            producer[ref.name] = index
    for k, name in enumerate(graph.outputs):
        edges.append((f"n{producer[name]}", f"n{len(graph.operations) + k}", ""))
    return edges


@pytest.fixture(scope="module")
def demo():
    return nnef_torch.read_model(demo_model_path()).graph


@pytest.fixture(scope="module")
def demo_nodes_edges(demo):
    drawn = parse(dot_text(scene_of(demo)))
    return all_nodes(drawn), all_edges(drawn)


def test_nodes_and_edges_match_the_graph(demo, demo_nodes_edges):
    nodes, edges = demo_nodes_edges
    assert set(nodes) == {f"n{i}" for i in range(len(demo.operations) + len(demo.outputs))}
    assert all(attrs["id"] == name for name, attrs in nodes.items())
    drawn = sorted((source, target, attrs.get("label", "").split("\\n")[0]) for source, target, attrs in edges
                   if not source.startswith("legend_"))
    assert drawn == sorted(expected_edges(demo))


def test_operation_labels_show_name_attributes_and_output_types(demo, demo_nodes_edges):
    nodes, _ = demo_nodes_edges
    for index, op in enumerate(demo.operations):
        label = nodes[f"n{index}"]["label"]
        for ref in op.outputs.values():
            tensor = demo.tensors[ref.name]
            assert ref.name in label
            assert f"{tensor.dtype}[{','.join(map(str, tensor.shape))}]" in label
        if op.name not in DECLARATIONS:
            assert f" = {op.name}\\n" in label
    by_name = {nodes[f"n{i}"]["label"].split(" = ")[0]: nodes[f"n{i}"]["label"] for i in range(len(demo.operations))}
    assert "padding = [(1, 1), (1, 1)]\\l" in by_name["conv1"]
    assert "stride = [1, 1, 2, 2]\\l" in by_name["pool1"] and "border = 'ignore'\\l" in by_name["pool1"]
    assert "groups" not in by_name["conv1"]  # left at its default


def test_variables_are_drawn_apart_from_inputs(demo, demo_nodes_edges):
    nodes, _ = demo_nodes_edges
    shapes = {}
    for index, op in enumerate(demo.operations):
        if op.name in ("external", "variable"):
            attrs = nodes[f"n{index}"]
            shapes.setdefault(op.name, set()).add((attrs.get("shape", "box"), attrs.get("peripheries")))
            if op.name == "variable":
                assert f"'{op.attribs['label']}'" in attrs["label"]
                assert "variable" in attrs["class"].split()
    assert len(shapes["external"]) == len(shapes["variable"]) == 1
    assert shapes["external"] != shapes["variable"]


def test_fill_colours_follow_families(demo, demo_nodes_edges):
    nodes, _ = demo_nodes_edges
    expected = {"conv": "convolution", "linear": "convolution", "relu": "activation", "softmax": "activation",
                "max_pool": "pooling", "mean_reduce": "reduction", "reshape": "shape"}
    seen = set()
    for index, op in enumerate(demo.operations):
        if op.name in DECLARATIONS:
            continue
        attrs = nodes[f"n{index}"]
        assert attrs["fillcolor"] == families.FAMILY_COLOURS[expected[op.name]]
        assert expected[op.name] in attrs["class"].split()
        seen.add(attrs["fillcolor"])
    assert len(seen) == len(set(expected.values()))


def test_quantization_shown_on_its_tensors(demo, demo_nodes_edges):
    nodes, edges = demo_nodes_edges
    quantized = {name: f"{spec.op}({', '.join(f'{k} = {v}' for k, v in spec.args.items())})"
                 for name, spec in demo.quantization.items()}
    assert set(quantized) == {"image", "relu1", "relu2"}
    producer = {ref.name: f"n{i}" for i, op in enumerate(demo.operations) for ref in op.outputs.values()}
    for name, text in quantized.items():
        assert text in nodes[producer[name]]["label"]
        assert nodes[producer[name]]["color"] == QUANT_COLOUR
    quantized_producers = {producer[name] for name in quantized}
    for source, _, attrs in edges:
        if source.startswith("legend_"):
            continue
        carries = source in quantized_producers
        assert (attrs.get("color") == QUANT_COLOUR) == carries
        assert ("quantize(" in attrs.get("label", "")) == carries
    unquantized = set(producer.values()) - quantized_producers
    assert not any("quant" in nodes[key]["label"] for key in unquantized)


def test_fragment_invocations_are_nested_clusters():
    graph = read_graph(NESTED)
    drawn = parse(dot_text(scene_of(graph)))
    members = {}
    for index, op in enumerate(graph.operations):
        for depth in range(1, len(op.scope) + 1):
            members.setdefault(op.scope[:depth], set()).add(f"n{index}")
    assert set(members) == {("outer#1",), ("outer#1", "inner#2"), ("inner#3",)}

    def walk(graph_, path):
        found = {}
        for sub in graph_.get_subgraphs():
            if sub.get_name() == "cluster_legend" or not sub.get_name().startswith("cluster_"):
                continue
            inner = walk(sub, path + (sub.get_name(),))
            names = set(all_nodes(sub))
            found[path + (sub.get_name(),)] = (names, unquote(sub.get_attributes().get("label")) or
                                               unquote(sub.obj_dict["attributes"].get("label")))
            found.update(inner)
        return found

    clusters = walk(drawn, ())
    # the clusters' nesting and members equal the invocations', matched by member sets
    by_members = {frozenset(names): (path, label) for path, (names, label) in clusters.items()}
    assert set(by_members) == {frozenset(names) for names in members.values()}
    for scope, names in members.items():
        path, label = by_members[frozenset(names)]
        assert len(path) == len(scope)
        assert label.startswith(scope[-1].partition("#")[0])


def test_clusters_false_leaves_invocations_unboxed():
    drawn = parse(dot_text(scene_of(read_graph(NESTED)), clusters=False, legend=False))
    assert drawn.get_subgraphs() == []
    assert "cluster" not in dot_text(scene_of(read_graph(NESTED)), clusters=False, legend=False)


def test_collapsed_fragments_are_styled_apart():
    graph = read_graph(NESTED)
    nodes = all_nodes(parse(dot_text(scene_of(graph, collapse=True))))
    fragments = {name: attrs for name, attrs in nodes.items() if "fragment" in attrs["class"].split()}
    assert len(fragments) == len({op.scope[0] for op in graph.operations if op.scope})
    assert {attrs["shape"] for attrs in fragments.values()} == {"box3d"}
    assert all(attrs.get("shape") != "box3d" for name, attrs in nodes.items() if name not in fragments)


def test_legend_lists_the_families_present(demo):
    text = dot_text(scene_of(demo))
    legend = next(sub for sub in parse(text).get_subgraphs() if sub.get_name() == "cluster_legend")
    labels = {unquote(node.get("label")) for node in legend.get_nodes() if node.get_name().startswith("legend_")}
    assert labels == {"convolution", "pooling", "reduction", "activation", "shape", "quantized"}
    assert "cluster_legend" not in dot_text(scene_of(demo), legend=False)


def test_highlight_callback(demo):
    chosen = {"relu1": True, "pool1": {"fillcolor": "#123456", "color": "red"}}
    nodes = all_nodes(parse(dot_text(scene_of(demo), highlight=lambda node: chosen.get(node.name))))
    plain = all_nodes(parse(dot_text(scene_of(demo))))
    by_name = {attrs["label"].split("\\n")[0].split(" = ")[0]: key for key, attrs in nodes.items()
               if "operation" in attrs["class"]}
    relu1, pool1 = nodes[by_name["relu1"]], nodes[by_name["pool1"]]
    assert "highlighted" in relu1["class"] and relu1["penwidth"] == "4"
    assert pool1["fillcolor"] == "#123456" and pool1["color"] == "red" and "highlighted" in pool1["class"]
    others = set(nodes) - {by_name["relu1"], by_name["pool1"]}
    assert all(nodes[key] == plain[key] for key in others)


HOSTILE = ['quote"d', "back\\slash\\N\\l", "{brace|<port>}", "ünïcødé ✓ α", "new\nline", "&amp;", "</text><b>",
           "tab\there", "semi;colon -> n0", "lone\ud800surrogate"]


def hostile_scene():
    nodes = {0: Node(0, "input", HOSTILE[0], "external", outputs=[TensorType(HOSTILE[0], "scalar", (1,))])}
    for i, name in enumerate(HOSTILE[1:], start=1):
        nodes[i] = Node(i, "operation", name, f"op{name}", {name: name}, [TensorType(name, "scalar", (i,), name)],
                        scope=(name,))
    edges = [Edge(i - 1, i, HOSTILE[i], HOSTILE[i - 1], HOSTILE[i]) for i in range(1, len(HOSTILE))]
    return Scene('graph "name" \\ ü', nodes, edges, {name: name for name in HOSTILE})


def test_hostile_names_give_dot_that_pydot_parses():
    scene = hostile_scene()
    text = dot_text(scene, highlight=lambda node: {"tooltip": node.name, 'odd"key': "x"})
    text.encode("utf-8")  # lone surrogates replaced
    nodes = all_nodes(parse(text))
    assert set(nodes) == {node.key for node in scene.nodes.values()}
    assert len(all_edges(parse(text))) == len(scene.edges)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (apt-get install graphviz)")
def test_hostile_names_render_as_written():
    text = dot_text(hostile_scene())
    done = subprocess.run(["dot", "-Tsvg"], input=text.encode("utf-8"), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    svg = html.unescape(done.stdout.decode("utf-8"))
    for name in HOSTILE:
        shown = name.replace("\n", "\\x0a").replace("\t", "\\x09").replace("\ud800", "\ufffd")
        assert shown in svg, name
    assert len(re.findall(r'<g id="n\d+" class="node', done.stdout.decode())) == len(HOSTILE)


def test_relayviz_kinds_have_their_own_shapes():
    kinds = [FUNCTION, TUPLE, GET_ITEM, LET, IF, BIND]
    scene = Scene("relay", {i: Node(i, kind, f"{kind}_{i}", None) for i, kind in enumerate(kinds)}, [])
    nodes = all_nodes(parse(dot_text(scene)))
    shapes = [nodes[f"n{i}"].get("shape", "box") for i in range(len(kinds))]
    assert len(set(shapes)) == len(kinds) and "box" not in shapes
    assert [nodes[f"n{i}"]["class"].split()[0] for i in range(len(kinds))] == kinds


def chain_text(count):
    lines = ["version 1.0;", f"graph chain( x ) -> ( t{count - 1} )", "{", "    x = external<scalar>(shape = [1, 8]);",
             "    t0 = relu(x);"]
    lines.extend(f"    t{i} = add(t{i - 1}, x);" if i % 2 else f"    t{i} = relu(t{i - 1});" for i in range(1, count))
    return "\n".join(lines + ["}"])


def test_twenty_thousand_operations():
    count = 20_000
    scene = scene_of(read_graph(chain_text(count)))
    text = dot_text(scene)
    assert len(re.findall(r"^\s*n\d+ \[id=", text, re.MULTILINE)) == count + 2  # and the input and the output
    assert text.count(" -> n") == count + count // 2 + 1
