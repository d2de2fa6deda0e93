"""Reading inputs and writing outputs safely: clear errors; atomic writes that write through a device or FIFO and keep a symlink."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import stat
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from hloopt.errors import HloError, parse_error_at


def source_name(path: str) -> str:
    """What messages call the input `path`: ``<stdin>`` for ``-``, which no one would take for a file's name."""
    return "<stdin>" if path == "-" else path


def read_text(path: str) -> str:
    """Read a UTF-8 text file (or stdin for ``-``); bad bytes are a located error."""
    return decode_text(read_bytes(path), source_name(path))


def read_bytes(path: str) -> bytes:
    """A file's bytes (stdin's for ``-``); a file that cannot be read is an HloError saying why."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise HloError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise HloError(f"{path}: is a directory, expected a file") from None
    except PermissionError:
        raise HloError(f"{path}: permission denied") from None
    except OSError as err:
        raise HloError(f"{path}: cannot read: {err.strerror}") from None


def decode_text(data: bytes, name: str) -> str:
    """`data` as UTF-8; bad bytes are an error located in `name`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        prefix = data[: err.start].decode("utf-8", errors="replace")
        text = prefix + data[err.start :].decode("utf-8", errors="replace")
        if err.end == len(data) and err.reason == "unexpected end of data":  # a file cut inside a character
            raise parse_error_at(text, len(prefix), name, "unexpected end of input inside a UTF-8 character") from None
        raise parse_error_at(text, len(prefix), name, "invalid UTF-8 in input") from None


def check_output(path: str | os.PathLike[str], *, directory: bool = False, create: bool = False) -> None:
    """Refuse, before anything is written, an output file (or `directory`) that could not be written.

    `create`: missing directories on the way will be made (a batch's mirrored tree,
    a dump directory), so only the nearest existing one must be writable. A device or
    FIFO is a valid output (it is written through), and so is a symlink: its target is.
    """
    target = Path(path)
    problem = _problem(target, directory, create)
    if problem is not None:
        raise HloError(f"{target}: {problem}")


def make_directories(path: str | os.PathLike[str]) -> None:
    """``mkdir -p`` whose failure is an `HloError` saying what is in the way."""
    target = Path(path)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_error(target, err, directory=True) from None


def write_error(path: str | os.PathLike[str], err: OSError, *, directory: bool = False) -> HloError:
    """`err`, raised writing `path` (a file, or a `directory` being made), in words: what is really in the way."""
    target = Path(path)
    problem = _problem(target, directory, create=directory)
    if problem is None:  # the disk shows nothing in the way (a race, or access() allowed what the write did not)
        if isinstance(err, PermissionError) or err.errno == errno.EROFS:
            problem = f"cannot write in directory {_parent(target)}: {_denied(_parent(target), err)}"
        elif isinstance(err, IsADirectoryError):
            problem = "is a directory"
        else:
            problem = f"cannot write: {_reason(err)}"
    return HloError(f"{target}: {problem}")


def _problem(target: Path, directory: bool, create: bool) -> str | None:
    """What on disk stops writing `target`, or None; never "does not exist" for what exists but is locked."""
    mode = _mode(target)
    if isinstance(mode, str):
        return mode
    if mode is not None:
        if directory and not stat.S_ISDIR(mode):
            return "is a file, expected a directory"
        if not directory and stat.S_ISDIR(mode):
            return "is a directory"
        if directory:
            return (
                None if os.access(target, os.W_OK | os.X_OK) else f"cannot write in this directory: {_denied(target)}"
            )
        if not stat.S_ISREG(mode):  # written through, in place: its directory plays no part
            return None if os.access(target, os.W_OK) else _denied(target)
    if not directory:
        target = _final(target)  # a symlink's target is what is replaced, beside itself
    parent = _parent(target)
    for ancestor in (parent, *parent.parents):
        mode = _mode(ancestor)
        if isinstance(mode, str):
            return mode
        if mode is None:
            continue
        if not stat.S_ISDIR(mode):
            return f"{ancestor} is a file, not a directory"
        if ancestor != parent and not create:
            return f"directory {parent} does not exist"
        if not os.access(ancestor, os.W_OK | os.X_OK):
            return f"cannot write in directory {ancestor}: {_denied(ancestor)}"
        return None
    return None


def _mode(path: Path) -> int | str | None:
    """`path`'s st_mode; None when it is absent (or below a file); a message when it cannot be looked at."""
    try:
        return path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        return f"cannot reach {path}: permission denied"
    except OSError as err:
        return f"cannot reach {path}: {_reason(err)}"


def _denied(path: Path, err: OSError | None = None) -> str:
    """Why `path` cannot be written: a read-only mount says so (access() only says no, as for a
    permission), since a user fixes the two differently."""
    if err is not None and err.errno == errno.EROFS:
        return "read-only file system"
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return "read-only file system" if read_only else "permission denied"


def _reason(err: OSError) -> str:
    """The system's reason, as the middle of a sentence (``no space left on device``)."""
    reason = err.strerror or str(err)
    return reason[:1].lower() + reason[1:]


def _parent(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def _final(target: Path) -> Path:
    """The file a write to `target` replaces: `target`, or the end of its chain of symlinks (which
    need not exist: a dangling link's target is created), so that the links stay links."""
    return Path(os.path.realpath(target)) if os.path.islink(target) else target


#: The temporary files of this process's writes still under way (see `discard_partial_writes`).
_writing: set[str] = set()
#: Held from recording a temporary file's name to creating it, and by `discard_partial_writes`, so that a
#: file is never created after the discard (run on another thread, it could fall between the two). Reentrant:
#: a SIGTERM handler may run the discard on the very thread it interrupted between the two.
_creating = threading.RLock()


def _create_temporary(target: Path, mode: int) -> tuple[int, str]:
    """A new temporary file beside `target`, as `tempfile.mkstemp` makes one (O_EXCL), with `mode`.

    Its name is recorded in `_writing` *before* the file exists, so a worker killed at any
    point between the two leaves nothing behind (mkstemp's name is known only once it exists).
    """
    while True:
        temp = str(_parent(target) / f".{target.name}.{secrets.token_hex(4)}.tmp")
        with _creating:
            _writing.add(temp)
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            except FileExistsError:
                _writing.discard(temp)
            except BaseException:
                _writing.discard(temp)
                raise
            # Held until the file is renamed or removed: `remove_stale_temporaries` leaves a locked file alone.
            fcntl.flock(fd, fcntl.LOCK_EX)
            return fd, temp


#: How many characters of a text are encoded and written at a time: a text of a gigabyte is never
#: held twice (as `str` and as its UTF-8 bytes).
_ENCODE_PIECE = 1 << 20


def encoded(data: str | bytes | Iterable[str]) -> Iterator[bytes]:
    """`data` as UTF-8 bytes, a piece of at most `_ENCODE_PIECE` characters at a time."""
    if isinstance(data, bytes):
        yield data
        return
    for text in [data] if isinstance(data, str) else data:
        if len(text) <= _ENCODE_PIECE:
            yield text.encode("utf-8")
            continue
        for start in range(0, len(text), _ENCODE_PIECE):
            yield text[start : start + _ENCODE_PIECE].encode("utf-8")


def write_atomic(path: str | os.PathLike[str], data: str | bytes | Iterable[str]) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part.

    `data` may come in pieces (a printer's, `print_module_pieces`): each is encoded and written as it
    comes, into the temporary file that is renamed once the last is in, so a failure while they are
    made (an exception from the iterator) leaves the old file. What is not a regular file
    (``/dev/null``, a FIFO, a terminal) is written through, as a shell's ``>`` would, never replaced;
    there, as through a descriptor, pieces are written as they come. A symlink stays, and the file at
    the end of its chain is replaced (or created) atomically.
    """
    target = Path(path)
    payload = encoded(data)
    descriptor = _own_descriptor(target)
    if descriptor is not None:
        _write_all(descriptor, target, payload)
        return
    existing = _mode(target)
    if isinstance(existing, str):  # a symlink loop, a directory on the way that cannot be searched
        raise HloError(f"{target}: {existing}")
    if isinstance(existing, int) and not stat.S_ISREG(existing) and not stat.S_ISDIR(existing):
        _write_through(target, payload)
        return
    final = _final(target)
    existing = _mode(final)
    try:
        # A new file is created with 0666 and the kernel applies the umask (and a default ACL):
        # no process-wide umask() call. A replacement starts private and takes the old file's mode.
        fd, temp = _create_temporary(final, 0o600 if isinstance(existing, int) else 0o666)
    except OSError as err:
        raise write_error(target, err) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            for piece in payload:
                handle.write(piece)
            if isinstance(existing, int):
                # Replacing a file: on disk before the rename, so a crash leaves the old one or the new one.
                # A new file lost in a crash costs the user nothing, and thousands of fsyncs cost a batch much.
                handle.flush()
                os.fsync(handle.fileno())
                os.chmod(temp, existing & 0o7777)
            os.replace(temp, final)  # while it is open, so its lock is held until it is in place
    except BaseException as err:
        Path(temp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise write_error(target, err) from None
        raise
    finally:
        _writing.discard(temp)


#: A descriptor's own name: /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N (where /dev/stdout and /dev/stderr lead).
_DESCRIPTOR = re.compile(r"/(?:dev|proc/(?:self|thread-self|(\d+)))/fd/(\d+)")


def _own_descriptor(target: Path) -> int | None:
    """The descriptor of this process that `target` names through its links (``-o /dev/stdout``), or None.

    Its file is already open, perhaps for appending (``>> log``): it is written through that descriptor,
    never replaced by a new file, which would lose what the shell's ``>>`` keeps.
    """
    path = os.path.abspath(target)
    for _ in range(40):  # the kernel's own limit on a chain of links
        named = _DESCRIPTOR.fullmatch(path)
        if named is not None:
            pid = named.group(1)
            return int(named.group(2)) if pid is None or int(pid) == os.getpid() else None
        try:
            link = os.readlink(path)
        except OSError:  # not a link (or not there): an ordinary path
            return None
        path = os.path.normpath(os.path.join(os.path.dirname(path), link))
    return None


def _write_all(fd: int, target: Path, payload: Iterable[bytes]) -> None:
    """Every byte of `payload` to the open descriptor `fd` (which `target` names); a short write is continued."""
    try:
        for piece in payload:
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view) :]
    except OSError as err:
        raise write_error(target, err) from None


def _write_through(target: Path, payload: Iterable[bytes]) -> None:
    """`payload` into a device, FIFO or terminal, opened as it is: no O_CREAT, no O_TRUNC, no chmod, no rename.

    Opening a FIFO waits for its reader, as ``cat > fifo`` does; a short write (a pipe) is continued.
    """
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NOCTTY)
    except OSError as err:
        raise write_error(target, err) from None
    try:
        with os.fdopen(fd, "wb") as handle:  # buffered writes loop until every byte is taken
            for piece in payload:
                handle.write(piece)
    except OSError as err:
        raise write_error(target, err) from None


def discard_partial_writes() -> None:
    """Remove the temporary files of writes still under way: for a process that is being killed.

    A batch worker that is terminated mid-write (the pool ends every worker when one
    dies) runs no `finally`; its SIGTERM handler calls this so no temporary file is left.
    It keeps the lock that creating one takes: the process exits next, and no other thread
    creates a temporary file meanwhile.
    """
    _creating.acquire()
    for temp in list(_writing):
        Path(temp).unlink(missing_ok=True)


#: The name `_create_temporary` gives a temporary file: ``.NAME.XXXXXXXX.tmp``, eight hex digits.
_TEMPORARY = re.compile(r"\..+\.[0-9a-f]{8}\.tmp")


def remove_stale_temporaries(root: str | os.PathLike[str], before: float) -> list[str]:
    """Remove, under `root`, the temporary files an hloopt writer killed outright (SIGKILL, a power cut) left.

    Only files named as `_create_temporary` names them, made before `before` (the run's start: a
    concurrent run's newer files are not looked at) and not locked: a live writer holds its file's lock
    from the moment it exists, and the kernel drops it when the writer dies. Returns what was removed.
    """
    removed: list[str] = []
    for directory, _, files in os.walk(root):
        for name in files:
            if not _TEMPORARY.fullmatch(name):
                continue
            path = os.path.join(directory, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_mtime >= before:
                    continue
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.unlink(path)
                removed.append(path)
            except OSError:  # locked by a live writer, or gone meanwhile
                continue
            finally:
                os.close(fd)
    return removed
