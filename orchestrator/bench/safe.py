"""Decoding what the bench does not control (server answers, workload files) without letting it
crash, hang or mislead: JSON with bounded nesting and strict UTF-8, and text made safe to show.
"""

from __future__ import annotations

import json
from typing import Final

MAX_JSON_DEPTH: Final = 64
"""Deepest nesting accepted: an OpenAI chunk nests 4 levels, a chat message list 3."""


class BadJson(ValueError):
    """The bytes are not one JSON document the bench accepts; the message says why."""


def decode_json(data: bytes | str) -> object:
    """Parse JSON: BadJson (never RecursionError or UnicodeDecodeError) for malformed input,
    text that is not UTF-8, numbers Python refuses, or nesting deeper than MAX_JSON_DEPTH."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadJson(f"not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(data)
    except RecursionError:
        raise BadJson(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise BadJson(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # e.g. an integer over Python's digit limit
        raise BadJson(str(exc)) from None
    # Counting brackets is cheap and over-estimates the depth, so only a document that might
    # be too deep is walked.
    if data.count("[") + data.count("{") > MAX_JSON_DEPTH and _depth(value) > MAX_JSON_DEPTH:
        raise BadJson(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _depth(value: object) -> int:
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                return depth
            stack.extend((child, depth + 1) for child in node)
    return deepest


def printable(text: str, limit: int = 300) -> str:
    """`text` cut to `limit` characters, with control, format (e.g. bidirectional overrides)
    and other non-printable characters shown as escapes, so a server's string cannot move the
    terminal's cursor, recolour it or reorder what follows."""
    if len(text) > limit:
        text = text[:limit] + "…"
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
