"""Load a profile file into a `Profile`: safe YAML only, duplicate keys refused, and every error
names the file, line, column and the field path as written in the YAML.

A profile comes from a pull request as often as from its author, so reading it is bounded: only a
regular file of at most `MAX_PROFILE_BYTES`, at most `MAX_DEPTH` levels of nesting and
`MAX_VALUES` values once aliases are expanded (an 800-byte "billion laughs" file expands to 10^9),
no alias cycles, plain scalar keys, and only the core scalar types (string, integer, float,
boolean, null). Anything else is a `profile.*` finding with its position, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.datafiles import SAFE_LOADER
from orchestrator.errors import ProfileError
from orchestrator.profile.schema import FIELD_ERROR, Profile
from orchestrator.untrusted_files import UnreadableFile, read_regular_file

Loc = tuple[str | int, ...]

#: Largest profile file read. Real profiles are 1-3 KB; the cap stops a wrong path (a log file,
#: /dev/zero) from being read into memory.
MAX_PROFILE_BYTES: Final = 1 << 20
#: Most values (scalars, lists, mappings) a profile may hold, counting every use of an alias
#: again. A full profile has about 60.
MAX_VALUES: Final = 10_000
#: Deepest nesting of lists and mappings; profiles nest three levels.
MAX_DEPTH: Final = 32
#: Longest integer literal read. Every integer field is at most 2^31 (10 digits); this also stays
#: far below Python's 4300-digit limit for converting text to int.
MAX_INT_CHARS: Final = 100

_TAG = "tag:yaml.org,2002:"
_COLLECTION_TAGS = frozenset({f"{_TAG}map", f"{_TAG}seq"})
_SCALAR_TAGS = frozenset(f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null"))
_CONSTRUCTORS = yaml.constructor.SafeConstructor.yaml_constructors


@dataclass(frozen=True)
class ProfileIssue:
    """One problem in a profile file, pinned to a place in it."""

    path: str  # dotted field path as written in the YAML, e.g. "proposer.num_speculative_token"
    line: int | None
    column: int | None
    message: str
    fix: str = ""  # the fix when the message alone does not imply it

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
        raw = read_regular_file(path, MAX_PROFILE_BYTES)
        if raw is None:
            raise UnreadableFile(path, "does not exist")
    except UnreadableFile as exc:
        fix = f"pass the path of a regular YAML file of at most {MAX_PROFILE_BYTES >> 20} MiB"
        raise ProfileInvalid(
            file, [ProfileIssue("", None, None, f"cannot read the profile: it {exc.problem}", fix)]
        ) from None
    return parse_profile(_decode(raw, file), file)


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


def _decode(raw: bytes, file: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - raw.rfind(b"\n", 0, exc.start)
        issue = ProfileIssue(
            "", line, column, f"byte {exc.start} is not UTF-8", "save the profile as UTF-8"
        )
        raise ProfileInvalid(file, [issue]) from None


# --- YAML with positions, bounds and duplicate-key detection -----------------------------------


class _Refused(Exception):
    """The YAML is unusable as a whole (too deep, too many values, a cycle)."""

    def __init__(self, issue: ProfileIssue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def _load_yaml(text: str, file: str) -> tuple[Any, dict[Loc, tuple[int, int]]]:
    try:
        _check_size(text)
        node = yaml.compose(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise _syntax_error(file, exc) from None
    except _Refused as exc:
        raise ProfileInvalid(file, [exc.issue]) from None
    if node is None:
        raise ProfileInvalid(file, [ProfileIssue("", 1, 1, "the profile is empty")])
    builder = _Builder()
    try:
        data = builder.value(node, (), 0)
    except _Refused as exc:
        raise ProfileInvalid(file, [exc.issue]) from None
    if builder.issues:
        raise ProfileInvalid(file, builder.issues)
    return data, builder.marks


def _check_size(text: str) -> None:
    """Refuse deep nesting and huge documents from the parser's event stream, before any node is
    built: libyaml's composer recurses in C per nesting level (100,000 levels crash it)."""
    depth = events = 0
    for event in yaml.parse(text, Loader=SAFE_LOADER):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise _Refused(_too_deep(event.start_mark, ()))
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
        if isinstance(event, yaml.NodeEvent):
            events += 1
            if events > MAX_VALUES:
                raise _Refused(
                    _at(
                        event.start_mark,
                        f"YAML syntax: more than {MAX_VALUES} values",
                        fix="a profile holds about 60 values; pass the right file",
                    )
                )


class _Builder:
    """Builds plain Python data from a composed YAML node graph, recording the position of every
    field and collecting every problem. Aliases are followed with a budget and a cycle check,
    because the node graph shares aliased nodes and may contain itself."""

    def __init__(self) -> None:
        self.marks: dict[Loc, tuple[int, int]] = {}
        self.issues: list[ProfileIssue] = []
        self.budget = MAX_VALUES
        self.open: set[int] = set()  # ids of the collections on the current path

    def value(self, node: yaml.Node, loc: Loc, depth: int) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise _Refused(_bomb(node, loc))
        self.marks[loc] = _position(node.start_mark)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, loc)
        if node.tag not in _COLLECTION_TAGS:
            message = f"YAML syntax: tag {_short(node.tag)} is not allowed (safe YAML only)"
            raise _Refused(_at(node.start_mark, message, loc))
        if id(node) in self.open:
            raise _Refused(_cycle(node, loc))
        if depth >= MAX_DEPTH:
            raise _Refused(_too_deep(node.start_mark, loc))
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, loc, depth + 1)
            return [self.value(item, (*loc, i), depth + 1) for i, item in enumerate(node.value)]
        finally:
            self.open.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, loc: Loc, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        first_seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node, loc)
            if key is None:
                continue
            child = (*loc, key)
            line, column = _position(key_node.start_mark)
            if key in first_seen:
                message = (
                    f"duplicate key (first set on line {first_seen[key]}); YAML would "
                    "silently keep only the last value"
                )
                self.issues.append(ProfileIssue(_dotted(child), line, column, message))
                continue
            first_seen[key] = line
            self.marks[child] = (line, column)
            out[key] = self.value(value_node, child, depth)
            self.marks[child] = (line, column)
        return out

    def _key(self, node: yaml.Node, loc: Loc) -> str | None:
        """A mapping key: a plain string, or None after recording why it is not one."""
        if isinstance(node, yaml.ScalarNode) and node.tag == f"{_TAG}merge":
            self._issue(
                node, loc, "YAML syntax: merge keys (<<) are not supported", "write the keys out"
            )
            return None
        if not isinstance(node, yaml.ScalarNode):
            kind = "mapping" if isinstance(node, yaml.MappingNode) else "list"
            message = f"YAML syntax: a {kind} is used as a key; keys are field names"
            self._issue(node, loc, message, "write the key as a plain field name")
            return None
        key = self._scalar(node, loc)
        if key is None and node.tag != f"{_TAG}null":
            return None  # _scalar recorded why
        if not isinstance(key, str):
            text = _excerpt(node.value)
            self._issue(
                node,
                loc,
                f"YAML syntax: the key `{text}` reads as {_kind(key)}, not a field name",
                f'quote it ("{text}") or use the field name from `specdeploy schema`',
            )
            return None
        return key

    def _scalar(self, node: yaml.ScalarNode, loc: Loc) -> Any:
        if node.tag == f"{_TAG}timestamp":
            self._issue(
                node,
                loc,
                f"YAML syntax: `{_excerpt(node.value)}` reads as a date, which no field takes",
                f'quote it ("{_excerpt(node.value)}") to make it a string',
            )
            return None
        if node.tag not in _SCALAR_TAGS:
            self._issue(
                node,
                loc,
                f"YAML syntax: tag {_short(node.tag)} is not allowed (safe YAML: strings, numbers, "
                "booleans, null, lists and mappings)",
                "remove the tag",
            )
            return None
        if node.tag == f"{_TAG}int" and len(node.value) > MAX_INT_CHARS:
            self._issue(
                node,
                loc,
                f"YAML syntax: an integer of {len(node.value)} characters; no field takes a number "
                "that large",
                "use a value within the field's range (`specdeploy schema` shows them)",
            )
            return None
        try:
            return _CONSTRUCTORS[node.tag](_LEAVES, node)
        except Exception:  # PyYAML's converters raise ValueError, KeyError, IndexError, ...
            self._issue(
                node,
                loc,
                f"YAML syntax: `{_excerpt(node.value)}` is not a valid {_short(node.tag)}",
                "fix the value or remove the explicit tag",
            )
            return None

    def _issue(self, node: yaml.Node, loc: Loc, message: str, fix: str = "") -> None:
        line, column = _position(node.start_mark)
        self.issues.append(ProfileIssue(_dotted(loc), line, column, message, fix))


_LEAVES = yaml.constructor.SafeConstructor()


def _position(mark: Any) -> tuple[int, int]:
    return mark.line + 1, mark.column + 1


def _at(mark: Any, message: str, loc: Loc = (), fix: str = "") -> ProfileIssue:
    line, column = _position(mark)
    return ProfileIssue(_dotted(loc), line, column, message, fix)


def _too_deep(mark: Any, loc: Loc) -> ProfileIssue:
    return _at(
        mark,
        f"YAML syntax: nested deeper than {MAX_DEPTH} levels",
        loc,
        "a profile nests three levels; look for unclosed brackets",
    )


def _bomb(node: yaml.Node, loc: Loc) -> ProfileIssue:
    return _at(
        node.start_mark,
        f"YAML syntax: the profile expands to more than {MAX_VALUES} values (aliases repeat "
        "collections that themselves repeat aliases)",
        loc,
        "write the values out instead of nesting aliases",
    )


def _cycle(node: yaml.Node, loc: Loc) -> ProfileIssue:
    return _at(
        node.start_mark,
        "YAML syntax: an alias refers to a collection that contains it (a cycle)",
        loc,
        "remove the alias (*name) that points back into its own anchor (&name)",
    )


def _short(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number"}.get(type(value), "a value")


def _excerpt(text: str, limit: int = 40) -> str:
    flat = text.replace("\n", " ")
    return flat if len(flat) <= limit else f"{flat[:limit]}... ({len(text)} characters)"


def _syntax_error(file: str, exc: yaml.YAMLError) -> ProfileInvalid:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
    problem = getattr(exc, "problem", None) or str(exc)
    return ProfileInvalid(file, [ProfileIssue("", line, col, f"YAML syntax: {problem}")])


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
        suggestion = _did_you_mean(_shown(err.get("input")), _literal_choices(expected))
        return f"{_shown(err['input'])} is not one of {expected}{suggestion}"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind not in ("value_error", "assertion_error", FIELD_ERROR) and "input" in err:
        msg = f"{msg} (got {_shown(err['input'])})"
    return msg


def _shown(value: Any) -> str:
    """A short repr of a value from the profile, whatever its size."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


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
    if issue.fix:
        return issue.fix
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
