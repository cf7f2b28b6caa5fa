"""Profile YAML into plain data with the position of every field, under limits: a profile comes
from a pull request as often as from its author. At most `MAX_VALUES` values once aliases are
expanded (an 800-byte "billion laughs" file expands to 10^9), at most `MAX_DEPTH` levels of
nesting, no alias cycles, plain scalar keys, duplicate keys refused, and only the core scalar types
(string, integer, float, boolean, null). Anything else is a `ProfileIssue` with its position.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from orchestrator.datafiles import SAFE_LOADER
from orchestrator.profile.issues import Loc, ProfileInvalid, ProfileIssue, dotted

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


class _Refused(Exception):
    """The YAML is unusable as a whole (too deep, too many values, a cycle)."""

    def __init__(self, issue: ProfileIssue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def load_yaml(text: str, file: str) -> tuple[Any, dict[Loc, tuple[int, int]]]:
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
                self.issues.append(ProfileIssue(dotted(child), line, column, message))
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
        self.issues.append(ProfileIssue(dotted(loc), line, column, message, fix))


_LEAVES = yaml.constructor.SafeConstructor()


def _position(mark: Any) -> tuple[int, int]:
    return mark.line + 1, mark.column + 1


def _at(mark: Any, message: str, loc: Loc = (), fix: str = "") -> ProfileIssue:
    line, column = _position(mark)
    return ProfileIssue(dotted(loc), line, column, message, fix)


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


#: libyaml's own nesting limit (yaml_set_max_nest_level, 1000 by default in the libyaml that
#: PyYAML 6.0.4's wheels bundle). Its scanner looks ahead for simple keys, so in a flow collection
#: it meets this limit before our event count reaches MAX_DEPTH; what it says is told as ours.
_LIBYAML_TOO_DEEP: Final = "exceeded maximum nesting depth"


def _syntax_error(file: str, exc: yaml.YAMLError) -> ProfileInvalid:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None and _LIBYAML_TOO_DEEP in (getattr(exc, "problem", None) or ""):
        return ProfileInvalid(file, [_too_deep(mark, ())])
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
    problem = getattr(exc, "problem", None) or str(exc)
    return ProfileInvalid(file, [ProfileIssue("", line, col, f"YAML syntax: {problem}")])
