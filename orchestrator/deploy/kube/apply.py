"""Server-side apply of a platform's objects, in apply order, each reported as it lands with a diff
of what changed.

Every object is applied with field manager `specdeploy`; re-applying an unchanged profile leaves
every object as it was. Fields another manager owns are not taken over unless asked
(`force_conflicts`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from orchestrator.deploy.kube.client import KubeClient
from orchestrator.deploy.kube.errors import Subject, partial
from orchestrator.emitters.base import Manifest, canonical_yaml, sort_for_apply
from orchestrator.errors import DeployError

FIELD_MANAGER: Final = "specdeploy"

Action = Literal["created", "configured", "unchanged"]


@dataclass(frozen=True)
class ApplyResult:
    """What server-side apply did (or, with server dry run, would do) to one object."""

    kind: str
    name: str
    namespace: str
    action: Action
    diff: str = ""
    live: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The object as the server answered the apply (its managedFields say what specdeploy owns)."""


def apply_each(
    client: KubeClient,
    manifests: list[Manifest],
    *,
    server_dry_run: bool = False,
    force_conflicts: bool = False,
) -> Iterator[ApplyResult]:
    """Apply one object at a time, yielding each result as it lands. When one fails, the
    DeployError names the objects already applied (they stay in the cluster)."""
    ordered = sort_for_apply(manifests, client.kinds)
    done: list[str] = []
    for manifest in ordered:
        try:
            result = _apply_one(
                client, manifest, server_dry_run=server_dry_run, force_conflicts=force_conflicts
            )
        except DeployError as exc:
            raise partial(exc, done, len(ordered), server_dry_run) from exc.__cause__
        done.append(f"{result.kind.lower()}/{result.name}")
        yield result


def _apply_one(
    client: KubeClient, manifest: Manifest, *, server_dry_run: bool, force_conflicts: bool
) -> ApplyResult:
    namespace = manifest.namespace or client.namespace
    body = {**manifest.body, "metadata": {**manifest.body["metadata"], "namespace": namespace}}
    target = f"{manifest.kind}/{manifest.name} in namespace {namespace}"
    resource = client.resource(manifest.api_version, manifest.kind)
    subject = Subject(manifest.kind, manifest.api_version, str(getattr(resource, "name", "")))
    with client.calling(f"apply {target}", subject=subject):
        current = client.get_object(resource, manifest.name, namespace)
        applied = resource.server_side_apply(
            body=body,
            name=manifest.name,
            namespace=namespace,
            field_manager=FIELD_MANAGER,
            force_conflicts=True if force_conflicts else None,
            dry_run="All" if server_dry_run else None,
            _request_timeout=client.timeout,
        ).to_dict()
    diff = object_diff(current, body, manifest.filename)
    action = _action(current, applied, diff, dry_run=server_dry_run)
    return ApplyResult(manifest.kind, manifest.name, namespace, action, diff, live=applied)


def object_diff(current: dict[str, Any] | None, body: dict[str, Any], name: str) -> str:
    """Unified diff of the fields specdeploy sets: the live values (projected onto the applied
    body's fields, so server defaults and status do not show) against the applied body, as the
    server stores it (`as_stored`)."""
    before = "" if current is None else canonical_yaml(project(current, body))
    after = canonical_yaml(body if current is None else as_stored(body, current))
    lines = difflib.unified_diff(
        before.splitlines(True), after.splitlines(True), f"live/{name}", f"applied/{name}"
    )
    return "".join(lines)


def project(live: Any, shape: Any) -> Any:
    """The parts of `live` at the paths `shape` has (lists compared element by element)."""
    if isinstance(shape, dict) and isinstance(live, dict):
        return {k: project(live[k], v) for k, v in shape.items() if k in live}
    if isinstance(shape, list) and isinstance(live, list):
        return [project(lv, sv) for lv, sv in zip(live, shape, strict=False)] + live[len(shape) :]
    return live


def as_stored(body: Any, live: Any) -> Any:
    """`body` without the empty lists and maps that the live object does not have: on built-in
    kinds the API server drops them when it stores the object (Go `omitempty`: a Deployment
    applied with `initContainers: []` and `env: []` comes back without them, the recording), so
    they are no change. CRD-backed kinds keep empty lists (the recording); there the live object
    has them, and they stay."""
    if isinstance(body, dict) and isinstance(live, dict):
        return {
            k: as_stored(v, live[k]) if k in live else v
            for k, v in body.items()
            if k in live or not (isinstance(v, list | dict) and not v)
        }
    if isinstance(body, list) and isinstance(live, list):
        return [as_stored(b, lv) for b, lv in zip(body, live, strict=False)] + body[len(live) :]
    return body


def _action(
    current: dict[str, Any] | None, applied: dict[str, Any], diff: str, *, dry_run: bool
) -> Action:
    """A real apply that changes nothing keeps the resourceVersion; a dry run persists nothing,
    so there the diff decides."""
    if current is None:
        return "created"
    if dry_run:
        return "configured" if diff else "unchanged"
    before = (current.get("metadata") or {}).get("resourceVersion")
    after = (applied.get("metadata") or {}).get("resourceVersion")
    if before == after:
        return "unchanged"
    # A controller writing status between our GET and our apply moves resourceVersion too (a
    # Deployment's controller does, on its own clock): the object apart from status and the
    # server's bookkeeping decides then.
    return "unchanged" if _content(current) == _content(applied) else "configured"


_BOOKKEEPING: Final = frozenset({"resourceVersion", "managedFields"})


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """What an apply can change: the object without status, resourceVersion and managedFields."""
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _BOOKKEEPING}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": metadata}
