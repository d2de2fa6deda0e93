"""Reading inputs and writing outputs safely: clear errors, atomic writes."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from hloopt.errors import HloError, parse_error_at


def read_text(path: str) -> str:
    """Read a UTF-8 text file (or stdin for ``-``); bad bytes are a located error."""
    if path == "-":
        data = sys.stdin.buffer.read()
        name = "<stdin>"
    else:
        file = Path(path)
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            raise HloError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise HloError(f"{path}: is a directory, expected a file") from None
        except PermissionError:
            raise HloError(f"{path}: permission denied") from None
        except OSError as err:
            raise HloError(f"{path}: cannot read: {err.strerror}") from None
        name = path
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        prefix = data[: err.start].decode("utf-8", errors="replace")
        text = prefix + data[err.start :].decode("utf-8", errors="replace")
        raise parse_error_at(text, len(prefix), name, "invalid UTF-8 in input") from None


#: The temporary files of this process's writes still under way (see `discard_partial_writes`).
_writing: set[str] = set()


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part."""
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except FileNotFoundError:
        raise HloError(f"{target}: directory {directory} does not exist") from None
    except PermissionError:
        raise HloError(f"{target}: permission denied") from None
    _writing.add(temp)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(temp, target.stat().st_mode & 0o7777)
        else:
            os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, target)
    except BaseException as err:
        Path(temp).unlink(missing_ok=True)
        if isinstance(err, IsADirectoryError):
            raise HloError(f"{target}: is a directory") from None
        if isinstance(err, PermissionError):
            raise HloError(f"{target}: permission denied") from None
        raise
    finally:
        _writing.discard(temp)


def discard_partial_writes() -> None:
    """Remove the temporary files of writes still under way: for a process that is being killed.

    A batch worker that is terminated mid-write (the pool ends every worker when one
    dies) runs no `finally`; its SIGTERM handler calls this so no temporary file is left.
    """
    for temp in list(_writing):
        Path(temp).unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
