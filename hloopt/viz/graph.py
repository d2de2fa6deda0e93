"""A module as Model Explorer's graph JSON: one node per instruction, nesting by namespace.

The graph is built as the plain dicts and lists Model Explorer's web app reads (its ``graph_builder``
dataclasses, serialised), so the conversion is one pass over the instructions with no per-node objects
to copy: this module never imports ``model_explorer`` and is tested without its server.

Where a node sits (its ``namespace``, a ``/`` path Model Explorer draws as nested layers):
- an instruction is placed under its ``op_name`` scope (the op_name metadata without its last part), so
  a jax program shows its layers;
- an instruction that calls computations it alone calls (a fusion, a while, a conditional, a call, an
  async op, a reduce's reducer) gets a layer of its own name holding it, and each such computation is a
  layer inside it named after the computation; inside, instructions are grouped by the part of their
  scope below the caller's;
- a computation called from several places (a reducer shared by many reduces), or from none, is a layer
  of its own name at the top, shown once.

Every instruction is one node. Its id is its name (names are unique in a module; a repeated one is
qualified by its computation), unless `ids` gives another (the after graph of a pipeline takes the id
of the input instruction a rewrite replaced, so Model Explorer's two panes match them).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hloopt.ir.attribute_values import FrontendAttributes, Int, Metadata
from hloopt.ir.module import Computation, ComputationList, Instruction, Module, attribute_text
from hloopt.ir.shape import ArrayShape, Shape, TupleShape

#: A node or graph as Model Explorer's JSON has it.
Json = dict[str, Any]

#: Longest literal text a node shows; a longer one is cut with "…" (a weight can be megabytes).
LITERAL_CHARS = 200

#: The attributes whose computations take the caller's operands as parameters: which operand feeds
#: parameter ``i`` (None: operand ``i`` itself), for the edges drawn into a nested layer.
_OPERAND_OF_PARAMETER: dict[str, int | None] = {
    "calls": None,
    "body": 0,
    "condition": 0,
    "true_computation": 1,
    "false_computation": 2,
}


@dataclass(frozen=True)
class _Placement:
    """Where a computation's instructions go: below `prefix`, grouped by their scope below `caller_scope`;
    `feeds` are the caller's operands by parameter number, drawn as edges into the layer."""

    computation: Computation
    prefix: str
    caller_scope: str
    feeds: Mapping[int, Instruction] = field(default_factory=dict[int, Instruction])


def module_graph(module: Module, graph_id: str | None = None, ids: Mapping[str, str] | None = None) -> Json:
    """`module` as one Model Explorer graph (id `graph_id`, else the module's name); `ids` gives some
    instructions, by name, a node id other than their name."""
    return _Builder(module, ids or {}).graph(graph_id or module.name)


def node_ids(module: Module, ids: Mapping[str, str] | None = None) -> dict[Instruction, str]:
    """The node id of every instruction of `module`, as `module_graph` gives them."""
    return _Builder(module, ids or {}).ids


def matched_ids(before: Module, after: Module, provenance: Mapping[str, str]) -> dict[str, str]:
    """Node ids for `after` (a pipeline's output, by instruction name) that match `before` (its input) in
    Model Explorer's two panes: an instruction a pass replaced gives its id to the one instruction made
    from it that took its place (of the same opcode, else the last made), unless an instruction of
    `after` still has its name. The other instructions keep their names (`module_graph`'s default)."""
    before_ids = node_ids(before)
    by_name = {instruction.name: instruction for instruction in before_ids}
    kept = {instruction.name for computation in after.computations for instruction in computation.instructions}
    made: dict[str, list[Instruction]] = {}
    for computation in after.computations:
        for instruction in computation.instructions:
            source = provenance.get(instruction.name)
            if source is not None and source != instruction.name and source in by_name and source not in kept:
                made.setdefault(source, []).append(instruction)
    given: dict[str, str] = {}
    for source, candidates in made.items():
        opcode = by_name[source].opcode
        same = [c for c in candidates if c.opcode == opcode]
        given[(same or candidates)[-1].name] = before_ids[by_name[source]]
    return given


def call_sites(module: Module) -> dict[Computation, list[tuple[Instruction, str, int]]]:
    """Every computation's callers: the instruction, the attribute naming it and its place in a list."""
    sites: dict[Computation, list[tuple[Instruction, str, int]]] = {c: [] for c in module.computations}
    for computation in module.computations:
        for instruction in computation.instructions:
            for key, value in instruction.attributes.items():
                if isinstance(value, Computation):
                    sites.setdefault(value, []).append((instruction, key, 0))
                elif isinstance(value, ComputationList):
                    for index, callee in enumerate(value.computations):
                        sites.setdefault(callee, []).append((instruction, key, index))
    return sites


def _feeds(caller: Instruction, key: str, index: int) -> dict[int, Instruction]:
    """The caller's operands that become the called computation's parameters, by parameter number."""
    if key == "branch_computations":
        operand: int | None = index + 1
    elif key in _OPERAND_OF_PARAMETER or (key == "to_apply" and caller.opcode == "call"):
        operand = _OPERAND_OF_PARAMETER.get(key)
    else:
        return {}  # a reducer, comparator or scatter's update: its parameters are elements, not operands
    if operand is None:
        return dict(enumerate(caller.operands))
    return {0: caller.operands[operand]} if operand < len(caller.operands) else {}


class _Builder:
    """One conversion: ids first (an edge may point at an instruction placed later), then the nodes."""

    def __init__(self, module: Module, given: Mapping[str, str]) -> None:
        self.module = module
        self.ids: dict[Instruction, str] = {}
        taken: set[str] = set(given.values())
        for computation in module.computations:
            for instruction in computation.instructions:
                name = instruction.name
                node_id = given.get(name)
                if node_id is None:
                    node_id = name if name not in taken else f"{computation.name}/{name}"
                    taken.add(node_id)
                self.ids[instruction] = node_id
        self.sites = call_sites(module)
        #: The instructions that call a computation nothing else calls: each is a layer.
        self.nests = {sites[0][0] for sites in self.sites.values() if len(sites) == 1}
        self.queued: list[_Placement] = []
        self.shape_texts: dict[int, tuple[Shape, str]] = {}

    def graph(self, graph_id: str) -> Json:
        nodes: list[Json] = []
        for placement in self._placements():
            nodes.extend(self._nodes(placement))
        return {"id": graph_id, "nodes": nodes}

    def _placements(self) -> Iterator[_Placement]:
        """Each computation once: the entry, then those shown once at the top; each nests the ones its
        instructions alone call (`_nodes` queues them as it places their caller)."""
        entry = self.module.entry
        yield _Placement(entry, "", "")
        for computation in self.module.computations:
            if computation is not entry and len(self.sites.get(computation, ())) != 1:
                yield _Placement(computation, computation.name, "")
                while self.queued:
                    yield self.queued.pop()
        while self.queued:
            yield self.queued.pop()

    def _nodes(self, placement: _Placement) -> Iterator[Json]:
        ids, nests, shape_text = self.ids, self.nests, self._shape_text
        feeds, prefix, caller = placement.feeds, placement.prefix, placement.caller_scope
        for instruction in placement.computation.instructions:
            own = scope(instruction)
            if caller and (own == caller or own.startswith(caller + "/")):
                own = own[len(caller) + 1 :]  # grouped by its scope below its caller's
            namespace = f"{prefix}/{own}" if prefix and own else prefix or own
            if instruction in nests:
                namespace = f"{namespace}/{instruction.name}" if namespace else instruction.name
                self.queued.extend(self._nested(instruction, namespace, own))
            edges = [
                {"sourceNodeId": ids[operand], "sourceNodeOutputId": "0", "targetNodeInputId": str(i)}
                for i, operand in enumerate(instruction.operands)
            ]
            if instruction.opcode == "get-tuple-element" and edges:
                edges[0]["sourceNodeOutputId"] = _tuple_index(instruction)
            number = instruction.parameter_number
            if number is not None and number in feeds:
                edges.append({"sourceNodeId": ids[feeds[number]], "sourceNodeOutputId": "0", "targetNodeInputId": "0"})
            shape = instruction.shape
            outputs: list[Json] = []
            if shape is not None:
                elements = shape.elements if isinstance(shape, TupleShape) else (shape,)
                outputs = [
                    {"id": str(i), "attrs": [{"key": "tensor_shape", "value": shape_text(element)}]}
                    for i, element in enumerate(elements)
                ]
            yield {
                "id": ids[instruction],
                "label": instruction.opcode,
                "namespace": namespace,
                "subgraphIds": [],
                "attrs": self._attrs(instruction),
                "incomingEdges": edges,
                "outputsMetadata": outputs,
                "inputsMetadata": [],
            }

    def _nested(self, instruction: Instruction, layer: str, own_scope: str) -> list[_Placement]:
        """The computations `instruction` alone calls, each a layer inside `layer`."""
        nested: list[_Placement] = []
        full_scope = scope(instruction)
        for key, value in instruction.attributes.items():
            callees = (value,) if isinstance(value, Computation) else ()
            if isinstance(value, ComputationList):
                callees = value.computations
            for index, callee in enumerate(callees):
                if len(self.sites.get(callee, ())) == 1:
                    feeds = _feeds(instruction, key, index)
                    nested.append(_Placement(callee, f"{layer}/{callee.name}", full_scope, feeds))
        return nested

    def _shape_text(self, shape: Shape) -> str:
        known = self.shape_texts.get(id(shape))
        if known is not None and known[0] is shape:
            return known[1]
        text = shape.to_text()
        self.shape_texts[id(shape)] = (shape, text)
        return text

    def _attrs(self, instruction: Instruction) -> list[Json]:
        shape = instruction.shape
        attrs = [{"key": "name", "value": instruction.name}]
        if shape is not None:
            attrs.append({"key": "shape", "value": self._shape_text(shape)})
            attrs.append({"key": "element_type", "value": element_type_of(shape)})
        if instruction.parameter_number is not None:
            attrs.append({"key": "parameter_number", "value": str(instruction.parameter_number)})
        literal = instruction.literal
        if literal is not None:
            text = literal.text
            attrs.append(
                {"key": "literal", "value": text if len(text) <= LITERAL_CHARS else text[:LITERAL_CHARS] + "…"}
            )
        for key, value in instruction.attributes.items():
            if isinstance(value, (Metadata, FrontendAttributes)):
                attrs += [{"key": f"{key}.{k}", "value": _unquoted(v)} for k, v in value.entries]
            else:
                attrs.append({"key": key, "value": attribute_text(value)})
        return attrs


def scope(instruction: Instruction) -> str:
    """The layer of `instruction`: its ``op_name`` without the last part (the primitive), unescaped; ``""``
    for none or a single part (a parameter's name, which is no layer)."""
    metadata = instruction.attributes.get("metadata")
    quoted = metadata.get("op_name") if isinstance(metadata, Metadata) else None
    return _unquoted(quoted).rpartition("/")[0] if quoted else ""


def element_type_of(shape: Shape) -> str:
    """An array's element type; a tuple's as ``tuple`` (its elements' types are in its outputs)."""
    return shape.element_type if isinstance(shape, ArrayShape) else "tuple"


def _tuple_index(instruction: Instruction) -> str:
    """The output of its tuple operand a get-tuple-element's edge leaves from."""
    index = instruction.attributes.get("index")
    return str(index.value) if isinstance(index, Int) else "0"


def _unquoted(value: str) -> str:
    """A metadata or frontend attribute value as a person reads it: a quoted string without its quotes."""
    if value[:1] == '"' and "\\" not in value:
        return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value
