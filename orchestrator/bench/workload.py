"""Workloads: what the bench sends, identically to both arms.

A workload is a JSONL file (one object per line: `prompt` or `messages`, optional `max_tokens`,
optional `prediction`) or a built-in synthetic set. The built-in sets differ in how predictable
the output is, which is what decides whether speculation pays: `code-edit` asks for a copy of a
given function with one small change (the output mostly repeats the input, so drafts are easy to
accept), `chat` asks open questions (little to copy). Built-in sets are deterministic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from orchestrator.bench.safe import BadJson, decode_json, printable
from orchestrator.errors import OrchestratorError


class WorkloadError(OrchestratorError):
    """The --workload file or name cannot be used (a usage error, like click's)."""

    exit_code = 2


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str
    content: str


@dataclass(frozen=True)
class WorkItem:
    """One request's content. `prompt` serves /v1/completions, `messages` /v1/chat/completions;
    whichever is missing is derived from the other."""

    prompt: str
    messages: tuple[Message, ...]
    max_tokens: int | None = None
    prediction: str | None = None
    """Expected output, passed through as OpenAI Predicted Outputs (`prediction`)."""


@dataclass(frozen=True)
class Workload:
    """A named, ordered set of work items; the sweep cycles through them."""

    name: str
    items: tuple[WorkItem, ...]
    description: str


BUILTIN_NAMES: Final = ("code-edit", "chat")
_BUILTIN_SIZE: Final = 64
_SEED: Final = 20230518  # fixed so both arms and every run see the same prompts
MAX_WORKLOAD_BYTES: Final = 256 << 20
MAX_ITEM_TOKENS: Final = (1 << 31) - 1


def load_workload(spec: str) -> Workload:
    """A built-in set by name, or a JSONL file by path."""
    if spec in BUILTIN_NAMES:
        return _code_edit() if spec == "code-edit" else _chat()
    path = Path(spec)
    if not path.is_file():
        raise WorkloadError(
            f"--workload {spec!r}: neither a built-in workload nor a file",
            why="the bench needs prompts to send to both endpoints",
            fix=f"pass one of {', '.join(BUILTIN_NAMES)} or the path of a JSONL file",
        )
    return _load_jsonl(path)


def _load_jsonl(path: Path) -> Workload:
    items: list[WorkItem] = []
    for number, line in enumerate(_read(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = decode_json(line)
        except BadJson as exc:
            raise _line_error(path, number, f"not JSON ({exc})") from None
        items.append(_item_from_json(raw, path, number))
    if not items:
        raise WorkloadError(
            f"--workload {path}: the file holds no items",
            why="the bench has nothing to send",
            fix='add one JSON object per line, e.g. {"prompt": "...", "max_tokens": 128}',
        )
    return Workload(path.stem, tuple(items), f"{len(items)} items from {path}")


def _read(path: Path) -> bytes:
    size = path.stat().st_size
    if size > MAX_WORKLOAD_BYTES:
        raise WorkloadError(
            f"--workload {path}: {size} bytes, over the {MAX_WORKLOAD_BYTES} accepted",
            why="the whole workload is held in memory and cycled through at every level",
            fix="keep a representative sample of the requests (a few thousand lines)",
        )
    with path.open("rb") as handle:
        return handle.read(MAX_WORKLOAD_BYTES + 1)


def _item_from_json(raw: object, path: Path, number: int) -> WorkItem:
    if not isinstance(raw, dict):
        raise _line_error(path, number, "not a JSON object")
    unknown = set(raw) - {"prompt", "messages", "max_tokens", "prediction"}
    if unknown:
        raise _line_error(path, number, f"unknown keys {sorted(unknown)}")
    prompt, messages = raw.get("prompt"), raw.get("messages")
    max_tokens, prediction = raw.get("max_tokens"), raw.get("prediction")
    if max_tokens is not None and (
        type(max_tokens) is not int or not 1 <= max_tokens <= MAX_ITEM_TOKENS
    ):
        shown = printable(repr(max_tokens), 40)
        raise _line_error(path, number, f"max_tokens={shown} is not a positive integer")
    if prediction is not None and not isinstance(prediction, str):
        raise _line_error(path, number, "prediction must be a string")
    if isinstance(prompt, str) and prompt:
        return WorkItem(prompt, (Message("user", prompt),), max_tokens, prediction)
    if isinstance(messages, list) and messages:
        parsed = tuple(_message(m, path, number) for m in messages)
        return WorkItem(_flatten(parsed), parsed, max_tokens, prediction)
    raise _line_error(path, number, "needs a non-empty 'prompt' string or 'messages' list")


def _message(raw: object, path: Path, number: int) -> Message:
    if isinstance(raw, dict) and isinstance(raw.get("role"), str):
        content = raw.get("content")
        if isinstance(content, str):
            return Message(raw["role"], content)
    raise _line_error(path, number, "each message needs string 'role' and 'content'")


def _flatten(messages: tuple[Message, ...]) -> str:
    return "\n\n".join(m.content for m in messages)


def _line_error(path: Path, number: int, problem: str) -> WorkloadError:
    return WorkloadError(
        f"--workload {path}:{number}: {problem}",
        why="every line must be one request for both endpoints",
        fix='write one object per line: {"prompt": str} or {"messages": [{"role", "content"}]}, '
        'optional "max_tokens": int and "prediction": str',
    )


_FUNCTIONS: Final = (
    (
        "parse_port",
        "text",
        "port = int(text)\n    if not 0 < port < 65536:\n"
        "        raise ValueError(text)\n    return port",
    ),
    (
        "mean",
        "values",
        "total = 0.0\n    for value in values:\n        total += value\n"
        "    return total / len(values)",
    ),
    (
        "slugify",
        "title",
        "words = title.lower().split()\n    return '-'.join(w for w in words if w)",
    ),
    ("clamp", "x", "if x < 0:\n        return 0\n    if x > 1:\n        return 1\n    return x"),
    (
        "chunks",
        "items",
        "out = []\n    for i in range(0, len(items), 8):\n"
        "        out.append(items[i:i + 8])\n    return out",
    ),
    (
        "count_words",
        "text",
        "counts = {}\n    for word in text.split():\n"
        "        counts[word] = counts.get(word, 0) + 1\n    return counts",
    ),
)
_EDITS: Final = (
    "rename the parameter {arg} to value",
    "add a docstring that says what it returns",
    "add type hints",
    "rename the function to {name}_v2",
)


def _code_edit() -> Workload:
    rng = random.Random(_SEED)
    items = []
    for _ in range(_BUILTIN_SIZE):
        name, arg, body = rng.choice(_FUNCTIONS)
        source = f"def {name}({arg}):\n    {body}\n"
        edit = rng.choice(_EDITS).format(arg=arg, name=name)
        prompt = (
            f"Rewrite this Python function and {edit}. Reply with the whole function and nothing "
            f"else.\n\n{source}"
        )
        items.append(WorkItem(prompt, (Message("user", prompt),), None, source))
    return Workload("code-edit", tuple(items), "code editing: output mostly copies the input")


_TOPICS: Final = (
    "the history of lighthouses",
    "how bees choose a new home",
    "why the sky is blue at noon",
    "a weekend plan in a rainy city",
    "the rules of a card game you invent",
    "advice for a first marathon",
    "what makes a good bread crust",
    "a short story about a robot",
    "the pros and cons of remote work",
    "how tides work",
    "a recipe using only five ingredients",
    "a letter to your future self",
)
_ASKS: Final = ("Tell me about {t}.", "Write a few paragraphs on {t}.", "Explain {t} to a child.")


def _chat() -> Workload:
    rng = random.Random(_SEED + 1)
    items = []
    for _ in range(_BUILTIN_SIZE):
        prompt = rng.choice(_ASKS).format(t=rng.choice(_TOPICS))
        items.append(WorkItem(prompt, (Message("user", prompt),)))
    return Workload("chat", tuple(items), "open chat: little of the output is predictable")
