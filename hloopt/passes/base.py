"""What every pass is: XLA's pass framework in xDSL's dress.

A pass is a small frozen dataclass whose fields are its options (xDSL); ``run(module)``
rewrites the module in place and *returns* what it did (torch.fx), never keeping
state on the pass object. `OpExpanderPass` mirrors XLA's class of the same name:
collect the matching instructions first, then expand each, so a rewrite never sees
instructions created by an earlier rewrite; ``expand`` returns the replacement (or
None to leave the instruction as it is) and the base replaces the instruction with
XLA's ``ReplaceInstruction`` semantics, recording where each new instruction came from.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol, runtime_checkable

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.errors import HloError, Subject, about
from hloopt.ir.async_form import printed_as_sugar
from hloopt.ir.builder import Builder
from hloopt.ir.module import Instruction, Module
from hloopt.ir.shape import ArrayShape, Shape, TupleShape, fold_tree, tuple_elements
from hloopt.passes.async_ops import async_kept_single
from hloopt.passes.registry import row_for

#: (an instruction the pass made or rewrote, the instruction of its input it stands for), by name.
Provenance = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PassResult:
    """What one run did: whether the module changed (as the pass itself reports it), how many
    instructions it rewrote (for reports), warnings for the user, and the provenance of every
    instruction it made or rewrote (what a trace of the passes follows back to the input)."""

    changed: bool
    rewritten: int = 0
    warnings: tuple[str, ...] = ()
    provenance: Provenance = ()


class PassError(HloError):
    """A pass failed on something other than a refusal of its input (a bug in it): the user is told
    which pass, after which others, and on which instruction, instead of a bare ``KeyError``.

    The original exception is its ``__cause__``; a pass's own `HloError` (its words about the
    input) is not wrapped.
    """

    def __init__(
        self,
        what: str,
        pass_name: str,
        instruction: str | None = None,
        after: tuple[str, ...] = (),
        subject: Subject | None = None,
    ) -> None:
        self._args = (what, pass_name, instruction, after, subject)
        self.subject = subject
        head = f"in pass {pass_name}" + (f" (after {', '.join(after)})" if after else "")
        super().__init__(f"{head}: " + (f"{instruction}: " if instruction else "") + what)

    def __reduce__(
        self,
    ) -> tuple[type[PassError], tuple[str, str, str | None, tuple[str, ...], Subject | None]]:
        """Rebuilt from its arguments, so it crosses from a worker process as itself."""
        return PassError, self._args

    def after(self, passes: tuple[str, ...]) -> PassError:
        """The same error, naming the passes that ran before (which the pipeline knows)."""
        what, pass_name, instruction, _, subject = self._args
        return PassError(what, pass_name, instruction, passes, subject)

    @staticmethod
    def on(what: str, pass_name: str, instruction: Instruction) -> PassError:
        """A pass's failure on `instruction`: named in the message, and its subject for `located`."""
        return PassError(what, pass_name, where(instruction), subject=subject_of(instruction))


def pass_name(hlo_pass: HloPass) -> str:
    """What reports, dumps and errors call a pass: its `name`, else (a pass written in a notebook) its class;
    a `SiteFilter` is called by the pass it filters (its errors are that pass's)."""
    if isinstance(hlo_pass, SiteFilter):
        return pass_name(hlo_pass.expander)
    return hlo_pass.name or type(hlo_pass).__name__


def subject_of(instruction: Instruction) -> Subject:
    """What an error about `instruction` records, for `errors.located` to find its statement."""
    return instruction.name, instruction.parent.name if instruction.parent is not None else None


def where(instruction: Instruction) -> str:
    """``%name (opcode) in %computation``: how messages name an instruction."""
    computation = instruction.parent.name if instruction.parent is not None else "?"
    return f"%{instruction.name} ({instruction.opcode}) in %{computation}"


def provenance_of(source: Instruction, made: Iterable[Instruction]) -> Provenance:
    """Each instruction of `made` still in the module (not dropped as dead code), paired with `source`,
    the instruction it replaced or came from (itself, for one rewritten in place)."""
    return tuple((new.name, source.name) for new in dict.fromkeys(made) if new.parent is not None)


def _as_written(module: Module, provenance: Provenance, written_as: dict[str, str]) -> Provenance:
    """`provenance` in the names the texts hold: an instruction inside a computation read as async sugar
    (`written_as`, from the computations' `sugar` facts) is the sugared start in the input, and in the
    output too while it prints as sugar; one printed in an expanded computation comes from that start."""
    present = {i.name for c in module.computations if not printed_as_sugar(c) for i in c.instructions}
    pairs = [(new if new in present else written_as.get(new, new), written_as.get(old, old)) for new, old in provenance]
    made = {new for new, _ in pairs}
    pairs += [(name, start) for name, start in written_as.items() if name in present and name not in made]
    return tuple(dict.fromkeys(pairs))


def described(err: Exception) -> str:
    """An exception as an error message names it: its type, and its text when it has one."""
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


@dataclass(frozen=True)
class HloPass(ABC):
    """One module-to-module rewrite (XLA's ``HloModulePass``); options are dataclass fields.

    A subclass writes `run_on_module`. A registered pass takes its `name` from its registry row
    (`hloopt.passes.registry`), so the name is written once; an unregistered one sets `name` itself.
    """

    #: The kebab-case name the registry, reports and dumps use.
    name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        row = row_for(cls.__module__, cls.__name__)
        if row is not None:
            if "name" in vars(cls) and vars(cls)["name"] != row.name:
                raise TypeError(f"{cls.__name__} is registered as {row.name!r}: it must not name itself otherwise")
            cls.name = row.name

    def run(self, module: Module) -> PassResult:
        """Rewrite `module` in place and say what changed.

        The pass sees async ops in their one explicit form; an async computation it expanded is
        wrapped in a call afterwards (`async_kept_single`). Where its edits print is the printer's
        to decide (from the IR's facts).

        An exception other than an `HloError` becomes a `PassError` naming the pass.
        """
        try:
            with async_kept_single(module) as written_as:
                result = self.run_on_module(module)
        except HloError:
            raise
        except Exception as err:
            raise PassError(described(err), pass_name(self)) from err
        if written_as and result.provenance:
            result = replace(result, provenance=_as_written(module, result.provenance, written_as))
        return result

    @abstractmethod
    def run_on_module(self, module: Module) -> PassResult:
        """Do the work; report `changed` truthfully (the pipeline can check it against the printed text)."""


@runtime_checkable
class Matching(Protocol):
    """A pass that can say what it would still rewrite (the tests check it is nothing once it has run)."""

    def matches(self, module: Module) -> list[Instruction]:
        """The instructions this pass would still rewrite (empty once it has run)."""
        ...


@dataclass(frozen=True)
class OpExpanderPass(HloPass):
    """Find every instruction the pattern matches, then expand them one by one (XLA's OpExpanderPass)."""

    def run_on_module(self, module: Module) -> PassResult:
        return self.expand_sites(module, None)

    def expand_sites(self, module: Module, sites: Collection[str] | None) -> PassResult:
        """The run, on the matches named in `sites` only when given (XLA's ``extra_filter``, `SiteFilter`)."""
        shapes = ShapeResolver(module)
        rewritten = 0
        warnings: list[str] = []
        provenance: list[tuple[str, str]] = []
        for instruction in self.matches(module, shapes):
            computation = instruction.parent
            if computation is None or (sites is not None and instruction.name not in sites):
                continue  # removed as dead code by an earlier expansion, or not a site asked for
            try:
                said = self.warnings(instruction, shapes)  # read before the instruction is replaced
                builder = Builder.before(instruction)
                replacement = self.expand(builder, instruction, shapes)
                if replacement is None:
                    if builder.created:
                        raise ValueError("expand made instructions, then returned None (skip before making any)")
                    continue
                computation.replace_instruction(instruction, replacement)
            except HloError as err:  # the pass refuses its input: the error is about this instruction
                if err.subject is None:
                    about(err, *subject_of(instruction))
                raise
            except Exception as err:
                raise PassError.on(described(err), pass_name(self), instruction) from err
            warnings += said
            provenance += provenance_of(instruction, [*builder.created, replacement])
            rewritten += 1
        return PassResult(rewritten > 0, rewritten, tuple(warnings), tuple(provenance))

    def matches(self, module: Module, shapes: ShapeResolver | None = None) -> list[Instruction]:
        if shapes is None:  # called from outside `run`
            shapes = ShapeResolver(module)
        found: list[Instruction] = []
        for computation in module.computations:
            matched = {i for i in computation.instructions if self._matches(i, shapes)}
            if matched:  # most computations match nothing: order only those that do
                found += [i for i in computation.post_order() if i in matched]
        return found

    def _matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        """The gate, with a failure naming the instruction it failed on."""
        try:
            return self.instruction_matches(instruction, shapes)
        except HloError as err:
            if err.subject is None:
                about(err, *subject_of(instruction))
            raise
        except Exception as err:
            raise PassError.on(described(err), pass_name(self), instruction) from err

    @abstractmethod
    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        """The gate (XLA's InstructionMatchesPattern)."""

    @abstractmethod
    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction | None:
        """The replacement of `instruction` (XLA's ExpandInstruction), or None to leave it as it is.

        New instructions are made with `builder`, which inserts them just before
        `instruction`; the replacement may also be an instruction that already exists.
        None must come before anything is made.
        """

    def warnings(self, instruction: Instruction, shapes: ShapeResolver) -> list[str]:
        """Warnings for the user about expanding `instruction` (read before it is replaced)."""
        del instruction, shapes
        return []


@dataclass(frozen=True)
class SiteFilter(HloPass):
    """`expander` run only on its matches named in `sites` (XLA's OpExpanderPass ``extra_filter``): what
    ``trace --bisect`` narrows down to the rewrites that move the numbers."""

    name: ClassVar[str] = "site-filter"
    expander: OpExpanderPass
    sites: frozenset[str]

    def run_on_module(self, module: Module) -> PassResult:
        return self.expander.expand_sites(module, self.sites)


def to_f32(shape: Shape) -> Shape:
    """``ShapeUtil::ChangeElementType(shape, F32)`` for an array; tuples element by element."""

    def leaf(current: Shape) -> Shape:
        if isinstance(current, ArrayShape):
            return current.with_element_type("f32")
        raise TypeError(f"cannot change the element type of {current.to_text()}")

    return fold_tree(shape, tuple_elements, leaf, lambda _, elements: TupleShape(tuple(elements)))


def known_shape(shapes: ShapeResolver, instruction: Instruction) -> Shape:
    """The instruction's shape, written or inferred; an error when the source left it unknowable."""
    shape = shapes(instruction)
    if shape is None:
        message = f"cannot infer the shape of %{instruction.name} ({instruction.opcode}); write it out"
        raise about(HloError(message), *subject_of(instruction))
    return shape
