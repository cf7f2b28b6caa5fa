"""Hub ids a user-catalog entry may be recorded under: the rules the Hugging Face hub applies.

The rules are those of huggingface_hub's `validate_repo_id` (src/huggingface_hub/utils/
_validators.py, `REPO_ID_REGEX` and the checks after it; read at huggingface_hub 2.4.0,
https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/utils/_validators.py):
each part of at most 96 characters from [A-Za-z0-9._-], not starting or ending with `-` or `.`,
no `--` or `..` anywhere, and not ending in `.git`. The catalog also needs the namespace (an
entry is looked up as ORG/NAME), which the hub leaves optional.
"""

from __future__ import annotations

import string
from typing import Final

#: Longest namespace or name the hub accepts (huggingface_hub `REPO_ID_REGEX`: `{1,96}`).
MAX_PART: Final = 96
_ALLOWED: Final = frozenset(string.ascii_letters + string.digits + "._-")


def hub_id_problem(name: str) -> str | None:
    """Why `name` is not a hub id of the form ORG/NAME, or None when it is one."""
    parts = name.split("/")
    if len(parts) != 2:
        return "a hub id has exactly one `/`, between its namespace and its name (ORG/NAME)"
    for label, part in zip(("namespace", "name"), parts, strict=True):
        problem = _part_problem(part)
        if problem is not None:
            return f"its {label} {_shown(part)} {problem}"
    if "--" in name or ".." in name:
        return "the hub forbids `--` and `..` in an id"
    if name.endswith(".git"):
        return "the hub forbids an id ending in `.git`"
    return None


def _part_problem(part: str) -> str | None:
    if not part:
        return "is empty"
    if len(part) > MAX_PART:
        return f"has {len(part)} characters; the hub allows at most {MAX_PART}"
    bad = sorted(set(part) - _ALLOWED)
    if bad:
        return f"holds {', '.join(repr(c) for c in bad[:5])}; the hub allows only A-Z a-z 0-9 . _ -"
    if part[0] in "-." or part[-1] in "-.":
        return "starts or ends with `-` or `.`, which the hub forbids"
    return None


def _shown(part: str) -> str:
    return repr(part) if len(part) <= 40 else f"{part[:20]!r}... ({len(part)} characters)"
