"""Load a profile file into a `Profile`: safe YAML only, duplicate keys refused, and every error
names the file, line, column and the field path as written in the YAML."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.datafiles import SAFE_LOADER
from orchestrator.errors import ProfileError
from orchestrator.profile.schema import FIELD_ERROR, Profile

Loc = tuple[str | int, ...]
_SAFE_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})


@dataclass(frozen=True)
class ProfileIssue:
    """One problem in a profile file, pinned to a place in it."""

    path: str  # dotted field path as written in the YAML, e.g. "proposer.num_speculative_token"
    line: int | None
    column: int | None
    message: str

    def where(self, file: str) -> str:
        if self.line is None:
            return file
        return f"{file}:{self.line}:{self.column}"


class ProfileInvalid(ProfileError):
    """A profile failed to load; carries every issue found."""

    def __init__(self, file: str, issues: list[ProfileIssue]) -> None:
        self.file = file
        self.issues = issues
        first = issues[0]
        what = "\n".join(f"{i.where(file)}: {i.path or '(top)'}: {i.message}" for i in issues)
        super().__init__(
            what,
            why="specdeploy renders nothing from a profile it cannot read exactly",
            fix=_fix_for(first),
        )


def load_profile(path: Path) -> Profile:
    """Read and validate one profile file."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(
            f"{file}: cannot read the profile ({exc})",
            fix="pass the path of a readable UTF-8 YAML file",
        ) from None
    return parse_profile(text, file)


def parse_profile(text: str, file: str = "<profile>") -> Profile:
    """Validate profile text; `file` only labels messages."""
    data, marks = _load_yaml(text, file)
    if not isinstance(data, dict):
        raise ProfileInvalid(
            file,
            [ProfileIssue("", 1, 1, "the profile must be a YAML mapping (apiVersion, kind, ...)")],
        )
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileInvalid(file, _issues(exc, marks)) from None


# --- YAML with positions and duplicate-key detection ------------------------------------------


def _load_yaml(text: str, file: str) -> tuple[Any, dict[Loc, tuple[int, int]]]:
    try:
        node = yaml.compose(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise _syntax_error(file, exc) from None
    if node is None:
        raise ProfileInvalid(file, [ProfileIssue("", 1, 1, "the profile is empty")])
    marks: dict[Loc, tuple[int, int]] = {}
    duplicates: list[ProfileIssue] = []
    try:
        data = _construct(node, (), marks, duplicates, yaml.constructor.SafeConstructor())
    except yaml.YAMLError as exc:
        raise _syntax_error(file, exc) from None
    if duplicates:
        raise ProfileInvalid(file, duplicates)
    return data, marks


def _syntax_error(file: str, exc: yaml.YAMLError) -> ProfileInvalid:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
    problem = getattr(exc, "problem", None) or str(exc)
    return ProfileInvalid(file, [ProfileIssue("", line, col, f"YAML syntax: {problem}")])


def _construct(
    node: yaml.Node,
    loc: Loc,
    marks: dict[Loc, tuple[int, int]],
    dups: list[ProfileIssue],
    leaves: yaml.constructor.SafeConstructor,
) -> Any:
    marks[loc] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _SAFE_TAGS:
        raise yaml.constructor.ConstructorError(
            None, None, f"tag {node.tag!r} is not allowed (safe YAML only)", node.start_mark
        )
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        first_seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = leaves.construct_object(key_node, deep=True)
            child = (*loc, key)
            if key in first_seen:
                line = key_node.start_mark.line + 1
                dups.append(
                    ProfileIssue(
                        _dotted(child),
                        line,
                        key_node.start_mark.column + 1,
                        f"duplicate key (first set on line {first_seen[key]}); YAML would "
                        "silently keep only the last value",
                    )
                )
                continue
            first_seen[key] = key_node.start_mark.line + 1
            marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = _construct(value_node, child, marks, dups, leaves)
            marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [
            _construct(item, (*loc, i), marks, dups, leaves) for i, item in enumerate(node.value)
        ]
    return leaves.construct_object(node, deep=True)  # PyYAML's safe rules: ints, floats, bools, ...


# --- pydantic errors -> issues ------------------------------------------------------------------


def _issues(exc: ValidationError, marks: dict[Loc, tuple[int, int]]) -> list[ProfileIssue]:
    issues = []
    for err in exc.errors():
        loc = _yaml_loc(tuple(err["loc"]))
        if err["type"] == FIELD_ERROR:  # a cross-field check names the field it is about
            loc = (*loc, *str(err["ctx"]["field"]).split("."))
        line, col = _nearest_mark(loc, marks)
        issues.append(ProfileIssue(_dotted(loc), line, col, _message(err, loc)))
    return issues


def _yaml_loc(loc: Loc) -> Loc:
    # pydantic appends validator names / union tags we never show; keep field names and indices.
    return tuple(
        p for p in loc if not (isinstance(p, str) and p.startswith(("function-", "tagged-")))
    )


def _nearest_mark(loc: Loc, marks: dict[Loc, tuple[int, int]]) -> tuple[int | None, int | None]:
    for end in range(len(loc), -1, -1):
        if loc[:end] in marks:
            return marks[loc[:end]]
    return None, None


def _message(err: Any, loc: Loc) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return _unknown_field_message(loc)
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        suggestion = _did_you_mean(str(err.get("input")), _literal_choices(expected))
        return f"{err['input']!r} is not one of {expected}{suggestion}"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind not in ("value_error", "assertion_error", FIELD_ERROR) and "input" in err:
        msg = f"{msg} (got {err['input']!r})"
    return msg


def _unknown_field_message(loc: Loc) -> str:
    name = str(loc[-1])
    known = _known_fields(loc[:-1])
    return f"unknown field{_did_you_mean(name, known)}" + (
        f" (known fields: {', '.join(sorted(known))})" if known and not _close(name, known) else ""
    )


def _known_fields(parent: Loc) -> list[str]:
    model: type[BaseModel] | None = Profile
    for part in parent:
        if model is None or isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        model = _model_of(field.annotation)
    return list(model.model_fields) if model is not None else []


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _literal_choices(expected: str) -> list[str]:
    return [c.strip().strip("'\"") for c in expected.replace(" or ", ",").split(",") if c.strip()]


def _close(name: str, choices: list[str]) -> list[str]:
    import difflib  # only a mistyped profile needs it

    return difflib.get_close_matches(name, choices, n=1, cutoff=0.6)


def _did_you_mean(name: str, choices: list[str]) -> str:
    match = _close(name, choices)
    return f"; did you mean {match[0]!r}?" if match else ""


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fix_for(issue: ProfileIssue) -> str:
    if "did you mean" in issue.message:
        suggestion = issue.message.split("did you mean ", 1)[1].rstrip("?").strip("'")
        if issue.message.startswith("unknown field"):
            return f"rename `{issue.path.rsplit('.', 1)[-1]}` to `{suggestion}`"
        return f"set `{issue.path}: {suggestion}`"
    if issue.message.startswith("duplicate key"):
        return f"keep one `{issue.path.rsplit('.', 1)[-1]}` entry and delete the other"
    if issue.message == "required field is missing":
        return f"add `{issue.path}` to the profile (`specdeploy schema` shows every field)"
    return (
        f"edit `{issue.path or 'the profile'}` as described (`specdeploy schema` shows every field)"
    )
