"""Command lines printed for a user to paste into a shell (`render`, `run`): each word quoted so
the shell reads back exactly the argv specdeploy runs. POSIX single quotes (`shlex.quote`) for
printable words; a word holding a control character (a newline, ESC, ...) is written in bash's
ANSI-C quoting (`$'...'`, also zsh and ksh) so that nothing it holds reaches the terminal raw.
"""

from __future__ import annotations

import shlex
import unicodedata
from collections.abc import Iterable, Mapping

_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'"}


def shell_line(argv: Iterable[str], env: Mapping[str, str] | None = None) -> str:
    """`KEY=value ... argv` as one line a shell runs as given (env values as they will be set)."""
    words = [f"{key}={shell_word(value)}" for key, value in sorted((env or {}).items())]
    return " ".join([*words, *(shell_word(word) for word in argv)])


def shell_word(word: str) -> str:
    if not any(_unprintable(char) for char in word):
        return shlex.quote(word)
    return "$'" + "".join(_ansi_c(char) for char in word) + "'"


def _unprintable(char: str) -> bool:
    return unicodedata.category(char)[0] in ("C", "Z") and char != " "


def _ansi_c(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if not _unprintable(char):
        return char
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    )
