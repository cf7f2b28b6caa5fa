"""Read an engine's log for the reason it stopped: the last exception or argparse error.

Only the end of the log is read (`TAIL_BYTES`), each line is clipped, and credentials are
redacted (`orchestrator.redaction`): the log is shown on the terminal and in CI output, and an
engine may echo its own argv, environment or a server's error body.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Final

from orchestrator.redaction import redact

TAIL_LINES: Final = 25
#: Bytes read from the end of the log: enough for the last few hundred lines.
TAIL_BYTES: Final = 256 * 1024
#: Longest log line shown; the rest is cut (a progress bar or a dumped tensor can be one line).
MAX_LINE_CHARS: Final = 1000
# "ValueError: ...", "pydantic_core._pydantic_core.ValidationError: 1 validation error ...",
# argparse's "vllm serve: error: unrecognized arguments: ...".
_EXCEPTION: Final = re.compile(r"\b([A-Za-z_][\w.]*(?:Error|Exception)): (.+)")
_ARGPARSE: Final = re.compile(r"^\S.*: error: (.+)$")
# Log-line prefixes to strip: "(APIServer pid=1) ERROR 11-29 09:46:52 [file.py:12] ".
_PREFIX: Final = re.compile(r"^(\(\w+ pid=\d+\)\s*)?([A-Z]+ \d\d-\d\d [\d:.]+ \[[^\]]*\]\s*)?")


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of a log file, clipped and redacted (empty if it does not exist
    or is not a regular file)."""
    text = _read_end(path)
    found = text.splitlines()[-lines:] if text else []
    return [redact(_clip(line)) for line in found]


def refusal(path: Path) -> str | None:
    """The engine's own reason for stopping: its last exception (with the pydantic detail lines
    that follow it) or argparse error; None when the log names none. Redacted like `tail`."""
    lines = [_PREFIX.sub("", line) for line in tail(path, 400)]
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if _ARGPARSE.match(line):
            return line.strip()
        match = _EXCEPTION.search(line)
        if match:
            detail = [
                text.strip()
                for text in lines[index + 1 : index + 4]
                if text.startswith(" ") and "errors.pydantic.dev" not in text
            ]
            return " ".join([f"{match.group(1)}: {match.group(2)}", *detail]).strip()
    return None


def _read_end(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        start = max(0, info.st_size - TAIL_BYTES)
        os.lseek(fd, start, os.SEEK_SET)
        data = os.read(fd, TAIL_BYTES)
    except OSError:
        return ""
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    return text.split("\n", 1)[1] if start > 0 and "\n" in text else text


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " ... (line cut)"
