"""A differential fuzzer: hloopt's parser beside XLA's (jaxlib's) on mutants of corpus modules.

Each mutant is a corpus module with one or two edits, at the character level (a character
replaced, inserted or deleted, non-ASCII letters, Unicode digits and spaces among them) or at
the token level (a token dropped, duplicated or swapped; `=`, a bracket or a comma put in; an
attribute name misspelt; a number written in hex, huge or negative). hloopt parses it here, under
a time bound; XLA parses it in the bridge's crash-isolating workers, several mutants to a call.
Each mutant lands in one class: both accept, both refuse, hloopt accepts what XLA refuses (the
serious kind: the README promises hloopt refuses what XLA refuses), hloopt refuses what XLA
accepts, or XLA crashes. Any hloopt refusal that is not a located `HloParseError` is counted too.

`tests/text/test_parity_fuzz.py` runs a fixed seed and budget; `benchmarks/fuzz_parity.py` runs
as many as asked and prints the counts. Mutants are text (`str`): bytes that are not UTF-8 never
reach either parser (hloopt's reader refuses them first; `test_fuzz_parser.py` covers that).
"""

from __future__ import annotations

import importlib
import random
import re
import resource
import signal
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from hloopt.errors import HloError, HloParseError
from hloopt.ir.opcodes import OPCODES
from hloopt.text.parser import parse
from hloopt.xla.bridge import IsolatedPool, XlaCrash, canonical

#: The classes, in report order.
AGREE_ACCEPT = "agree-accept"
AGREE_REFUSE = "agree-refuse"
HLOOPT_ONLY = "hloopt-accepts-xla-refuses"
XLA_ONLY = "hloopt-refuses-xla-accepts"
XLA_CRASH = "xla-crashes"
UNLOCATED = "hloopt-unlocated-refusal"
CLASSES = (AGREE_ACCEPT, AGREE_REFUSE, HLOOPT_ONLY, XLA_ONLY, XLA_CRASH, UNLOCATED)
#: Seeds: corpus modules up to this size (every construct appears in small modules; small mutants run fast).
SEED_CHARS = 3_000
#: The address space an XLA worker may use.
WORKER_BYTES = 6 << 30
#: Mutants per XLA call: one worker round trip for many parses.
BATCH = 64

_TOKEN = re.compile(r"\s+|[(){}\[\],=:%]|[^\s(){}\[\],=:%]+")
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")
_ATTRIBUTE_NAME = re.compile(r"(?<=[,{ ])([a-z_]{3,})=")
#: Characters spliced in: ASCII punctuation, non-ASCII letters, digits other than 0-9, spaces other than ' '.
_ODD = (
    "\u00a0\u2003\u3000\u200b\ufeff\u0085\u2028\t\r\v\f"  # spaces, breaks and invisibles
    "\uff12\u0663\u0967\u00b2\u2155\U0001d7ce"  # digits XLA's lexer does not read as digits
    "\u00e9\u00df\u0131\u212a\u017f\u03a9"  # letters, some of which case-fold to ASCII
    "{}()[]<>=,:;%#\"'\\/*-+.!?_@$^&|~` 0123456789xeE"
)
#: Where and what XLA's parser says first: ``was parsing 3:42: error: unknown attribute …``.
_XLA_SAID = re.compile(r"was parsing (\d+:\d+): error: ([^\n]*)")
#: XLA's words when an allocation failed (a literal of gigabytes under the worker's cap), not a refusal of the text.
_OUT_OF_MEMORY = re.compile(r"RESOURCE_EXHAUSTED: Failed to allocate|std::bad_alloc")
_NUMBERS = ("0x7f", "-1", "-0", "99999999999999999999", "2147483648", "1e400", "+1", "01", "1.5", "0b1")


@contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """SIGALRM after `seconds`: a hang becomes a failure (`Hang`) instead of a stuck run (main thread only)."""

    def alarm(signum: int, frame: object) -> None:
        raise Hang(f"no answer after {seconds:.1f}s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Hang(Exception):
    """An input ran past its time bound."""


def bound_for(size: int) -> float:
    """Generous for two shared cores, yet far below what a quadratic blow-up or a loop would take."""
    return 5.0 + size / 50_000


def seeds(corpus: Path) -> list[str]:
    """The corpus modules XLA's index says parse, small enough to mutate fast, in name order."""
    rows = (corpus / "INDEX.tsv").read_text().splitlines()
    header = rows[0].split("\t")
    parsed = {
        row["file"] for row in (dict(zip(header, r.split("\t"))) for r in rows[1:]) if row["parses_with_xla"] == "yes"
    }
    texts = []
    for path in sorted((corpus / "xla").glob("*.hlo")):
        if f"xla/{path.name}" in parsed and path.stat().st_size <= SEED_CHARS:
            texts.append(path.read_text())
    return texts


# ---- mutations: each takes (random, text) and returns the mutant ----------------------------
def _replace_char(rng: random.Random, text: str) -> str:
    at = rng.randrange(len(text))
    return text[:at] + rng.choice(_ODD) + text[at + 1 :]


def _insert_char(rng: random.Random, text: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice(_ODD) + text[at:]


def _delete_chars(rng: random.Random, text: str) -> str:
    at = rng.randrange(len(text))
    return text[:at] + text[at + rng.choice((1, 1, 1, 2, 3)) :]


def _edit_token(rng: random.Random, text: str) -> str:
    tokens = _TOKEN.findall(text)
    i, j = rng.randrange(len(tokens)), rng.randrange(len(tokens))
    action = rng.choice(("drop", "duplicate", "swap", "insert"))
    if action == "drop":
        del tokens[i]
    elif action == "duplicate":
        tokens.insert(i, tokens[i])
    elif action == "swap":
        tokens[i], tokens[j] = tokens[j], tokens[i]
    else:
        tokens.insert(i, rng.choice(("=", "{", "}", "(", ")", "[", "]", ",", ":", "%", "{}", "()", "[]", " ")))
    return "".join(tokens)


def _misspell_attribute(rng: random.Random, text: str) -> str:
    names = list(_ATTRIBUTE_NAME.finditer(text))
    if not names:
        return _edit_token(rng, text)
    name = rng.choice(names)
    word = name.group(1)
    at = rng.randrange(len(word))
    edit = rng.choice(("drop", "double", "letter"))
    if edit == "drop":
        word = word[:at] + word[at + 1 :]
    elif edit == "double":
        word = word[:at] + word[at] + word[at:]
    else:
        word = word[:at] + rng.choice("abcdefghijklmnopqrstuvwxyz_") + word[at + 1 :]
    return text[: name.start(1)] + word + text[name.end(1) :]


def _renumber(rng: random.Random, text: str) -> str:
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return _edit_token(rng, text)
    number = rng.choice(numbers)
    return text[: number.start()] + rng.choice(_NUMBERS) + text[number.end() :]


#: (kind, mutation), each as likely as the others.
MUTATIONS: tuple[tuple[str, Callable[[random.Random, str], str]], ...] = (
    ("replace-char", _replace_char),
    ("insert-char", _insert_char),
    ("delete-chars", _delete_chars),
    ("token", _edit_token),
    ("attribute-name", _misspell_attribute),
    ("number", _renumber),
)


def mutants(texts: Sequence[str], count: int, seed: int) -> Iterator[tuple[str, str]]:
    """`count` (kind, mutant) pairs from `texts`, the same for the same `seed`; mutants equal to their
    module are skipped (they prove nothing)."""
    rng = random.Random(seed)
    made = 0
    while made < count:
        text = rng.choice(texts)
        kinds = []
        mutant = text
        for _ in range(rng.choice((1, 1, 2))):
            kind, mutate = rng.choice(MUTATIONS)
            kinds.append(kind)
            mutant = mutate(rng, mutant) if mutant else mutant
        if mutant != text:
            made += 1
            yield "+".join(kinds), mutant


# ---- the two judges ---------------------------------------------------------------------------
def hloopt_verdict(text: str) -> str | None:
    """None if hloopt parses `text`; else ``line:column: message`` of its error, or `UNLOCATED` and the
    error when it is not a located `HloParseError` inside the text."""
    try:
        with time_bound(bound_for(len(text))):
            parse(text, "mutant.hlo")
    except HloParseError as err:
        where = err.location
        if where.filename != "mutant.hlo" or where.line < 1 or where.column < 1:
            return f"{UNLOCATED}: {err.render()}"
        return f"{where.line}:{where.column}: {err.message}"
    except Exception as err:  # any other exception, a hang included, is an hloopt bug: counted, not raised
        return f"{UNLOCATED}: {type(err).__name__}: {err}"
    return None


def xla_verdicts(texts: Sequence[str]) -> list[str | None]:
    """In a worker: None for each text XLA's parser reads, else where and what it first says.

    The worker's address space is capped first: a mutant shape such as ``f32[2147483648]`` on a
    constant would have XLA allocate gigabytes on a machine others share (it fails cleanly instead).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_AS, (WORKER_BYTES, hard))
    verdicts: list[str | None] = []
    for text in texts:
        try:
            canonical(text)
            verdicts.append(None)
        except MemoryError:  # past WORKER_BYTES: no verdict, as a crash gives none
            verdicts.append(f"{XLA_CRASH}: out of memory")
        except HloError as err:
            if _OUT_OF_MEMORY.search(str(err)):  # an allocation past WORKER_BYTES, said as a status: no verdict
                verdicts.append(f"{XLA_CRASH}: out of memory")
                continue
            said = _XLA_SAID.search(str(err))
            verdicts.append(f"{said.group(1)}: {said.group(2)}" if said else str(err).splitlines()[0] or "refused")
    return verdicts


def xla_judge(pool: IsolatedPool, texts: Sequence[str], timeout: float = 60.0) -> list[str | None]:
    """XLA's verdict on each text, `BATCH` to a call; a batch whose worker crashed is run again one
    text to a call, and a text that crashes XLA on its own gets ``XLA_CRASH: …``."""
    batches = [list(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)]
    answers = pool.map(xla_verdicts, [(batch,) for batch in batches], timeout=timeout)
    verdicts: list[str | None] = []
    for batch, answer in zip(batches, answers):
        if not isinstance(answer, XlaCrash):
            verdicts += answer
            continue
        for alone in pool.map(xla_verdicts, [([text],) for text in batch], timeout=timeout):
            verdicts.append(f"{XLA_CRASH}: {alone}" if isinstance(alone, XlaCrash) else alone[0])
    return verdicts


@dataclass
class Report:
    """Counts per class, and the mutants of the two disagreeing classes (and of an unlocated refusal)."""

    counts: Counter[str] = field(default_factory=Counter)
    #: class → [(mutation kinds, hloopt's verdict, XLA's verdict, mutant)]
    found: dict[str, list[tuple[str, str | None, str | None, str]]] = field(default_factory=dict)

    def add(self, kind: str, mutant: str, ours: str | None, theirs: str | None) -> None:
        if ours is not None and ours.startswith(UNLOCATED):
            verdict = UNLOCATED
        elif theirs is not None and theirs.startswith(XLA_CRASH):
            verdict = XLA_CRASH
        elif ours is None:
            verdict = AGREE_ACCEPT if theirs is None else HLOOPT_ONLY
        else:
            verdict = XLA_ONLY if theirs is None else AGREE_REFUSE
        self.counts[verdict] += 1
        if verdict in (HLOOPT_ONLY, XLA_ONLY, UNLOCATED):
            self.found.setdefault(verdict, []).append((kind, ours, theirs, mutant))

    @property
    def tried(self) -> int:
        return sum(self.counts.values())


#: Texts that make hloopt build what it builds on first need (the one-token-per-instruction parser, the
#: end-of-input regexes, the numeric libraries literals are checked with): seconds on a loaded machine, which must not count against a mutant's time bound.
_WARM_UP = (
    "HloModule m\n\nENTRY e { ROOT p = f32[] parameter(0) } x",
    "HloModule m\n\nENTRY e {\n  ROOT p = f32[] parameter(0), metadata={",
)


def _warm_up() -> None:
    importlib.import_module("ml_dtypes")  # what a literal of a narrow type is checked with, imported on first need
    for text in _WARM_UP:
        with suppress(HloError):
            parse(text)


def run(
    texts: Sequence[str],
    count: int,
    seed: int,
    pool: IsolatedPool,
    allowed: Callable[[str, str | None, str | None], bool] = lambda mutant, ours, theirs: False,
    chunk: int = 2_048,
) -> Report:
    """`count` mutants judged by both parsers, `chunk` at a time (XLA's half in `pool`'s workers).

    A disagreement `allowed(mutant, hloopt's verdict, XLA's verdict)` accepts (a documented one) is
    counted under its class with ``-allowed`` added and not kept among the found.
    """
    report = Report()
    _warm_up()
    stream = mutants(texts, count, seed)
    while True:
        batch = [pair for _, pair in zip(range(chunk), stream)]
        if not batch:
            return report
        pool.start()  # the zygote imports jax while this process parses
        ours = [hloopt_verdict(mutant) for _, mutant in batch]
        theirs = xla_judge(pool, [mutant for _, mutant in batch])
        for (kind, mutant), mine, xla in zip(batch, ours, theirs):
            disagree = (mine is None) != (xla is None) and not (xla or "").startswith(XLA_CRASH)
            if disagree and allowed(mutant, mine, xla):
                report.counts[(HLOOPT_ONLY if mine is None else XLA_ONLY) + "-allowed"] += 1
            else:
                report.add(kind, mutant, mine, xla)


#: The disagreements left on purpose, each with its reason (docs/decisions.md has the long form):
#: (reason, test of the mutant and the two verdicts).
ALLOWED: tuple[tuple[str, Callable[[str, str | None, str | None], bool]], ...] = (
    (
        "a sharding whose device list does not fill its tiles: jaxlib 0.12's parser refuses it, as hloopt does; "
        "jaxlib 0.10 reads it and fails later",
        lambda mutant, ours, theirs: theirs is None and "does not match the tile assignment" in (ours or ""),
    ),
    (
        "a layout with a negative entry (`{1,-1}`, `{-0,1}`): XLA's parser reads any integer there and checks "
        "nothing; hloopt reads a layout as dimension numbers (and takes a `{` after a shape as its layout only "
        "when a digit or `:` follows)",
        lambda mutant, ours, theirs: theirs is None and re.search(r"\]\{[0-9, ]*-[0-9]", mutant) is not None,
    ),
    (
        "XLA refuses with no words at all (`Syntax error when trying to parse the text as a HloModule:` and "
        "nothing after): it names no place and no rule, so there is nothing yet to follow",
        lambda mutant, ours, theirs: ours is None and (theirs or "").endswith("parse the text as a HloModule:"),
    ),
    (
        "a sharding over a mesh's named axes (`mesh['x'=2] [{'x'}]`, jaxlib 0.12's newer form): hloopt reads its "
        "axis names, attributes and device_ids count, and leaves the rest of its syntax to XLA (jaxlib 0.10 does "
        "not read the form at all)",
        lambda mutant, ours, theirs: (
            ours is None and ("in mesh" in (theirs or "") or "mesh[" in located_line(mutant, theirs))
        ),
    ),
    (
        "the values hloopt keeps as text and XLA parses whole: `origin_recovery_table` (a module in a string), a "
        "quoted `backend_config` XLA reads as JSON, `sparsity_config`",
        lambda mutant, ours, theirs: (
            ours is None
            and (
                re.search(r"error parsing attribute (origin_recovery_table|backend_config)", theirs or "") is not None
                or re.search(r"(origin_recovery_table|sparsity_config)=", located_line(mutant, theirs)) is not None
            )
        ),
    ),
    (
        "a name with a colon against it where no signature parameter stands (`x: = f32[2] …`, `c:{`, `add(p0:, p1)`): "
        "XLA's lexer reads `name:` as one name token, the one signature parameters use, so any name may carry "
        "one; hloopt reads the colon only after a signature parameter's name, as XLA prints it",
        lambda mutant, ours, theirs: (
            theirs is None and re.search(r"[A-Za-z0-9_.\-]:[ \t]*[={,)]", located_line(mutant, ours)) is not None
        ),
    ),
    (
        "a scan dimension past its operands' rank (`dimensions={11}`): neither jaxlib line's parser checks it "
        "against the operands; hloopt's validation does, as XLA's verifier would",
        lambda mutant, ours, theirs: theirs is None and "scan dimension" in (ours or ""),
    ),
    (
        "a JSON backend_config or a braced frontend attribute whose square brackets or parentheses do not pair, or "
        "that holds a single quote (`{a:[{b:1}, c:2}`): XLA takes the text up to the brace that closes it, counting "
        "braces only, and never reads it; hloopt's grammar pairs every bracket and quote of a value, so the value "
        "runs on past that brace",
        lambda mutant, ours, theirs: theirs is None and ours is not None and _unpaired_raw_brackets(mutant),
    ),
    (
        "a shape XLA infers from operands whose own shapes are inferred (`w = while(t)` with `t = tuple(a, b)`), "
        "or for an opcode hloopt does not infer at parse time (dot, reduce): hloopt infers shapes while parsing "
        "only from the shapes the text writes (binary operations, transpose, clamp, while, call); inferring the "
        "rest is `analysis/shape_inference`'s, which `text/` may not use",
        lambda mutant, ours, theirs: ours is None and "failed to infer shape for opcode:" in (theirs or ""),
    ),
    (
        "an operand that names no instruction but an opcode (`custom-call(constant)`, `tuple(conditional, p)`): "
        "XLA's parser, failing to find the name, tries it as a nested instruction without a shape, fails again, "
        "and where the opcode takes any number of operands it keeps going without that operand (`tuple(p)`, "
        "`custom-call()`); hloopt refuses the name, since XLA's reading silently drops an operand",
        lambda mutant, ours, theirs: (
            theirs is None
            and (named := re.search(r"instruction (\S+) does not exist", ours or "")) is not None
            and named.group(1) in OPCODES
        ),
    ),
)


_RAW_PART = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]()\']')


def _unpaired_raw_brackets(mutant: str) -> bool:
    """Whether a `backend_config={…}` or `frontend_attributes={…}` of `mutant`, ended where XLA ends it (its
    braces balanced, double-quoted strings skipped), holds square brackets or parentheses that do not pair,
    or a single quote."""
    for start in (found.end() for found in re.finditer(r"(?:backend_config|frontend_attributes)=\{", mutant)):
        braces, others = 1, Counter[str]()
        for part in _RAW_PART.finditer(mutant, start):
            bracket = part.group()
            braces += {"{": 1, "}": -1}.get(bracket, 0)
            others[bracket] += 1
            if not braces:
                break
        if others["["] != others["]"] or others["("] != others[")"] or others["'"]:
            return True
    return False


def located_line(mutant: str, verdict: str | None) -> str:
    """The line of `mutant` a refusal (``line:column: …``, either side's) points at, else ""."""
    found = re.match(r"(\d+):\d+: ", verdict or "")
    return "" if found is None else [*mutant.split("\n"), ""][int(found.group(1)) - 1]


def allowed(mutant: str, ours: str | None, theirs: str | None) -> bool:
    """Whether a disagreement is one of `ALLOWED`."""
    return any(test(mutant, ours, theirs) for _, test in ALLOWED)
