"""Reading files specdeploy does not control (profiles, checkpoint metadata) without hanging or
running out of memory: regular files only, never more than a stated number of bytes, and JSON
whose every failure (syntax, bad UTF-8, nesting, oversized integers) is one exception type.

A FIFO would block `open()` and `read()` forever and `/dev/zero` never ends, so the file is opened
non-blocking and checked with `fstat` on the open descriptor (no window between a check and the
open), and at most `max_bytes + 1` bytes are read.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

_KIND = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class UnreadableFile(Exception):
    """A file exists but cannot be used: not a regular file, too large, unreadable or malformed.
    `problem` says which, in words a user can act on."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def read_regular_file(path: Path, max_bytes: int, *, whole: bool = True) -> bytes | None:
    """The bytes of `path`, or None when nothing exists there. Raises `UnreadableFile` when it
    is not a regular file, holds more than `max_bytes`, or the OS refuses to read it. With
    `whole=False`, the first `max_bytes` bytes of a longer file (a header)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableFile(path, f"cannot be opened ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KIND.get(stat.S_IFMT(mode), "not a regular file")
            raise UnreadableFile(path, f"is {kind}, not a regular file")
        data = _read_at_most(fd, max_bytes + 1)
    except OSError as exc:
        raise UnreadableFile(path, f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        if not whole:
            return data[:max_bytes]
        raise UnreadableFile(path, f"is larger than {_size(max_bytes)}, the most specdeploy reads")
    return data


def parse_json(raw: bytes) -> Any:
    """JSON from bytes; every way it can fail is a ValueError with a short reason."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ValueError("is not usable JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer over Python's 4300-digit conversion limit
        raise ValueError(f"is not usable JSON ({_first_clause(str(exc))})") from None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _size(n: int) -> str:
    return f"{n // (1 << 20)} MiB" if n >= 1 << 20 else f"{n} bytes"


def _first_clause(text: str) -> str:
    return text.split(";", 1)[0].split(":", 1)[0].strip()
