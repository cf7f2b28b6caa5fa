"""Create/update: a resource through the same pipeline as the CLI, then its owned objects.

`reconcile` plans the resource (`plan_profile`, with the in-cluster checkpoint source), writes the
Validated and MemoryFits conditions with the findings, and server-side applies what the plan emits
plus the traffic split, each owned by the resource, with force (what it owns stays as planned;
`status.objects.owned` records a fingerprint of those fields, see `drift`). An invalid resource
gets conditions and an Event and nothing is applied (no exception: no retry loop). An object of
the same name that the resource does not own is never touched; the Ready condition says which.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import yaml

from orchestrator.compatibility.rule import Finding
from orchestrator.deploy.kubernetes_cluster import ApplyResult, KubernetesCluster
from orchestrator.emitters.base import Manifest
from orchestrator.errors import DeployError
from orchestrator.operator import drift
from orchestrator.operator.admission import IMAGE_RULE, SECRET_RULE, Admission
from orchestrator.operator.metrics import RECONCILES
from orchestrator.operator.objects import KINDS, Owner, owned_by, owned_manifests
from orchestrator.operator.policy import Memory, Variant, explore_share, other_twin
from orchestrator.plan.build import plan_profile, profile_findings
from orchestrator.plan.resolver import CheckpointSource
from orchestrator.plan.types import DeploymentPlan, PlanResult, RejectedPlan
from orchestrator.profile.loading import ProfileInvalid, parse_profile
from orchestrator.profile.schema import Profile

_log = logging.getLogger("specdeploy.operator")

ConditionType = Literal["Validated", "MemoryFits", "Ready", "Speculating"]
#: Order of the conditions in status.
CONDITION_TYPES: Final[tuple[ConditionType, ...]] = (
    "Validated",
    "MemoryFits",
    "Ready",
    "Speculating",
)
ReconcileTrigger = Literal["change", "loop"]
"""What asked for a reconcile: the resource changed (or the operator started), or the loop
found an owned object missing or changed by someone else, or a foreign one gone."""
Emit = Callable[[str, str, str], None]
"""(type Normal|Warning, reason, message) -> posts an Event on the resource."""


@dataclass
class Outcome:
    """What a reconcile wrote: the status patch and the Events it posted."""

    status: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)


def reconcile(
    body: Mapping[str, Any],
    source: CheckpointSource,
    cluster: KubernetesCluster,
    emit: Emit,
    *,
    drifted: Collection[str] = (),
) -> dict[str, Any]:
    """Plan and apply one resource; returns the status to merge-patch. Owned objects are applied
    with force: a controller should always take back the fields of objects it owns, since no one
    else resolves the conflict ("Using Server-Side Apply in a controller",
    https://kubernetes.io/docs/reference/using-api/server-side-apply/).
    `drifted` names the owned objects (`Kind/name`) the loop found changed by someone else:
    a Warning Event `DriftCorrected` says which of their fields were taken back, from whom."""
    owner = owner_of(body)
    status = dict(body.get("status") or {})
    generation = (body.get("metadata") or {}).get("generation")
    result = plan_resource(body, source)
    out: dict[str, Any] = {"observedGeneration": generation, "findings": findings_json(result)}
    conditions = conditions_of(status)
    if isinstance(result, RejectedPlan):
        summary = "; ".join(f"{f.rule}: {f.what}" for f in result.errors)
        refused = all(f.rule in (IMAGE_RULE, SECRET_RULE) for f in result.errors)
        why = "NotAllowed" if refused else "Invalid"
        set_condition(conditions, "Validated", False, why, summary, generation)
        set_condition(conditions, "MemoryFits", *_memory(result), generation)
        set_condition(
            conditions,
            "Ready",
            False,
            "Invalid",
            "nothing is applied for an invalid resource",
            generation,
        )
        set_condition(conditions, "Speculating", False, "Invalid", "not deployed", generation)
        emit("Warning", why, f"{len(result.errors)} error(s): {summary}"[:1000])
        return {**out, "conditions": conditions, "verdict": "Invalid"}
    set_condition(conditions, "Validated", True, "Planned", _warnings(result), generation)
    set_condition(conditions, "MemoryFits", *_memory(result), generation)
    active = active_variant(result.profile, status)
    explore = exploring(result.profile, status)
    manifests = owned_manifests(result, owner, active, explore)
    before = {ref_name(m): cluster.live(m) for m in manifests}
    foreign = [m for m in manifests if _foreign(before[ref_name(m)], owner)]
    applied = [m for m in manifests if m not in foreign]
    after = {ref_name(r): r.live for r in cluster.apply(applied, force_conflicts=True)}
    if drifted:
        _drift_corrected(drifted, before, after, emit)
    pruned = _prune(cluster, owner, object_refs(status, "owned", owner.namespace), applied)
    if pruned:
        emit("Normal", "Pruned", "deleted what the plan no longer has: " + ", ".join(pruned))
    if foreign:
        names = ", ".join(ref_name(m) for m in foreign)
        message = f"{names} exist(s) and belong(s) to someone else; left untouched"
        set_condition(conditions, "Ready", False, "ForeignObject", message, generation)
        emit("Warning", "ForeignObject", message + "; rename the resource or remove them")
    elif _condition(conditions, "Ready") is None or _condition(conditions, "Ready", "reason") in (
        "Invalid",
        "ForeignObject",
    ):
        set_condition(
            conditions,
            "Ready",
            False,
            "Applied",
            "objects applied; waiting for the twins",
            generation,
        )
    speculating = active == "speculative" and result.profile.speculative and not foreign
    set_condition(
        conditions,
        "Speculating",
        speculating,
        "ForeignObject" if foreign else "Speculative" if speculating else "Baseline",
        "not all objects are ours (see Ready)" if foreign else f"traffic goes to the {active} twin",
        generation,
    )
    emit("Normal", "Applied", f"applied {len(applied)} object(s) (field manager specdeploy)")
    traffic = traffic_status(result.profile, active, explore)
    return {
        **out,
        "objects": {
            "owned": [owned_ref(m, after.get(ref_name(m))) for m in applied],
            "foreign": [object_ref(m) for m in foreign],
        },
        "conditions": conditions,
        "traffic": traffic,
        "verdict": verdict(result.profile, active),
    }


def counted_reconcile(
    trigger: ReconcileTrigger,
    body: Mapping[str, Any],
    source: CheckpointSource,
    cluster: KubernetesCluster,
    emit: Emit,
    *,
    drifted: Collection[str] = (),
) -> dict[str, Any]:
    """`reconcile`, counted in specdeploy_operator_reconciles_total by trigger and result."""
    try:
        status = reconcile(body, source, cluster, emit, drifted=drifted)
    except DeployError:
        RECONCILES.inc(trigger=trigger, result="cluster_error")
        raise
    except Exception:
        RECONCILES.inc(trigger=trigger, result="error")
        raise
    RECONCILES.inc(trigger=trigger, result="invalid" if status["verdict"] == "Invalid" else "ok")
    return status


def plan_resource(body: Mapping[str, Any], source: CheckpointSource) -> PlanResult:
    """The resource as a profile, planned: what the CLI's `plan` would say about it."""
    label = resource_label(body)
    try:
        profile = profile_of(body)
    except ProfileInvalid as exc:
        return RejectedPlan(Path(label), tuple(profile_findings(exc)))
    profile = effective_profile(profile, body.get("status") or {})
    result = plan_profile(profile, source, profile_path=Path(label))
    refused = Admission.from_env().findings(profile)
    if refused and isinstance(result, DeploymentPlan):
        return RejectedPlan(Path(label), (*result.findings, *refused), profile=profile)
    if refused and isinstance(result, RejectedPlan):
        return replace(result, findings=(*result.findings, *refused))
    return result


def profile_of(body: Mapping[str, Any]) -> Profile:
    """The profile a resource spells: its spec, with only the name and namespace of metadata
    (parse_profile reads a resource as a resource file is read)."""
    metadata = body.get("metadata") or {}
    document = {k: v for k, v in body.items() if k != "status"}
    document["metadata"] = {k: metadata[k] for k in ("name", "namespace") if k in metadata}
    return parse_profile(yaml.safe_dump(document, sort_keys=False), resource_label(body))


def effective_profile(profile: Profile, status: Mapping[str, Any]) -> Profile:
    """The profile with the draft length retune chose, when the policy retunes."""
    if profile.policy is None or profile.policy.mode != "retune":
        return profile
    loop = status.get("loop") or {}
    chosen = Memory.from_status(loop).num_speculative_tokens
    if chosen is None or loop.get("specTokens") != profile.proposer.num_speculative_tokens:
        return profile  # never retuned, or the spec's own value changed since: the spec wins
    rules = profile.policy.retune
    # retune lowers from the spec's value or raises up to max_tokens: nothing else is its choice
    upper = max(rules.max_tokens, profile.proposer.num_speculative_tokens or 0)
    if not rules.min_tokens <= chosen <= upper:
        # status is writable by whoever may patch status/, not only by this loop: a value retune
        # could not have chosen is an edit, and the spec's own value is applied instead
        _log.warning(
            "%s: status.loop.numSpeculativeTokens=%s is outside policy.retune's %d..%d; "
            "the spec's num_speculative_tokens=%s is applied",
            profile.metadata.name,
            chosen,
            rules.min_tokens,
            upper,
            profile.proposer.num_speculative_tokens,
        )
        return profile
    # validated, not model_copy'd: every rule of the proposer's schema holds for the new value
    document = profile.proposer.model_dump(mode="json", exclude_unset=True)
    proposer = type(profile.proposer).model_validate({**document, "num_speculative_tokens": chosen})
    return profile.model_copy(update={"proposer": proposer})


def active_variant(profile: Profile, status: Mapping[str, Any]) -> Variant:
    """Where traffic goes: what the loop last decided (switch), else the speculative twin."""
    active = (status.get("traffic") or {}).get("active")
    if profile.policy is not None and profile.policy.mode == "switch" and active == "baseline":
        return "baseline"
    return "speculative"


def exploring(profile: Profile, status: Mapping[str, Any]) -> int:
    """The idle twin's share (percent) while the loop explores it (status.loop.explore), else 0:
    a reconcile keeps the split the loop set, and only a share the policy gives (not one that
    someone else wrote into status)."""
    policy = profile.policy
    if policy is None or policy.mode != "switch" or not profile.deploy.baseline:
        return 0
    recorded = Memory.from_status(status.get("loop")).exploring
    return recorded if recorded == explore_share(policy, profile.deploy.replicas) else 0


def traffic_status(profile: Profile, active: Variant, explore: int = 0) -> dict[str, Any]:
    """Where traffic goes: the active twin, the speculative twin's share, and by what."""
    gateway = profile.policy is not None and profile.policy.gateway is not None
    speculative = 100 - explore if active == "speculative" else explore
    return {
        "active": active,
        "share": f"{speculative}%",
        "via": "HTTPRoute" if gateway else "Service",
        # None, not absent: status is merge-patched, and null is what removes the key
        "exploring": f"{explore}% to the {other_twin(active)} twin" if explore else None,
    }


def verdict(profile: Profile, active: Variant) -> str:
    if not profile.speculative:
        return "Baseline"
    return "Speculating" if active == "speculative" else "BaselineServes"


def owner_of(body: Mapping[str, Any]) -> Owner:
    metadata = body.get("metadata") or {}
    return Owner(
        str(metadata["name"]), str(metadata.get("namespace") or "default"), str(metadata["uid"])
    )


def resource_label(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata") or {}
    return f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"


def findings_json(result: PlanResult) -> list[dict[str, Any]]:
    return [_finding(f) for f in result.findings]


def conditions_of(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(c) for c in status.get("conditions") or [] if isinstance(c, dict)]


def set_condition(
    conditions: list[dict[str, Any]],
    kind: ConditionType,
    status: bool | None,
    reason: str,
    message: str,
    generation: Any,
) -> None:
    """Set one condition in place (kept in CONDITION_TYPES order); lastTransitionTime changes
    only when the status does."""
    value = "Unknown" if status is None else str(status)
    old = next((c for c in conditions if c.get("type") == kind), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == value else _now()
    new = {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }
    rest = [c for c in conditions if c.get("type") != kind]
    rest.append(new)
    order = {t: i for i, t in enumerate(CONDITION_TYPES)}
    conditions[:] = sorted(rest, key=lambda c: order.get(c.get("type"), len(order)))  # type: ignore[arg-type]


def _condition(conditions: list[dict[str, Any]], kind: str, key: str = "status") -> Any:
    found = next((c for c in conditions if c.get("type") == kind), None)
    return None if found is None else found.get(key)


def _memory(result: PlanResult) -> tuple[bool | None, str, str]:
    memory = result.memory
    if memory is None:
        return None, "NotEstimated", "no memory estimate (see the Validated findings)"
    if memory.fits:
        return True, "Fits", f"{memory.max_concurrency} sequences of max_model_len fit per replica"
    return False, "OverBudget", "one max_model_len sequence does not fit beside the weights"


def _warnings(plan: DeploymentPlan) -> str:
    warnings = [f for f in plan.findings if f.severity == "warning"]
    if not warnings:
        return "the plan passed every rule"
    return f"{len(warnings)} warning(s): " + "; ".join(f"{f.rule}: {f.what}" for f in warnings)


def object_ref(manifest: Manifest) -> dict[str, str]:
    """How status names an object reconcile applied or left alone (`status.objects`)."""
    return {"apiVersion": manifest.api_version, "kind": manifest.kind, "name": manifest.name}


def owned_ref(manifest: Manifest, live: Mapping[str, Any] | None) -> dict[str, str]:
    """`object_ref` with `fields`: the fingerprint of what specdeploy owns on the object as the
    server answered the apply (`drift.fingerprint`), which the loop compares every interval."""
    ref = object_ref(manifest)
    if live:
        ref["fields"] = drift.fingerprint(live)
    return ref


def refreshed_objects(status: Mapping[str, Any], results: list[ApplyResult]) -> dict[str, Any]:
    """`status.objects` with the fingerprints of objects the loop applied itself (a switch or a
    retune), so that its own apply is never taken for drift."""
    found = status.get("objects")
    objects: dict[str, Any] = dict(found) if isinstance(found, dict) else {}
    listed = objects.get("owned")
    fresh = {ref_name(r): drift.fingerprint(r.live) for r in results if r.live}
    owned = []
    for ref in listed if isinstance(listed, list) else []:
        name = ref_name(ref) if isinstance(ref, dict) else ""
        owned.append({**ref, "fields": fresh[name]} if name in fresh else ref)
    return {**objects, "owned": owned}


class _Named(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...


def ref_name(named: _Named | Mapping[str, Any]) -> str:
    """How Events, `Heal.drifted` and the fingerprints name an object (a manifest, an apply's
    result, or a `status.objects` entry): `Kind/name`."""
    if isinstance(named, Mapping):
        return f"{named.get('kind')}/{named.get('name')}"
    return f"{named.kind}/{named.name}"


#: The kinds the operator applies: the only ones it looks up from status, or deletes.
MANAGED: Final = frozenset((k.api_version, k.kind) for k in KINDS)
#: Most objects `status.objects` lists per group: a resource owns a handful.
MAX_OBJECT_REFS: Final = 32


def object_refs(
    status: Mapping[str, Any], group: Literal["owned", "foreign"], namespace: str
) -> list[Manifest]:
    """`status.objects.<group>` as manifests to look up in the resource's namespace; entries that
    are not refs, or of kinds the operator does not manage, are skipped (status is writable by
    more than this operator)."""
    found = []
    listed = (
        (status.get("objects") or {}).get(group)
        if isinstance(status.get("objects"), dict)
        else None
    )
    for ref in (listed if isinstance(listed, list) else [])[:MAX_OBJECT_REFS]:
        if isinstance(ref, dict) and all(
            isinstance(ref.get(k), str) and ref[k] for k in ("apiVersion", "kind", "name")
        ):
            if (ref["apiVersion"], ref["kind"]) not in MANAGED:
                continue
            body = {
                "apiVersion": ref["apiVersion"],
                "kind": ref["kind"],
                "metadata": {"name": ref["name"], "namespace": namespace},
            }
            found.append(Manifest(body=body, source="status.objects"))
    return found


@dataclass(frozen=True)
class Heal:
    """Why the loop plans and applies a resource again although its spec did not change."""

    why: str = ""
    """Objects deleted, or foreign ones gone: said in a Normal Event `Reconciled`."""
    drifted: tuple[str, ...] = ()
    """Owned objects (`Kind/name`) whose fields someone else changed: a Warning `DriftCorrected`."""


def needs_reconcile(
    cluster: KubernetesCluster, owner: Owner, status: Mapping[str, Any]
) -> Heal | None:
    """What the resource needs planned and applied again although its spec did not change, or
    None: every object it left to someone else is gone or now ours (the ForeignObject condition
    would otherwise never clear), an object it applied was deleted, or someone else changed the
    fields specdeploy owns on one (`drift`); each is healed within an interval. kopf reconciles
    on spec changes only; the control loop asks this every interval, with one read per object."""
    foreign = object_refs(status, "foreign", owner.namespace)
    if foreign and not any(_foreign(cluster.live(m), owner) for m in foreign):
        return Heal(why="the objects that belonged to someone else are gone")
    recorded = _fingerprints(status)
    missing, drifted = [], []
    for manifest in object_refs(status, "owned", owner.namespace):
        live = cluster.live(manifest)
        if live is None:
            missing.append(ref_name(manifest))
        elif drift.drifted(live, recorded.get(ref_name(manifest))):
            drifted.append(ref_name(manifest))
    if not missing and not drifted:
        return None
    why = f"{', '.join(missing)} was deleted; recreated" if missing else ""
    return Heal(why=why, drifted=tuple(drifted))


def _fingerprints(status: Mapping[str, Any]) -> dict[str, str]:
    """`Kind/name` -> the `fields` fingerprint recorded in `status.objects.owned`."""
    objects = status.get("objects")
    listed = objects.get("owned") if isinstance(objects, dict) else None
    return {
        ref_name(ref): ref["fields"]
        for ref in (listed if isinstance(listed, list) else [])[:MAX_OBJECT_REFS]
        if isinstance(ref, dict) and isinstance(ref.get("fields"), str)
    }


def _drift_corrected(
    drifted: Collection[str],
    before: Mapping[str, dict[str, Any] | None],
    after: Mapping[str, dict[str, Any]],
    emit: Emit,
) -> None:
    """The Warning Event for drift taken back: which objects, which fields, from whom."""
    changes = {
        name: drift.taken_back(before[name] or {}, after[name])
        for name in drifted
        if before.get(name) and after.get(name)  # else gone or foreign since the loop looked
    }
    unexplained = sorted(name for name, fields in changes.items() if not fields)
    if unexplained:  # no field changed hands: the recorded fingerprint was not the object's own
        emit(
            "Normal",
            "Reconciled",
            f"{', '.join(unexplained)}: the fingerprint in status.objects.owned did not match "
            "the fields specdeploy owns (status written by someone else?); applied and recorded "
            "again",
        )
    taken = {name: fields for name, fields in changes.items() if fields}
    if taken:
        emit(
            "Warning",
            "DriftCorrected",
            f"changed by another field manager: {drift.describe(taken)}; the operator applied "
            "them again with force (field manager specdeploy), because it keeps what it owns as "
            "the resource plans it. To change them, edit the SpeculativeDeployment's spec instead",
        )


def _prune(
    cluster: KubernetesCluster, owner: Owner, before: list[Manifest], applied: list[Manifest]
) -> list[str]:
    """Delete the objects the last reconcile applied that this one does not (after
    `deploy.baseline: false`, the baseline twin and its GPU), each only while it is still ours:
    owned by this resource, and the same object (a uid precondition)."""
    kept = {(m.api_version, m.kind, m.name) for m in applied}
    deleted = []
    for manifest in before:
        if (manifest.api_version, manifest.kind, manifest.name) in kept:
            continue
        live = cluster.live(manifest)
        if live is None or not owned_by(live, owner):
            continue
        if cluster.delete_object(manifest, str(live["metadata"]["uid"])):
            deleted.append(ref_name(manifest))
    return deleted


def _foreign(live: dict[str, Any] | None, owner: Owner) -> bool:
    return live is not None and not owned_by(live, owner)


def _finding(f: Finding) -> dict[str, Any]:
    out = {"rule": f.rule, "severity": f.severity, "what": f.what, "why": f.why, "fix": f.fix}
    if f.field:
        out["field"] = f.field
    return out


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
