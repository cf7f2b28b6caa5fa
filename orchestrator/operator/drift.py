"""Drift on owned objects: whether anyone but specdeploy changed what it applied, and what.

The API server records which fields each field manager owns (`metadata.managedFields`). A change
by another manager (`kubectl scale`, `edit`, `patch`, an apply with `--force-conflicts`) moves the
fields it changes to that manager, and a field removed leaves every manager's set
(https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management). So the
fields of specdeploy's own Apply entry change exactly when someone else changes what it applied.
`reconcile` records a fingerprint of that entry per owned object (`status.objects.owned[*].fields`);
the control loop, which reads every owned object each interval anyway, compares: no extra
request, and nothing is re-applied while nothing drifted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from orchestrator.deploy.kubernetes_cluster import FIELD_MANAGER

#: Hex characters of sha256 kept: a fingerprint only has to differ when the field set does.
FINGERPRINT_CHARS: Final = 16
#: Fields named in one object's DriftCorrected message (a replaced container lists many).
MAX_FIELDS_SHOWN: Final = 8

FieldPath = tuple[str, ...]
"""A path of FieldsV1 elements: `("f:spec", "f:template", ..., 'k:{"name":"engine"}', "f:args")`."""


def applied_fields(live: Mapping[str, Any]) -> dict[str, Any] | None:
    """The FieldsV1 of specdeploy's Apply entry on the object itself (not a subresource), as the
    API server reports it; None when specdeploy has applied nothing to it."""
    entry = _applied_entry(live)
    if entry is None:
        return None
    fields = entry.get("fieldsV1")
    return fields if isinstance(fields, dict) else {}


def fingerprint(live: Mapping[str, Any]) -> str:
    """A short digest of the fields specdeploy owns on `live` ("" when it owns none)."""
    fields = applied_fields(live)
    if fields is None:
        return ""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_CHARS]


def drifted(live: Mapping[str, Any], recorded: str | None) -> bool:
    """Whether the fields specdeploy owns are not the ones it recorded when it applied. Nothing
    recorded (a status written before fingerprints, or edited) is no evidence of drift."""
    return bool(recorded) and fingerprint(live) != recorded


def taken_back(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The fields a forced apply gave back to specdeploy: owned after it, not before. Each is
    printed as structured-merge-diff prints paths, with who had it (`.spec.replicas (kubectl)`)
    or `(removed)` when no manager had it any more."""
    lost = paths(applied_fields(after) or {}) - paths(applied_fields(before) or {})
    owners = _owners(before)
    shown = []
    for path in sorted(lost):
        if path[-1].startswith(("k:", "v:", "i:")) and any(
            p[: len(path)] == path for p in lost - {path}
        ):
            continue  # a list item whose fields are listed: the fields say it
        holders = sorted(m for m, owned in owners.items() if path in owned)
        shown.append(f"{printed(path)} ({', '.join(holders) if holders else 'removed'})")
    return shown


def describe(changes: Mapping[str, list[str]]) -> str:
    """`Deployment/x: .spec.replicas (kubectl); Service/x-front: ...`, at most MAX_FIELDS_SHOWN
    fields per object."""
    parts = []
    for name, fields in changes.items():
        more = len(fields) - MAX_FIELDS_SHOWN
        listed = ", ".join(fields[:MAX_FIELDS_SHOWN]) + (f" and {more} more" if more > 0 else "")
        parts.append(f"{name}: {listed}")
    return "; ".join(parts)


def paths(trie: Mapping[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    """The leaves (and list items, marked by ".") of a FieldsV1 trie."""
    out: set[FieldPath] = set()
    for key, child in trie.items():
        if key == ".":
            out.add(prefix)
        elif isinstance(child, Mapping) and child:
            out |= paths(child, (*prefix, key))
        else:
            out.add((*prefix, key))
    return out


def printed(path: FieldPath) -> str:
    """A path as structured-merge-diff prints it (and the API server's conflict messages):
    `.spec.template.spec.containers[name="engine"].args`."""
    out = []
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            out.append("." + rest)
        elif kind == "k":
            try:
                keys = json.loads(rest)
            except ValueError:
                keys = None
            if isinstance(keys, dict):
                out.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]")
            else:
                out.append(f"[{rest}]")
        elif kind == "v":
            out.append(f"[={rest}]")
        else:
            out.append(f"[{rest}]")
    return "".join(out)


def _owners(live: Mapping[str, Any]) -> dict[str, set[FieldPath]]:
    """Every other manager's fields, by manager (and subresource: `kubectl scale` writes through
    `scale`)."""
    found: dict[str, set[FieldPath]] = {}
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, dict) or entry is _applied_entry(live):
            continue
        fields = entry.get("fieldsV1")
        if isinstance(fields, dict):
            name = str(entry.get("manager") or "?")
            if entry.get("subresource"):
                name += f" via {entry['subresource']}"
            found.setdefault(name, set()).update(paths(fields))
    return found


def _applied_entry(live: Mapping[str, Any]) -> dict[str, Any] | None:
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if (
            isinstance(entry, dict)
            and entry.get("manager") == FIELD_MANAGER
            and entry.get("operation") == "Apply"
            and not entry.get("subresource")
        ):
            return entry
    return None
