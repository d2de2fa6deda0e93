"""The module as Model Explorer's graph (`hloopt.viz.graph`): every instruction one node, edges that are the
operands, layers that are the called computations, over hand-written modules, the shipped examples and
every module of the shared corpus that hloopt reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from hloopt.errors import HloError
from hloopt.ir.attribute_values import Int
from hloopt.ir.module import Computation, Instruction, Module
from hloopt.passes.pipeline import run_pipeline
from hloopt.text.parser import parse
from hloopt.viz.graph import Json, call_sites, matched_ids, module_graph, node_ids

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.hlo"))

NESTED = """HloModule nested

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused (p0: f32[4], p1: f32[4]) -> f32[4] {
  %p0 = f32[4] parameter(0)
  %p1 = f32[4] parameter(1)
  ROOT %m = f32[4] multiply(%p0, %p1), metadata={op_name="jit(f)/layer/mul"}
}

%cond (c: (s32[], f32[4])) -> pred[] {
  %c = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%c), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %v = f32[4] get-tuple-element(%t), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %w = f32[4] fusion(%v, %v), kind=kLoop, calls=%fused, metadata={op_name="jit(f)/layer/fusion"}
  ROOT %r = (s32[], f32[4]) tuple(%next, %w)
}

ENTRY %main (x: f32[4]) -> f32[] {
  %x = f32[4] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]) tuple(%zero, %x)
  %loop = (s32[], f32[4]) while(%init), condition=%cond, body=%body, metadata={op_name="jit(f)/while"}
  %out = f32[4] get-tuple-element(%loop), index=1
  %z = f32[] constant(0)
  %r1 = f32[] reduce(%out, %z), dimensions={0}, to_apply=%add, metadata={op_name="jit(f)/sum/reduce_sum"}
  ROOT %r2 = f32[] reduce(%x, %z), dimensions={0}, to_apply=%add
}
"""


def _instructions(module: Module) -> list[Instruction]:
    return [instruction for computation in module.computations for instruction in computation.instructions]


def check_graph(module: Module, graph: Json) -> None:
    """The graph's promises: one node per instruction (unique ids); each node's first edges are its operands
    in order (a get-tuple-element's leaving its tuple's element), and a parameter of a computation nested in
    its caller's layer has one more, from the caller's operand; each computation called once is a layer
    named after it inside its caller's own layer, and every other computation a layer at the top."""
    ids = node_ids(module)
    nodes = {node["id"]: node for node in graph["nodes"]}
    instructions = _instructions(module)
    assert len(graph["nodes"]) == len(instructions) == len(nodes) == len(set(ids.values()))
    assert set(nodes) == set(ids.values())
    sites = call_sites(module)
    layer: dict[Computation, str] = {}  # where each computation's instructions sit
    for computation, callers in sites.items():
        if computation is module.entry:
            continue
        if len(callers) == 1:
            caller = nodes[ids[callers[0][0]]]
            assert caller["namespace"].split("/")[-1] == callers[0][0].name  # the caller is a layer of its name
            layer[computation] = f"{caller['namespace']}/{computation.name}"
        else:
            layer[computation] = computation.name
    for instruction in instructions:
        node = nodes[ids[instruction]]
        assert node["label"] == instruction.opcode
        edges = node["incomingEdges"]
        for index, operand in enumerate(instruction.operands):
            edge = edges[index]
            assert (edge["sourceNodeId"], edge["targetNodeInputId"]) == (ids[operand], str(index))
            element = instruction.attributes.get("index") if instruction.opcode == "get-tuple-element" else None
            assert edge["sourceNodeOutputId"] == (str(element.value) if isinstance(element, Int) else "0")
        extra = edges[len(instruction.operands) :]
        assert len(extra) <= 1 and (not extra or instruction.opcode == "parameter")
        parent = instruction.parent
        assert parent is not None
        if parent in layer:
            assert node["namespace"] == layer[parent] or node["namespace"].startswith(layer[parent] + "/")
        if extra:
            ((caller, _, _),) = sites[parent]
            assert extra[0]["sourceNodeId"] in {ids[operand] for operand in caller.operands}


def test_a_while_fusion_and_shared_reducer_nest_as_their_calls() -> None:
    module = parse(NESTED)
    graph = module_graph(module)
    check_graph(module, graph)
    nodes = {node["id"]: node for node in graph["nodes"]}
    assert nodes["loop"]["namespace"] == "jit(f)/loop"  # the while is a layer holding it, its body and condition
    assert nodes["next"]["namespace"] == "jit(f)/loop/body"
    assert nodes["lt"]["namespace"] == "jit(f)/loop/cond"
    assert nodes["w"]["namespace"] == "jit(f)/loop/body/layer/w"  # the fusion's scope below the while's
    assert nodes["m"]["namespace"] == "jit(f)/loop/body/layer/w/fused"
    assert nodes["s"]["namespace"] == "add"  # called by two reduces: once, at the top
    assert nodes["r1"]["namespace"] == "jit(f)/sum"
    assert nodes["r2"]["namespace"] == ""
    # the body's and the fusion's parameters are fed by their caller's operands; the reducer's are not
    assert [e["sourceNodeId"] for e in nodes["t"]["incomingEdges"]] == ["init"]
    assert [e["sourceNodeId"] for e in nodes["c"]["incomingEdges"]] == ["init"]
    assert [e["sourceNodeId"] for e in nodes["p1"]["incomingEdges"]] == ["v"]
    assert nodes["a"]["incomingEdges"] == []
    # a get-tuple-element's edge leaves its tuple's element; a tuple has an output per element
    assert nodes["out"]["incomingEdges"][0]["sourceNodeOutputId"] == "1"
    assert [o["id"] for o in nodes["loop"]["outputsMetadata"]] == ["0", "1"]
    attrs = {a["key"]: a["value"] for a in nodes["loop"]["attrs"]}
    assert attrs["shape"] == "(s32[], f32[4]{0})" and attrs["element_type"] == "tuple"
    assert attrs["body"] == "%body" and attrs["metadata.op_name"] == "jit(f)/while"


def test_conditional_branches_are_fed_their_operand() -> None:
    module = parse("""HloModule c

%b0 (p: f32[2]) -> f32[2] {
  %p = f32[2] parameter(0)
  ROOT %n = f32[2] negate(%p)
}

%b1 (q: f32[2]) -> f32[2] {
  %q = f32[2] parameter(0)
  ROOT %e = f32[2] exponential(%q)
}

ENTRY %e (i: s32[], x: f32[2], y: f32[2]) -> f32[2] {
  %i = s32[] parameter(0)
  %x = f32[2] parameter(1)
  %y = f32[2] parameter(2)
  ROOT %c = f32[2] conditional(%i, %x, %y), branch_computations={%b0, %b1}
}
""")
    graph = module_graph(module)
    check_graph(module, graph)
    nodes = {node["id"]: node for node in graph["nodes"]}
    assert [e["sourceNodeId"] for e in nodes["p"]["incomingEdges"]] == ["x"]
    assert [e["sourceNodeId"] for e in nodes["q"]["incomingEdges"]] == ["y"]
    assert nodes["n"]["namespace"] == "c/b0"


def test_frontend_attributes_and_metadata_are_node_attributes() -> None:
    module = parse("""HloModule m

ENTRY %e (x: f32[2]) -> bf16[2] {
  %x = f32[2] parameter(0)
  ROOT %c = bf16[2] convert(%x), frontend_attributes={auto_cast="bf16"}, metadata={op_type="convert" op_name="a/b/c" source_line=3}
}
""")
    (_, convert) = module_graph(module)["nodes"]
    attrs = {a["key"]: a["value"] for a in convert["attrs"]}
    assert attrs["frontend_attributes.auto_cast"] == "bf16"
    assert (attrs["metadata.op_name"], attrs["metadata.source_line"]) == ("a/b/c", "3")
    assert (attrs["name"], attrs["shape"], attrs["element_type"]) == ("c", "bf16[2]{0}", "bf16")
    assert convert["namespace"] == "a/b"


def test_a_long_literal_is_cut() -> None:
    values = ", ".join(["1"] * 500)
    module = parse(f"HloModule m\n\nENTRY %e () -> f32[500] {{\n  ROOT %c = f32[500] constant({{{values}}})\n}}\n")
    (node,) = module_graph(module)["nodes"]
    literal = next(a["value"] for a in node["attrs"] if a["key"] == "literal")
    assert literal.endswith("…") and len(literal) == 201


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_examples(path: Path) -> None:
    module = parse(path.read_text(), str(path))
    check_graph(module, module_graph(module))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_after_a_pipeline_replaced_instructions_keep_their_input_ids(path: Path) -> None:
    """Each id of the after graph that names an input instruction stands for it: kept, or taken by the
    instruction made from it (provenance); no two nodes share one."""
    before = parse(path.read_text(), str(path))
    after = parse(path.read_text(), str(path))
    provenance = run_pipeline(after, "all").provenance
    given = matched_ids(before, after, provenance)
    graph = module_graph(after, "after", given)
    check_graph(after, module_graph(after))
    ids = [node["id"] for node in graph["nodes"]]
    assert len(ids) == len(set(ids))
    before_names = {i.name for i in _instructions(before)}
    for instruction in _instructions(after):
        node_id = node_ids(after, given)[instruction]
        if node_id in before_names and node_id != instruction.name:
            assert provenance[instruction.name] == node_id


@pytest.mark.corpus
def test_every_corpus_module(corpus_dir: Path) -> None:
    """Every module of the corpus that hloopt reads (XLA's, the headerless, any invalid one it accepts)
    converts to a graph that keeps the graph's promises."""
    checked = 0
    for path in sorted(corpus_dir.glob("*/*.hlo")):
        try:
            module = parse(path.read_text(encoding="utf-8", errors="surrogateescape"), str(path))
        except HloError:
            continue
        try:
            check_graph(module, module_graph(module))
        except AssertionError as err:
            raise AssertionError(f"{path.name}: {err}") from err
        checked += 1
    assert checked > 7000
