"""The pass manager: run selected passes in registration order, verify, dump, report.

Passes run in registration order whatever order they were named in (that is
the binary's pipeline order); a pass that changed the module is followed by
the verifier, and a failure names that pass.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hloopt.support.fileio import write_atomic
from hloopt.support.gcpause import paused_gc
from hloopt.ir.module import Module
from hloopt.passes.registry import PassInfo, select
from hloopt.analysis.verifier import VerificationError, verify


@dataclass(frozen=True)
class PassReport:
    """One pass's run: did it change the module, how many instructions it rewrote, its warnings."""

    name: str
    changed: bool
    rewritten: int
    warnings: tuple[str, ...] = ()


@dataclass
class PipelineReport:
    notes: list[str] = field(default_factory=list)
    passes: list[PassReport] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(p.changed for p in self.passes)


def order_note(given: list[PassInfo], ordered: list[PassInfo]) -> str | None:
    if given == ordered:
        return None
    return "passes run in registration order: " + ", ".join(f"{p.name} (#{p.number})" for p in ordered)


def run_pipeline(
    module: Module,
    passes: str,
    numerics: str = "xla",
    dump_dir: str | Path | None = None,
    check: bool = True,
    original: Callable[[], Module] | None = None,
) -> PipelineReport:
    """Run the passes `passes` (``all`` or ``a,b``) on `module` in place.

    `original` rebuilds the unmodified input (the CLI re-parses the text). When the
    verifier refuses the module after a pass, the rebuilt input is verified too: if it
    was already invalid, the error says so instead of blaming the pass. Verifying every
    input up front would cost a whole verifier run on every module.
    """
    given, ordered = select(passes)
    report = PipelineReport()
    note = order_note(given, ordered)
    if note:
        report.notes.append(note)
    dump = Path(dump_dir) if dump_dir is not None else None
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        write_atomic(dump / "00-input.hlo", module.to_text())
    step = 0
    for info in ordered:
        hlo_pass = info.make(numerics)
        with paused_gc():
            changed = hlo_pass.run(module)
            if changed and check:
                _verify_after(module, info.name, original)
        report.passes.append(PassReport(info.name, changed, hlo_pass.last.rewritten, tuple(hlo_pass.last.warnings)))
        if changed:
            step += 1
            if dump is not None:
                write_atomic(dump / f"{step:02d}-after-{info.name}.hlo", module.to_text())
    return report


def _verify_after(module: Module, culprit: str, original: Callable[[], Module] | None) -> None:
    """Verify after a changing pass; blame the input instead when it was invalid already."""
    try:
        verify(module, culprit=culprit)
    except VerificationError:
        if original is not None:
            try:
                verify(original())
            except VerificationError as err:
                raise VerificationError(err.problems, before_passes=True) from None
        raise
