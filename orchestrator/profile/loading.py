"""Load a profile file into a `Profile`: safe YAML only (`safe_yaml`), duplicate keys refused,
and every error names the file, line, column and the field path as written in the YAML.

Only a regular file of at most `MAX_PROFILE_BYTES` is read: a FIFO would block forever and
/dev/zero never ends. Anything that cannot be loaded is a `profile.*` finding, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.profile.issues import Loc, ProfileInvalid, ProfileIssue, dotted
from orchestrator.profile.safe_yaml import MAX_DEPTH, MAX_VALUES, load_yaml
from orchestrator.profile.schema import (
    FIELD_ERROR,
    METHOD_SPELLINGS,
    UNMODELLED_METHODS,
    VALUE_ERROR,
    Metadata,
    Profile,
)
from orchestrator.untrusted_files import UnreadableFile, read_regular_file

__all__ = [
    "MAX_DEPTH",
    "MAX_PROFILE_BYTES",
    "MAX_VALUES",
    "ProfileInvalid",
    "ProfileIssue",
    "load_metadata",
    "load_profile",
    "parse_profile",
]

#: Largest profile file read. Real profiles are 1-3 KB; the cap stops a wrong path (a log file,
#: /dev/zero) from being read into memory.
MAX_PROFILE_BYTES: Final = 1 << 20


def load_profile(path: Path) -> Profile:
    """Read and validate one profile file."""
    return parse_profile(*_read(path))


def load_metadata(path: Path) -> Metadata:
    """Only the metadata (name, namespace) of a profile file, the rest unchecked: what `delete`
    needs to find a profile's objects by their labels, so that a profile that no longer
    validates (an old release, a removed field) can still delete what it applied."""
    text, file = _read(path)
    data, marks = load_yaml(text, file)
    if not isinstance(data, dict):
        raise ProfileInvalid(
            file,
            [ProfileIssue("", 1, 1, "the profile must be a YAML mapping (apiVersion, kind, ...)")],
        )
    try:
        return _MetadataOnly.model_validate(data).metadata
    except ValidationError as exc:
        raise ProfileInvalid(file, _issues(exc, marks)) from None


class _MetadataOnly(BaseModel):
    """A profile read for its metadata alone; every other key is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    metadata: Metadata


def _read(path: Path) -> tuple[str, str]:
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
    return _decode(raw, file), file


def parse_profile(text: str, file: str = "<profile>") -> Profile:
    """Validate profile text; `file` only labels messages."""
    data, marks = load_yaml(text, file)
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


# --- pydantic errors -> issues ------------------------------------------------------------------


def _issues(exc: ValidationError, marks: dict[Loc, tuple[int, int]]) -> list[ProfileIssue]:
    issues = []
    for err in exc.errors():
        loc = _yaml_loc(tuple(err["loc"]))
        if err["type"] == FIELD_ERROR:  # a cross-field check names the field it is about
            loc = (*loc, *str(err["ctx"]["field"]).split("."))
        line, col = _nearest_mark(loc, marks)
        message, fix, why = (
            _explained(err) or _unmodelled_method(err, loc) or (_message(err, loc), "", "")
        )
        issues.append(ProfileIssue(dotted(loc), line, col, message, fix, why))
    return issues


def _explained(err: Any) -> tuple[str, str, str] | None:
    """(message, fix, why) of a value check that says its own why and fix (`value_error`)."""
    if err["type"] != VALUE_ERROR:
        return None
    ctx = err["ctx"]
    return str(ctx["message"]), str(ctx["fix"]), str(ctx["why"])


def _unmodelled_method(err: Any, loc: Loc) -> tuple[str, str, str] | None:
    """(message, fix, why) for an engine's speculative method specdeploy spells otherwise or has
    no rules for."""
    value = err.get("input")
    if (
        err["type"] != "literal_error"
        or loc != ("proposer", "method")
        or not isinstance(value, str)
    ):
        return None
    name = value.strip().lower()
    checked = err.get("ctx", {}).get("expected", "")
    if name in METHOD_SPELLINGS:
        ours = METHOD_SPELLINGS[name]
        return (
            f"{_shown(value)} is an engine's name for {ours}",
            f"set `proposer.method: {ours}`",
            "",
        )
    if name not in UNMODELLED_METHODS:
        return None
    what, closest = UNMODELLED_METHODS[name]
    alternative = (
        f"use `proposer.method: {closest}`, the nearest method specdeploy checks"
        if closest
        else "pick a method specdeploy checks (`specdeploy suggest MODEL` proposes one)"
    )
    return (
        f"{_shown(value)} is {what}; specdeploy checks {checked}",
        f"{alternative}, or deploy {value} without specdeploy",
        f"specdeploy has no pairing, memory or flag rules for {value} yet, and refuses rather "
        "than pass a launch it cannot check",
    )


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
