"""The package's layers, written as a test: every import in hloopt/ is checked against the table below.

Imports go one way (docs/architecture.md): a layer may use the layers listed for it and nothing else of
hloopt. Imports inside functions count too, so a lazy import cannot hide a wrong edge; the one allowed
exception is named in `LAZY_EXCEPTIONS`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hloopt"

#: Which parts of hloopt each part may import (besides itself). A part is a subpackage or a top-level module.
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "cast_engine": frozenset(),
    "ir": frozenset(),
    "support": frozenset({"errors"}),
    "text": frozenset({"errors", "support", "ir"}),
    "analysis": frozenset({"errors", "ir"}),
    "arrays": frozenset({"errors", "support", "ir"}),
    "passes": frozenset({"errors", "support", "ir", "analysis", "cast_engine"}),
    "xla": frozenset({"errors", "support", "ir", "text", "analysis", "passes", "cast_engine", "arrays"}),
    "driver": frozenset(
        {"errors", "support", "ir", "text", "analysis", "passes", "cast_engine", "arrays", "xla", "viz"}
    ),
    "viz": frozenset({"errors", "support", "ir", "analysis", "arrays", "passes"}),
    "cli": frozenset(
        {
            "__init__",
            "errors",
            "support",
            "ir",
            "text",
            "analysis",
            "passes",
            "cast_engine",
            "arrays",
            "xla",
            "driver",
            "viz",
        }
    ),
    "__init__": frozenset({"errors", "ir", "text", "xla"}),
    "__main__": frozenset({"cli"}),
    "roundtrip": frozenset({"xla"}),
    "jax": frozenset({"xla"}),
    "batch": frozenset({"driver"}),
    "model_explorer": frozenset(
        {"errors", "support", "ir", "text", "analysis", "arrays", "passes", "xla", "driver", "viz"}
    ),
}

#: Third-party packages only one part may import.
OWNED_EXTERNALS: dict[str, str] = {
    "jax": "xla",
    "jaxlib": "xla",
    "lark": "text",
    "click": "cli",
    "plotly": "viz",
    "model_explorer": "model_explorer",
}

#: (importing file, imported module): the allowed exceptions, each for a stated reason.
LAZY_EXCEPTIONS: dict[tuple[str, str], str] = {
    (
        "ir/module.py",
        "hloopt.text.printer",
    ): "Module.to_text() prints lazily, so the IR stays printable without a text import",
}


def _part(relative: Path) -> str:
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _imports(relative: Path, source: str) -> list[str]:
    """Every module the file at `relative` (to hloopt/) imports, relative imports resolved to absolute names."""
    package = ["hloopt", *relative.with_suffix("").parts]
    if relative.name != "__init__.py":
        package = package[:-1]
    found: list[str] = []
    for node in ast.walk(ast.parse(source, str(relative))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if node.module is None or module == "hloopt":  # `from hloopt import x` may name a submodule
                found += [f"{module}.{alias.name}" for alias in node.names]
            else:
                found.append(module)
    return found


def _violations(relative: Path, source: str) -> list[str]:
    part = _part(relative)
    problems: list[str] = []
    for name in _imports(relative, source):
        top, *rest = name.split(".")
        if top == "hloopt":
            if not rest:
                continue
            target = rest[0]
            if not (PACKAGE / target).is_dir() and not (PACKAGE / f"{target}.py").exists():
                target = "__init__"  # an attribute of the hloopt package itself (`from hloopt import __version__`)
            if target == part or target in ALLOWED[part]:
                continue
            if (relative.as_posix(), name) in LAZY_EXCEPTIONS:
                continue
            problems.append(f"{relative}: imports {name} ({part} may use only {sorted(ALLOWED[part]) or 'itself'})")
        elif top in OWNED_EXTERNALS and OWNED_EXTERNALS[top] != part:
            problems.append(f"{relative}: imports {name}, which only {OWNED_EXTERNALS[top]}/ may import")
    return problems


FILES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_has_a_rule() -> None:
    assert {_part(p.relative_to(PACKAGE)) for p in FILES} <= set(ALLOWED)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_imports_follow_the_layers(path: Path) -> None:
    relative = path.relative_to(PACKAGE)
    assert _violations(relative, path.read_text()) == []


def test_the_exceptions_are_still_needed() -> None:
    """An exception nobody uses any more is a hole in the rule: remove it."""
    for (file, module), _ in LAZY_EXCEPTIONS.items():
        assert module in _imports(Path(file), (PACKAGE / file).read_text()), f"{file} no longer imports {module}"


def test_a_wrong_edge_is_caught() -> None:
    """The checker itself: a passes/ file importing jax, text/ and (relatively) xla/ is refused three times."""
    source = "import jax\nfrom hloopt.text.parser import parse\ndef f():\n    from ..xla import bridge\n"
    problems = _violations(Path("passes/probe.py"), source)
    assert len(problems) == 3, problems


# -- passes and analysis use typed attribute values, never attribute text -----------------------------

#: Attribute text in a string: a ``name=`` of an attribute, a ``={`` value or a ``{key=`` map, an empty ``{}`` list, a
#: layout tail item (``E(``, ``T(``, ``S(``), or a regex for one (``E\(``), a boolean's spelling (``"true"``), a
#: sharding's (``{replicated``, ``devices=``) or an iota device list's (``<=[``).
ATTRIBUTE_TEXT = re.compile(
    r"=\s*\{|^\{\}$|\{\w+=|\b(?:dimensions|direction|index|window|dim_labels|metadata|frontend_attributes|kind|type"
    r"|operand_precision|fft_type|distribution|channel_id|[lr]hs_\w+_dims|sharding|replica_groups|padding|slice|epsilon"
    r"|output_to_operand_aliasing|is_scheduled|custom_call_has_side_effect|num_partitions|replica_count)="
    r"|\b[ETSLM]\\?\(|\bSC\\?\(|^(?:true|false)$|\{(?:replicated|maximal|manual)\b|\bdevices=|<=\["
)
#: Readers of attribute or layout text: names that must not appear in passes/ or analysis/.
TEXT_READERS = frozenset({"parse_map", "int_list", "tail", "findall", "_MapReader", "read_value"})
#: (file, string): the allowed attribute text, each for a stated reason.
TEXT_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("analysis/verifier.py", "broadcast dimensions={"): "an error message quoting the attribute as XLA prints it",
    ("passes/registry.py", "expected name{option=value …} in --passes, got "): "the --passes syntax, no attribute",
    ("passes/registry.py", "true"): "a boolean option's value in --passes, no attribute",
    ("passes/registry.py", "false"): "a boolean option's value in --passes, no attribute",
}
TYPED_PARTS = ("passes", "analysis")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of `tree`."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _attribute_text(relative: Path, source: str) -> list[str]:
    """Each place in the file at `relative` that spells or reads attribute text."""
    tree = ast.parse(source, str(relative))
    docstrings = _docstrings(tree)
    problems: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            match = ATTRIBUTE_TEXT.search(node.value)
            if match and (relative.as_posix(), node.value) not in TEXT_EXCEPTIONS:
                problems.append(f"{relative}:{node.lineno}: attribute text {node.value!r}")
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else node.name
            if isinstance(node, ast.alias)
            else None
        )
        if name in TEXT_READERS:
            problems.append(f"{relative}:{getattr(node, 'lineno', '?')}: reads text with {name}")
    return problems


TYPED_FILES = [p for p in FILES if p.relative_to(PACKAGE).parts[0] in TYPED_PARTS]


@pytest.mark.parametrize("path", TYPED_FILES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_passes_and_analysis_hold_no_attribute_text(path: Path) -> None:
    relative = path.relative_to(PACKAGE)
    assert _attribute_text(relative, path.read_text()) == []


def test_the_text_exceptions_are_still_needed() -> None:
    for file, text in TEXT_EXCEPTIONS:
        source = (PACKAGE / file).read_text()
        strings = [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant)]
        assert text in strings, f"{file} no longer has {text!r}"


@pytest.mark.parametrize(
    "source",
    [
        'attributes = {"dimensions": "{}"}',
        'x = f"direction={d}"',
        "t = layout.tail",
        'pattern = re.compile(r"E\\(\\d+\\)")',
        "from hloopt.ir.attributes import parse_map",
        'dims = int_list(instruction.attributes.get("dimensions"))',
        'metadata = "{op_name=" + name + "}"',
        'text = "T(8,128)"',
        'if instruction.attributes.get("custom_call_has_side_effect") == "true": pass',
        'scheduled = module.attributes.get("is_scheduled") != "false"',
        'sharding = "{replicated}"',
        'groups = f"replica_groups={groups}"',
        'iota = "[2,2]<=[4]"',
    ],
)
def test_attribute_text_is_caught(source: str) -> None:
    """The checker itself: each way of building or reading attribute text is found."""
    assert _attribute_text(Path("passes/probe.py"), source)
