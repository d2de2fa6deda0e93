"""An async computation a pass expanded, wrapped in a ``call`` again after the pass.

The IR holds async ops in one form, the explicit ``async-start … calls=`` (`ir.async_form`), so a
pass sees a wrapped op like any other. XLA's verifier requires an async computation to hold only
its root and parameters; one that a pass turned into several instructions becomes the callee of a
``call``, the new single wrapped op, which prints as ``call-start``. This makes names, so it is a
step of the pass framework after each pass, never the printer's.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager

from hloopt.ir.async_form import SHARED_WITH_WRAPPED, fresh_computation_name, single_op, written_as
from hloopt.ir.module import AsyncSugar, AttributeValue, Computation, Instruction, Module


@contextmanager
def async_kept_single(module: Module) -> Generator[dict[str, str]]:
    """Around a pass: on leaving, every async computation that was one op and no longer is is wrapped
    in a call.

    Yields the name of each instruction inside a computation read as sugar → the name of the start
    the text wrote it as (`written_as`), as it was before the pass.
    """
    names = written_as(module)
    starts = [
        i
        for c in module.computations
        for i in c.instructions
        if i.opcode == "async-start" and isinstance(wrapped := i.attributes.get("calls"), Computation)
        if single_op(wrapped)
    ]
    yield names
    for start in starts:
        _keep_single(module, start)


def _chain(start: Instruction) -> list[Instruction]:
    """The ``async-update``s and the ``async-done`` following an explicit start."""
    chain: list[Instruction] = []
    current = start
    while next_ := [u for u in current.users if u.opcode in ("async-update", "async-done")]:
        current = next_[0]
        chain.append(current)
    return chain


def _keep_single(module: Module, start: Instruction) -> None:
    """A wrapped computation a pass expanded becomes the callee of a ``call``, printed as ``call-start``.

    The call takes XLA's parser's view of the wrapped op: the async ops' metadata and frontend
    attributes, the last one written winning.
    """
    expanded = start.attributes.get("calls")
    if not isinstance(expanded, Computation) or single_op(expanded) or expanded.root is None:
        return
    chain = _chain(start)
    wrapper = Computation(fresh_computation_name(module, f"{expanded.name}.async"))
    params = [
        wrapper.append(
            Instruction(module.unique_name(f"{start.name}.param"), "parameter", p.shape, parameter_number=index)
        )
        for index, p in enumerate(expanded.parameters())
    ]
    inherited: dict[str, AttributeValue] = {}
    for op in (start, *chain):
        inherited |= {k: v for k, v in op.attributes.items() if k in SHARED_WITH_WRAPPED}
    call = Instruction(
        module.unique_name(f"{start.name}.call"),
        "call",
        expanded.root.shape,
        params,
        {"to_apply": expanded} | inherited,
        written_order=False,
    )
    wrapper.set_root(wrapper.append(call))
    # Sugar it was read as stays recorded (a call is not the op read, so it prints in XLA's order); an
    # explicit start prints as call-start too, as XLA does, its attributes as written then the call's.
    wrapper.sugar = expanded.sugar or AsyncSugar("call", ())
    expanded.sugar = None
    assert start.parent is not None
    module.add_computation(wrapper, before=start.parent)
    for op in (start, *chain):
        if op.attributes.get("calls") is expanded:
            # the same ops, now through a call: a respelling of the start, not an edit of its computation
            op.respell(op.opcode, {k: wrapper if v is expanded else v for k, v in op.attributes.items()})
