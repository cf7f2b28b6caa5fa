"""Reading the small metadata files of a checkpoint directory, which specdeploy does not control
(a hub repository, a shared cache): bounded in size, and every value checked for its type before
any fact is derived from it. A file that is present but unusable raises `UnreadableMetadata`
naming the file and, when one value is at fault, its key; it is never silently "missing".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from orchestrator.untrusted_files import UnreadableFile, parse_json, read_regular_file

#: Largest metadata JSON file read. The largest real one known is Gemma 3's tokenizer.json,
#: 33.4 MB (Hugging Face google/gemma-3-27b-it; not verified upstream at a pinned commit, as the
#: hub is not reachable from here); a config.json is a few KB.
MAX_JSON_BYTES: Final = 64 << 20
#: Largest count (sizes, layers, heads, positions, bytes) taken from metadata: 2^53 is exact as a
#: float, so the memory formulas stay finite. A 1 T-parameter checkpoint has about 2^41 bytes.
MAX_COUNT: Final = 2**53


class UnreadableMetadata(Exception):
    """A checkpoint metadata file is present but cannot be used."""

    def __init__(self, file: Path, problem: str, key: str = "") -> None:
        self.file = file
        self.problem = problem
        self.key = key
        super().__init__(self.describe())

    def describe(self) -> str:
        """ "<file>: `key` <problem>", or "<file>: <problem>" when no single key is at fault."""
        where = f"{self.file}: `{self.key}`" if self.key else f"{self.file}:"
        return f"{where} {self.problem}"


class BadValue(ValueError):
    """One value in a metadata object has the wrong type or range; `key` is its dotted path."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key} {problem}")
        self.key = key
        self.problem = problem

    def in_file(self, file: Path) -> UnreadableMetadata:
        return UnreadableMetadata(file, self.problem, self.key)


def read_json_object(path: Path, max_bytes: int = MAX_JSON_BYTES) -> dict[str, Any] | None:
    """A JSON file's top-level object; None when the file does not exist. Raises
    `UnreadableMetadata` when it exists but is not a regular file of at most `max_bytes` holding
    a JSON object."""
    try:
        raw = read_regular_file(path, max_bytes)
    except UnreadableFile as exc:
        raise UnreadableMetadata(path, exc.problem) from None
    if raw is None:
        return None
    try:
        data = parse_json(raw)
    except ValueError as exc:
        raise UnreadableMetadata(path, str(exc)) from None
    if not isinstance(data, dict):
        raise UnreadableMetadata(path, f"holds {describe(data)}, not a JSON object")
    return data


def count(value: Any, key: str) -> int | None:
    """A non-negative whole number (4096 or 4096.0) of at most MAX_COUNT; None when absent."""
    if value is None:
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadValue(key, f"is {describe(value)}, not a whole number")
    if not 0 <= value <= MAX_COUNT:
        raise BadValue(key, f"is {describe(value)}, outside 0..2^53")
    return value


def number(value: Any, key: str) -> float | None:
    """A finite, non-negative number; None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadValue(key, f"is {describe(value)}, not a number")
    if not (math.isfinite(value) and 0 <= value <= MAX_COUNT):
        raise BadValue(key, f"is {describe(value)}, not a finite non-negative number")
    return float(value)


def text(value: Any, key: str) -> str | None:
    """A string (None when absent or empty)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadValue(key, f"is {describe(value)}, not a string")
    return value or None


def flag(value: Any, key: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise BadValue(key, f"is {describe(value)}, not true or false")


def strings(value: Any, key: str) -> tuple[str, ...]:
    """A list of strings (empty when absent)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadValue(key, f"is {describe(value)}, not a list of strings")
    return tuple(value)


def mapping(value: Any, key: str) -> Mapping[str, Any]:
    """A JSON object (empty when absent)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadValue(key, f"is {describe(value)}, not an object")
    return value


def describe(value: Any) -> str:
    """A short description of a JSON value for a message, whatever its size."""
    if isinstance(value, bool) or value is None:
        return "true" if value is True else "false" if value is False else "null"
    if isinstance(value, int):
        return (
            str(value) if value.bit_length() <= 64 else f"an integer of {value.bit_length()} bits"
        )
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return {math.inf: "Infinity", -math.inf: "-Infinity"}.get(value, repr(value))
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"a string of {len(value)} characters"
    return "a list" if isinstance(value, list) else "an object"
