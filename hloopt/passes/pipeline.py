"""The pass manager: run selected passes in registration order, verify, check, dump, report.

Passes run in registration order whatever order they were named in (that is
the binary's pipeline order); a pass that changed the module is followed by
the verifier, and a failure names that pass. A pass object the registry does
not know (one written in a notebook) runs right after the pass named before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from hloopt.analysis.verifier import VerificationError, verify
from hloopt.errors import HloError
from hloopt.ir.module import Module
from hloopt.passes.base import HloPass, PassError, PassResult, Provenance, pass_name
from hloopt.passes.registry import row_of, select
from hloopt.support.fileio import write_atomic

#: The changed-flag check: "silent", a pass that says it changed nothing must not have changed the
#: text; "both", also a pass that says it changed something must have.
ChangedCheck = Literal["off", "silent", "both"]


@dataclass(frozen=True)
class PassReport:
    """One pass's run: did it change the module, how many instructions it rewrote, its warnings."""

    name: str
    changed: bool
    rewritten: int
    warnings: tuple[str, ...] = ()


@dataclass
class PipelineReport:
    """The passes' runs, and `provenance`: each instruction any pass made or rewrote, by name, paired
    with the instruction of the pipeline's input it comes from (composed across the passes, so a
    trace of the output finds the input's instruction however many passes rewrote it)."""

    passes: list[PassReport] = field(default_factory=list[PassReport])
    provenance: dict[str, str] = field(default_factory=dict[str, str])

    @property
    def changed(self) -> bool:
        return any(p.changed for p in self.passes)

    def note(self, provenance: Provenance) -> None:
        """Compose one pass's provenance onto what the passes before it recorded."""
        self.provenance.update(compose(self.provenance, provenance))


def compose(earlier: dict[str, str], later: Provenance) -> dict[str, str]:
    """`later`'s pairs (made, source) with each source taken back through `earlier` to the first input:
    a name `earlier` does not hold was in that input as it is."""
    return {made: earlier.get(source, source) for made, source in later}


class _Named(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def number(self) -> int | None: ...


def order_note(given: Sequence[_Named], ordered: Sequence[_Named]) -> str | None:
    if list(given) == list(ordered):
        return None
    return "passes run in registration order: " + ", ".join(
        p.name if p.number is None else f"{p.name} (#{p.number})" for p in ordered
    )


@dataclass(frozen=True)
class _Step:
    """A pass to run, its registration number (None when unregistered) and the place it sorts at."""

    hlo_pass: HloPass
    number: int | None
    rank: float

    @property
    def name(self) -> str:
        return pass_name(self.hlo_pass)


def plan(passes: str | Sequence[str | HloPass], numerics: str | None = None) -> list[_Step]:
    """The passes in run order; specs are expanded, pass objects taken as they are."""
    items = [passes] if isinstance(passes, str) else list(passes)
    given: list[_Step] = []
    for item in items:
        if isinstance(item, str):
            for selected in select(item)[0]:
                given.append(_Step(selected.create(numerics), selected.number, selected.number))
        else:
            row = row_of(item)
            number = row.number if row is not None else None
            # Unregistered: right after whatever was named before it.
            rank = number if number is not None else (given[-1].rank if given else float("-inf"))
            given.append(_Step(item, number, rank))
    given = list(dict.fromkeys(given))
    if not given:
        raise HloError("--passes names no pass; use 'all' or a comma-separated list (see 'hloopt passes')")
    return sorted(given, key=lambda step: step.rank)


def run_pipeline(
    module: Module,
    passes: str | Sequence[str | HloPass],
    numerics: str = "xla",
    dump_dir: str | Path | None = None,
    check: bool = True,
    original: Callable[[], Module] | None = None,
    check_changed: ChangedCheck | None = None,
    after_pass: Callable[[str, str], None] | None = None,
    observe: Callable[[HloPass, Module, PassResult | None], None] | None = None,
) -> PipelineReport:
    """Run `passes` (a spec such as ``all`` or ``a,b{k=v}``, or a list of specs and pass objects) on `module` in place.

    `numerics` fills the ``numerics`` option of passes whose spec leaves it unset.
    `original` rebuilds the unmodified input (the CLI re-parses the text). When the
    verifier refuses the module after a pass, the rebuilt input is verified too: if it
    was already invalid, the error says so instead of blaming the pass. Verifying every
    input up front would cost a whole verifier run on every module.

    `check_changed` (XLA's VerifyPassChangedReport) prints the module around every pass
    and fails a pass whose "changed" does not match the text; default: on ("silent") when
    dumping, since the dumps print the module anyway, else off. (The CLI passes
    $HLOOPT_CHECK_PASS_CHANGED here; the library reads no environment.)

    `after_pass` is given the name and printed module of each pass that changed it (the CLI's
    --per-pass compares them), printed once when dumping too.

    `observe` sees each pass with the module before it runs (result None) and its `PassResult` after
    (`hloopt dtypes` follows the provenance back to the input this way).

    A pass that fails on a bug raises a `PassError` naming it and the passes that ran before it.
    """
    ordered = plan(passes, numerics)
    report = PipelineReport()
    dump = Path(dump_dir) if dump_dir is not None else None
    mode = check_changed or ("silent" if dump is not None else "off")
    text = module.to_text() if dump is not None or mode != "off" else None
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        write_atomic(dump / "00-input.hlo", text or "")
    step = 0
    for planned in ordered:
        if observe is not None:
            observe(planned.hlo_pass, module, None)
        try:
            result = planned.hlo_pass.run(module)
        except PassError as err:
            raise err.after(tuple(p.name for p in report.passes)) from err.__cause__
        if observe is not None:
            observe(planned.hlo_pass, module, result)
        if result.changed and check:
            _verify_after(module, planned.name, original)
        report.passes.append(PassReport(planned.name, result.changed, result.rewritten, result.warnings))
        report.note(result.provenance)
        if text is not None and (mode != "off" or (result.changed and dump is not None)):
            before, text = text, module.to_text()
            _check_changed_report(planned.name, result.changed, before, text, mode)
        if result.changed and (dump is not None or after_pass is not None):
            step += 1
            after = text if text is not None else module.to_text()
            if dump is not None:
                write_atomic(dump / f"{step:02d}-after-{planned.name}.hlo", after)
            if after_pass is not None:
                after_pass(planned.name, after)
    return report


def _check_changed_report(name: str, changed: bool, before: str, after: str, mode: ChangedCheck) -> None:
    """XLA's VerifyPassChangedReport: the printed module must agree with the pass's "changed"."""
    if mode == "off":
        return
    differs = hash(before) != hash(after) or before != after
    if differs and not changed:
        raise HloError(f"pass {name} reported no change but changed the module (changed-flag check)")
    if mode == "both" and changed and not differs:
        raise HloError(f"pass {name} reported a change but the printed module is the same (changed-flag check)")


def _verify_after(module: Module, culprit: str, original: Callable[[], Module] | None) -> None:
    """Verify after a changing pass; blame the input instead when it was invalid already."""
    try:
        verify(module, culprit=culprit)
    except VerificationError:
        if original is not None:
            try:
                verify(original())
            except VerificationError as err:
                raise err.blamed_on_input() from None
        raise
