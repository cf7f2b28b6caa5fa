"""Read an engine's log for the reason it stopped: the last exception or argparse error."""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path
from typing import Final

TAIL_LINES: Final = 25
# "ValueError: ...", "pydantic_core._pydantic_core.ValidationError: 1 validation error ...",
# argparse's "vllm serve: error: unrecognized arguments: ...".
_EXCEPTION: Final = re.compile(r"\b([A-Za-z_][\w.]*(?:Error|Exception)): (.+)")
_ARGPARSE: Final = re.compile(r"^\S.*: error: (.+)$")
# Log-line prefixes to strip: "(APIServer pid=1) ERROR 11-29 09:46:52 [file.py:12] ".
_PREFIX: Final = re.compile(r"^(\(\w+ pid=\d+\)\s*)?([A-Z]+ \d\d-\d\d [\d:.]+ \[[^\]]*\]\s*)?")


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of a log file (empty if it does not exist)."""
    if not path.exists():
        return []
    with path.open(errors="replace") as handle:
        return [line.rstrip("\n") for line in deque(handle, maxlen=lines)]


def refusal(path: Path) -> str | None:
    """The engine's own reason for stopping: its last exception (with the pydantic detail lines
    that follow it) or argparse error; None when the log names none."""
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
