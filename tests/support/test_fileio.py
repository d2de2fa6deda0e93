"""`write_atomic`: a reader sees the old file or the whole new one; only a replacement pays for fsync;
a device or FIFO is written through, and a symlink stays while its target is replaced."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hloopt.errors import HloError
from hloopt.support import fileio
from hloopt.support.fileio import check_output, write_atomic


def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    fsync = os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def test_a_new_file_is_written_whole_without_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lost in a crash, a new output costs the user nothing: no fsync (a batch writes thousands)."""
    calls = _fsyncs(monkeypatch)
    target = tmp_path / "new.hlo"
    write_atomic(target, "HloModule m\n")
    assert target.read_text() == "HloModule m\n"
    assert calls == []
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir()] == ["new.hlo"]


def test_replacing_a_file_syncs_the_new_one_first_and_keeps_its_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's file is replaced only by a new one already on disk, so a crash leaves one of the two."""
    target = tmp_path / "mine.hlo"
    target.write_text("old\n")
    target.chmod(0o640)
    calls = _fsyncs(monkeypatch)
    write_atomic(target, b"new\n")
    assert target.read_text() == "new\n"
    assert len(calls) == 1
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["mine.hlo"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "mine.hlo"
    target.write_text("old\n")

    def refuse(source: object, destination: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(HloError, match=r"mine\.hlo: cannot write: no space left on device"):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["mine.hlo"]


def test_dev_null_is_written_through_and_stays_a_character_device() -> None:
    """``-o /dev/null`` as root: renaming over it would make the machine's /dev/null a regular file."""
    before = os.stat("/dev/null")
    assert stat.S_ISCHR(before.st_mode)
    check_output("/dev/null")
    write_atomic("/dev/null", "HloModule m\n" * 1000)
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert stat.S_IMODE(after.st_mode) == stat.S_IMODE(before.st_mode)


def test_a_fifo_gets_every_byte_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "out.hlo"
    os.mkfifo(fifo)
    check_output(fifo)
    payload = bytes(range(256)) * 4096  # far more than a pipe holds: the writer must keep writing
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, payload)
    reader.join()
    assert received == [payload]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.hlo"]


def test_a_fifo_whose_reader_left_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    fifo = tmp_path / "out.hlo"
    os.mkfifo(fifo)
    reader = threading.Thread(target=lambda: open(fifo, "rb").close())  # opens, reads nothing, leaves
    reader.start()
    with pytest.raises(HloError, match=r"out\.hlo: cannot write: broken pipe"):
        write_atomic(fifo, b"x" * (1 << 20))
    reader.join()
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def _chain(tmp_path: Path, depth: int) -> Path:
    """link{depth} -> … -> link1 -> real.hlo, each link relative and in its own directory."""
    previous = Path("real.hlo")
    for level in range(1, depth + 1):
        (tmp_path / f"d{level}").mkdir()
        link = tmp_path / f"d{level}" / f"link{level}.hlo"
        link.symlink_to(Path("..", previous))
        previous = link.relative_to(tmp_path)
    return tmp_path / previous


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_a_symlink_chain_stays_and_its_target_is_replaced_atomically(tmp_path: Path, depth: int) -> None:
    real = tmp_path / "real.hlo"
    real.write_text("old\n")
    real.chmod(0o604)
    inode = real.stat().st_ino
    link = _chain(tmp_path, depth)
    links = {p: os.readlink(p) for p in tmp_path.rglob("link*")}
    check_output(link)
    write_atomic(link, "new\n")
    assert {p: os.readlink(p) for p in tmp_path.rglob("link*")} == links  # every link as it was
    assert real.read_text() == "new\n" and not real.is_symlink()
    assert real.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert stat.S_IMODE(real.stat().st_mode) == 0o604
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_a_dangling_symlink_gets_its_target_created(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.hlo"
    link.symlink_to(Path("real", "new.hlo"))
    check_output(link)
    write_atomic(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == "real/new.hlo"
    assert (tmp_path / "real" / "new.hlo").read_text() == "new\n"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["new.hlo"]


def test_a_dangling_symlink_into_a_missing_directory_is_refused_before_writing(tmp_path: Path) -> None:
    link = tmp_path / "link.hlo"
    link.symlink_to(Path("nowhere", "new.hlo"))
    with pytest.raises(HloError, match=r"link\.hlo: directory .*nowhere does not exist"):
        check_output(link)
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["link.hlo"]


def test_a_symlink_loop_is_an_error_and_stays(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").symlink_to("b.hlo")
    (tmp_path / "b.hlo").symlink_to("a.hlo")
    for call in (check_output, lambda path: write_atomic(path, "x")):
        with pytest.raises(HloError, match=r"a\.hlo: cannot reach .*a\.hlo: too many levels of symbolic links"):
            call(tmp_path / "a.hlo")
    assert (tmp_path / "a.hlo").is_symlink() and (tmp_path / "b.hlo").is_symlink()


def test_a_directory_or_a_symlink_to_one_is_refused_as_an_output(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "to-dir").symlink_to("dir")
    for name in ("dir", "to-dir"):
        with pytest.raises(HloError, match=rf"{name}: is a directory"):
            check_output(tmp_path / name)
        with pytest.raises(HloError, match=rf"{name}: is a directory"):
            write_atomic(tmp_path / name, "x")
    assert (tmp_path / "to-dir").is_symlink() and list((tmp_path / "dir").iterdir()) == []


def test_a_new_file_gets_its_mode_from_the_kernel_without_touching_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The umask is process-wide: setting it to read it races every other thread that creates a file."""
    mask = os.umask(0o027)
    try:

        def forbidden(mask: int) -> int:
            raise AssertionError("os.umask called by a library write")

        monkeypatch.setattr(os, "umask", forbidden)
        write_atomic(tmp_path / "new.hlo", "x")
    finally:
        monkeypatch.undo()
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new.hlo").stat().st_mode) == 0o640


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
@pytest.mark.parametrize("append", [True, False])
def test_dev_stdout_is_written_through_the_open_descriptor(tmp_path: Path, name: str, append: bool) -> None:
    """``-o /dev/stdout >> log`` appends to log, as the shell opened it; the file is never replaced."""
    log = tmp_path / "log.txt"
    log.write_text("kept\n")
    inode = log.stat().st_ino
    script = f"from hloopt.support.fileio import write_atomic; write_atomic({name!r}, 'new\\n')"
    with log.open("ab" if append else "wb") as out:  # the shell's >> and >
        subprocess.run([sys.executable, "-c", script], stdout=out, check=True)
    assert log.read_text() == ("kept\nnew\n" if append else "new\n")
    assert log.stat().st_ino == inode
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_discard_on_another_thread_never_falls_between_naming_a_temporary_file_and_creating_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM awaited on a thread discards the partial writes while the main thread writes: the file whose
    name was just recorded is created before the discard looks, so the discard removes it."""
    monkeypatch.setattr(fileio, "_creating", threading.RLock())  # the discard keeps it: this test's own
    named, go_on = threading.Event(), threading.Event()
    real_open = os.open

    def slow_open(path: str, flags: int, mode: int = 0o777) -> int:
        named.set()  # the name is in _writing, the file not yet made
        go_on.wait(10)
        return real_open(path, flags, mode)

    monkeypatch.setattr(fileio.os, "open", slow_open)
    made: list[tuple[int, str]] = []
    writer = threading.Thread(target=lambda: made.append(fileio._create_temporary(tmp_path / "out.hlo", 0o600)))
    writer.start()
    assert named.wait(10)
    discard = threading.Thread(target=fileio.discard_partial_writes)
    discard.start()
    discard.join(0.3)
    assert discard.is_alive()  # it waits for the file to exist
    go_on.set()
    writer.join(10)
    discard.join(10)
    ((fd, temp),) = made
    os.close(fd)
    assert not os.path.exists(temp) and os.listdir(tmp_path) == []


def _pieces(texts: list[str], fail_after: int | None = None) -> Iterator[str]:
    """`texts` one at a time, as a printer yields them; an error after `fail_after` of them, as a printer's bug."""
    for index, text in enumerate(texts):
        if index == fail_after:
            raise RuntimeError("printer failed")
        yield text


@pytest.mark.parametrize("replacing", [False, True])
def test_pieces_are_written_into_the_temporary_file_and_appear_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replacing: bool
) -> None:
    """A streamed text is the same file as the text whole: encoded a piece at a time (UTF-8 across
    pieces of `_ENCODE_PIECE` characters), renamed into place only once the last is written."""
    monkeypatch.setattr(fileio, "_ENCODE_PIECE", 7)
    target = tmp_path / "out.hlo"
    if replacing:
        target.write_text("old\n")
    seen: list[list[str]] = []

    def watched() -> Iterator[str]:
        for text in ["HloModule m", "", "\n\nc = f32[3] constant({1, 2, 3}) // é€😀 ", "x" * 30, "\n"]:
            seen.append(sorted(p.name for p in tmp_path.iterdir()))
            yield text

    write_atomic(target, watched())
    expected = "HloModule m\n\nc = f32[3] constant({1, 2, 3}) // é€😀 " + "x" * 30 + "\n"
    assert target.read_bytes() == expected.encode("utf-8")
    # While the pieces are written, the target is the old file (or absent), the text in a temporary beside it.
    assert len(seen) == 5
    for names in seen:
        assert len(names) == 1 + replacing and ("out.hlo" in names) == replacing
        assert any(name.endswith(".tmp") for name in names)
    assert [p.name for p in tmp_path.iterdir()] == ["out.hlo"]


@pytest.mark.parametrize("existing", [None, "old\n"])
def test_pieces_that_fail_midway_leave_the_old_file_and_no_temporary(tmp_path: Path, existing: str | None) -> None:
    target = tmp_path / "out.hlo"
    if existing is not None:
        target.write_text(existing)
    with pytest.raises(RuntimeError, match="printer failed"):
        write_atomic(target, _pieces(["HloModule m\n", "a" * 100, "b"], fail_after=2))
    assert (target.read_text() if target.exists() else None) == existing
    assert [p.name for p in tmp_path.iterdir()] == ([] if existing is None else ["out.hlo"])


def test_pieces_go_through_a_fifo_as_they_come(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "_ENCODE_PIECE", 1000)
    fifo = tmp_path / "out.hlo"
    os.mkfifo(fifo)
    texts = [f"{index:05d}" * 300 for index in range(200)]  # far more than a pipe holds
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, iter(texts))
    reader.join()
    assert received == ["".join(texts).encode()]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_pieces_go_through_an_open_descriptor(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("kept\n")
    script = (
        "from hloopt.support.fileio import write_atomic; write_atomic('/dev/stdout', iter(['a' * 3000000, 'b\\n']))"
    )
    with log.open("ab") as out:
        subprocess.run([sys.executable, "-c", script], stdout=out, check=True)
    assert log.read_text() == "kept\n" + "a" * 3_000_000 + "b\n"


def test_a_long_text_is_encoded_a_piece_at_a_time() -> None:
    text = "é" * (3 * fileio._ENCODE_PIECE + 5)
    chunks = list(fileio.encoded(text))
    assert b"".join(chunks) == text.encode() and len(chunks) == 4
    assert max(len(chunk) for chunk in chunks) == 2 * fileio._ENCODE_PIECE
    assert list(fileio.encoded(b"raw")) == [b"raw"]
