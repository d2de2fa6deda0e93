"""Every command that writes a file writes THROUGH a device or a FIFO and replaces a symlink's target, never the link.

`/dev/null` as an output is a CI idiom, and CI runs as root, who may rename over anything: a
writer that renamed a temporary file over it would turn the machine's /dev/null into a regular
file. These tests use a null device of their own (``mknod`` in tmp_path, as root) and FIFOs, so
a regression costs only tmp_path; the real /dev/null goes through the writer only in
tests/support/test_fileio.py.
"""

from __future__ import annotations

import io
import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_invoke import invoke
from conftest import sampled
from hlo_text import hlo

MODULE = hlo("""
    HloModule m
    ENTRY e {
      p = bf16[2] parameter(0)
      ROOT a = bf16[2] add(p, p)
    }
    """)


def _without_seconds(value: Any) -> Any:
    """A report with its timings dropped: the one thing two runs of it do not share."""
    if isinstance(value, dict):
        return {key: _without_seconds(item) for key, item in value.items() if key != "seconds"}
    if isinstance(value, list):
        return [_without_seconds(item) for item in value]
    return value


def _npz(data: bytes) -> list[tuple[str, str, bytes]]:
    with np.load(io.BytesIO(data)) as archive:  # bf16 is kept as raw bytes: compare bytes
        return [(key, archive[key].dtype.str, archive[key].tobytes()) for key in archive.files]


def _npy(data: bytes) -> list[int]:
    return np.load(io.BytesIO(data)).view(np.uint16).tolist()


#: Each command that writes a file: its arguments (OUT is the output), the output's extension, and how
#: to read its bytes into something two runs of it agree on.
COMMANDS: dict[str, tuple[list[str], str, Callable[[bytes], object]]] = {
    "run -o": (["run", "m.hlo", "--passes", "all", "-o", "OUT"], ".hlo", bytes.decode),
    "run --report": (
        ["run", "in", "--check", "--report", "OUT", "-j", "1"],
        ".json",
        lambda d: _without_seconds(json.loads(d)),
    ),
    "report merge -o": (
        ["report", "merge", "shard.json", "-o", "OUT"],
        ".json",
        lambda d: _without_seconds(json.loads(d)),
    ),
    "exec -o": (["exec", "m.hlo", "-o", "OUT"], ".npz", _npz),
    "exec --save-inputs": (["exec", "m.hlo", "--save-inputs", "OUT"], ".npz", _npz),
    "cast -o": (["cast", "x.npy", "--to", "bf16", "-o", "OUT"], ".npy", _npy),
}


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The inputs of every command, in the current directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.hlo").write_text(MODULE)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "m.hlo").write_text(MODULE)
    np.save(tmp_path / "x.npy", np.arange(5, dtype=np.float32))
    shard = invoke("run", "in", "--check", "--shard", "1/1", "--report", "shard.json", "-j", "1")
    assert shard.exit_code == 1, shard.stderr  # the module would change
    return tmp_path


def _run(command: str, out: Path | str) -> tuple[int, str]:
    args = [str(out) if arg == "OUT" else arg for arg in COMMANDS[command][0]]
    result = invoke(*args)
    return result.exit_code, result.stderr


def _expected(command: str, place: Path) -> object:
    """What the command writes into a new regular file."""
    _, suffix, decode = COMMANDS[command]
    reference = place / f"reference{suffix}"
    code, stderr = _run(command, reference)
    assert code in (0, 1) and reference.is_file(), stderr
    data = reference.read_bytes()
    reference.unlink()
    return decode(data)


def _leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fifo_reader_receives_the_whole_output(place: Path, command: str) -> None:
    expected = _expected(command, place)
    fifo = place / f"pipe{COMMANDS[command][1]}"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    try:
        code, stderr = _run(command, fifo)
    finally:
        if reader.is_alive():  # the command failed before opening the FIFO: let the reader go
            with open(fifo, "wb"):
                pass
        reader.join()
    assert code in (0, 1), stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert COMMANDS[command][2](received[0]) == expected
    assert _leftovers(place) == []


def _null_device(path: Path) -> Path:
    """A character device of our own with /dev/null's numbers, or skip where it cannot be made."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as err:
        pytest.skip(f"cannot make a null device here ({err.strerror}); tests/support covers /dev/null itself")
    return path


@pytest.mark.parametrize("command", sampled(COMMANDS, 2))
def test_a_null_device_stays_a_character_device(place: Path, command: str) -> None:
    null = _null_device(place / f"null{COMMANDS[command][1]}")
    code, stderr = _run(command, null)
    assert code in (0, 1), stderr
    assert stat.S_ISCHR(null.lstat().st_mode) and null.stat().st_rdev == os.makedev(1, 3)
    assert _leftovers(place) == []


def _links(place: Path, kind: str, suffix: str) -> tuple[Path, Path, list[Path]]:
    """(what to pass as the output, the file that must get the output, the links that must stay)."""
    real = place / "real" / f"real{suffix}"
    real.parent.mkdir()
    if kind != "dangling":
        real.write_bytes(b"old\n")
        real.chmod(0o640)
    if kind == "chain":  # relative links, each read from its own directory
        (place / "hop").mkdir()
        (place / "hop" / f"one{suffix}").symlink_to(Path("..", "real", real.name))
        (place / f"two{suffix}").symlink_to(Path("hop", f"one{suffix}"))
        return place / f"two{suffix}", real, [place / f"two{suffix}", place / "hop" / f"one{suffix}"]
    link = place / f"link{suffix}"
    link.symlink_to(real)
    return link, real, [link]


@pytest.mark.parametrize("kind", ["link", "chain", "dangling"])
@pytest.mark.parametrize("command", sampled(COMMANDS, 2))
def test_a_symlink_stays_and_its_target_gets_the_output(place: Path, command: str, kind: str) -> None:
    expected = _expected(command, place)
    out, real, links = _links(place, kind, COMMANDS[command][1])
    targets = {link: os.readlink(link) for link in links}
    code, stderr = _run(command, out)
    assert code in (0, 1), stderr
    assert {link: os.readlink(link) for link in links if link.is_symlink()} == targets
    assert stat.S_ISREG(real.lstat().st_mode)
    assert COMMANDS[command][2](real.read_bytes()) == expected
    if kind != "dangling":  # replaced, as a file is: its mode is kept
        assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert _leftovers(place) == [] and _leftovers(real.parent) == []


def test_a_dump_file_that_is_a_symlink_stays_one(place: Path) -> None:
    """--dump-dir writes through the same writer: a dump file linked elsewhere keeps its link."""
    (place / "dumps").mkdir()
    (place / "kept.hlo").write_text("old\n")
    (place / "dumps" / "00-input.hlo").symlink_to(place / "kept.hlo")
    result = invoke("run", "m.hlo", "--passes", "all", "--dump-dir", "dumps")
    assert result.exit_code == 0, result.stderr
    assert (place / "dumps" / "00-input.hlo").is_symlink()
    assert (place / "kept.hlo").read_text().startswith("HloModule m, entry_computation_layout=")


def test_a_directory_is_still_refused_and_a_symlink_loop_is_an_error(place: Path) -> None:
    (place / "dir.hlo").mkdir()
    (place / "loop.hlo").symlink_to("loop2.hlo")
    (place / "loop2.hlo").symlink_to("loop.hlo")
    for out, message in (("dir.hlo", "dir.hlo: is a directory"), ("loop.hlo", "loop.hlo: cannot reach loop.hlo")):
        result = invoke("run", "m.hlo", "-o", out)
        assert result.exit_code == 2 and result.stderr.startswith(f"hloopt: error: {message}"), result.stderr
    assert (place / "loop.hlo").is_symlink() and (place / "loop2.hlo").is_symlink()
