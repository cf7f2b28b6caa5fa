"""Load a profile file into a `Profile`: safe YAML only (`safe_yaml`), duplicate keys refused,
and every error names the file, line, column and the field path as written in the YAML.

A `specdeploy.io/v1` document is the operator's custom resource: the profile's fields under
`spec`, as Kubernetes puts an object's desired state (what `kubectl get -o yaml` prints reads
too: its `status` and the object's own metadata beyond name and namespace are not the profile's).
Its errors name the fields as written, `spec.` included.

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

#: The apiVersion of the operator's custom resource, whose profile is under `spec`.
RESOURCE_API_VERSION: Final = "specdeploy.io/v1"
#: The keys a resource and a profile share: the object's own, never under `spec`.
_OBJECT_KEYS: Final = ("apiVersion", "kind", "metadata")
#: The keys of a resource beside `spec`: the object's, not the profile's.
_RESOURCE_KEYS: Final = (*_OBJECT_KEYS, "spec", "status")

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
    metadata = data.get("metadata")
    if data.get("apiVersion") == RESOURCE_API_VERSION and isinstance(metadata, dict):
        data = {"metadata": _profile_metadata(metadata)}
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
    data, marks, under = _profile_of_resource(data, marks, file)
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileInvalid(file, _issues(exc, marks, under)) from None


Marks = dict[Loc, tuple[int, int]]


def _profile_of_resource(data: dict[str, Any], marks: Marks, file: str) -> tuple[Any, Marks, Loc]:
    """A resource's profile (its `spec` beside apiVersion, kind, name and namespace), the marks
    of its fields re-keyed, and the prefix its field paths are shown with; a profile file as it
    is, with no prefix."""
    if data.get("apiVersion") != RESOURCE_API_VERSION:
        return data, marks, ()
    misplaced = [k for k in data if k not in _RESOURCE_KEYS]
    spec = data.get("spec")

    def at(loc: Loc) -> tuple[int | None, int | None]:
        return marks.get(loc, (None, None))

    issues = [
        ProfileIssue(
            str(key),
            *at((key,)),
            f"{key} is at the top level of a {RESOURCE_API_VERSION} resource",
            "move it under spec: (spec holds engine, target, proposer and the rest), or make "
            "the file a profile with apiVersion: specdeploy/v1",
            "a custom resource carries the desired state under spec, and the API server prunes "
            "top-level fields its CRD does not declare",
        )
        for key in misplaced
    ]
    if not isinstance(spec, dict):
        issues.append(
            ProfileIssue(
                "spec",
                *marks.get(("spec",), marks.get((), (1, 1))),
                f"a {RESOURCE_API_VERSION} resource needs spec: a mapping of the profile's fields",
                "put engine, target, proposer, ... under spec:",
                "the operator deploys what a resource's spec says, and this one has none",
            )
        )
    else:
        issues += [
            ProfileIssue(
                f"spec.{key}",
                *at(("spec", key)),
                f"spec.{key} belongs beside spec, at the top level of the resource",
                f"move {key} out of spec",
            )
            for key in _OBJECT_KEYS
            if key in spec
        ]
    if issues:
        raise ProfileInvalid(file, issues)
    assert isinstance(spec, dict)
    profile: dict[str, Any] = {k: data[k] for k in _OBJECT_KEYS if k in data}
    if isinstance(profile.get("metadata"), dict):
        profile["metadata"] = _profile_metadata(profile["metadata"])
    profile.update(spec)
    kept: Marks = {}
    for loc, mark in marks.items():
        if loc[:1] == ("spec",):
            kept.setdefault(loc[1:], mark)
        elif loc[:1] and loc[0] in _OBJECT_KEYS:
            kept[loc] = mark
    return profile, kept, ("spec",)


def _profile_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """A resource's metadata as a profile's: name and namespace (its uid, labels, managed fields
    and the rest are the Kubernetes object's, not the profile's)."""
    return {k: v for k, v in metadata.items() if k in ("name", "namespace")}


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


def _issues(exc: ValidationError, marks: Marks, under: Loc = ()) -> list[ProfileIssue]:
    """The issues of a validation error; field paths outside apiVersion, kind and metadata are
    shown with `under` before them (a resource's `spec`)."""
    issues = []
    for err in exc.errors():
        loc = _yaml_loc(tuple(err["loc"]))
        if err["type"] == FIELD_ERROR:  # a cross-field check names the field it is about
            loc = (*loc, *str(err["ctx"]["field"]).split("."))
        line, col = _nearest_mark(loc, marks)
        message, fix, why = (
            _explained(err) or _unmodelled_method(err, loc) or (_message(err, loc), "", "")
        )
        shown = loc if not loc or loc[0] in _OBJECT_KEYS else under + loc
        issues.append(ProfileIssue(dotted(shown), line, col, message, fix, why))
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


def _nearest_mark(loc: Loc, marks: Marks) -> tuple[int | None, int | None]:
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
