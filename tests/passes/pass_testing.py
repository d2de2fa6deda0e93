"""Helpers for the pass tests: HLO written as indented blocks, golden case files, passes with every check on.

`dedent_hlo` is meant to move to a shared tests/ module (the lead owns tests/*.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hloopt.driver.chunks import join, split
from hloopt.ir.module import Instruction, Module
from hloopt.passes.base import HloPass, Matching
from hloopt.passes.pipeline import PipelineReport, run_pipeline
from hloopt.passes.registry import select
from hloopt.text.parser import parse

GOLDEN = Path(__file__).resolve().parent / "golden"
#: Each case of a golden file (a ``// -----`` chunk, as ``--split-input-file`` reads it) starts with this line.
RULE = "// RULE: "
#: A case may name its passes on its next line (a pass with options, or passes before it); else the file's pass runs.
PASSES = "// PASSES: "


@dataclass(frozen=True)
class Case:
    """One golden case: the file it is in, its rule (the label) and its module text."""

    path: Path
    rule: str
    text: str

    @property
    def passes(self) -> str:
        """The pass spec this case runs: its ``// PASSES:`` line, else the file's pass with its defaults."""
        first = self.text.partition("\n")[0]
        return first[len(PASSES) :] if first.startswith(PASSES) else self.path.stem

    def pass_objects(self) -> list[HloPass]:
        """The passes of `passes`, as objects (each with its options)."""
        return [selected.create() for selected in select(self.passes)[1]]


def read_cases(path: Path) -> list[Case]:
    """The `// -----`-separated cases of a golden file, each labelled with its ``// RULE:`` line."""
    cases: list[Case] = []
    for chunk in split(path.read_text(), path.name):
        label, _, text = chunk.text.partition("\n")
        assert label.startswith(RULE), f"{path.name}: a case must start with '{RULE}…', not {label!r}"
        # Ending as the printer ends a module, so an expected case compares byte for byte.
        cases.append(Case(path, label[len(RULE) :], text.strip("\n") + "\n\n"))
    return cases


def write_cases(path: Path, cases: Sequence[tuple[str, str]]) -> None:
    """Write (rule, module text) cases in the layout `read_cases` reads."""
    path.write_text(join([f"{RULE}{rule}\n{text.strip(chr(10))}\n\n" for rule, text in cases]))


def golden_inputs(pass_name: str | None = None) -> list[Case]:
    """Every input case of one pass's golden file (or of all of them)."""
    names = [pass_name] if pass_name else sorted(p.stem for p in GOLDEN.glob("*.hlo") if ".expected" not in p.name)
    return [case for name in names for case in read_cases(GOLDEN / f"{name}.hlo")]


def run_passes(
    module: Module, passes: str | Sequence[str | HloPass], numerics: str = "xla", check: bool = True
) -> PipelineReport:
    """`run_pipeline` with the changed-flag check in its strict form."""
    return run_pipeline(module, passes, numerics=numerics, check=check, check_changed="both")


def still_matching(hlo_pass: HloPass, module: Module) -> list[Instruction]:
    """What a registered pass would still rewrite in `module` (each registered pass can say: `Matching`)."""
    assert isinstance(hlo_pass, Matching), f"{hlo_pass.name} cannot say what it would rewrite"
    return hlo_pass.matches(module)


def passes_text(text: str, passes: str | Sequence[str | HloPass], numerics: str = "xla") -> str:
    """The printed module after `passes`."""
    module = parse(text, "t")
    run_passes(module, passes, numerics)
    return module.to_text()
