"""Create/update: a resource through the same pipeline as the CLI, then its owned objects.

`reconcile` plans the resource (`plan_profile`, with the in-cluster checkpoint source), writes the
Validated and MemoryFits conditions with the findings, and server-side applies what the plan emits
plus the traffic split, each owned by the resource. An invalid resource gets conditions and an
Event and nothing is applied (no exception: no retry loop). An object of the same name that the
resource does not own is never touched; the Ready condition says which.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from orchestrator.compatibility.rule import Finding
from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from orchestrator.emitters.base import Manifest
from orchestrator.errors import DeployError
from orchestrator.operator.admission import IMAGE_RULE, SECRET_RULE, Admission
from orchestrator.operator.metrics import RECONCILES
from orchestrator.operator.objects import KINDS, Owner, owned_by, owned_manifests
from orchestrator.operator.policy import Memory, Variant
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
found an owned object missing or a foreign one gone."""
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
) -> dict[str, Any]:
    """Plan and apply one resource; returns the status to merge-patch."""
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
    manifests = owned_manifests(result, owner, active)
    foreign = [m for m in manifests if _foreign(cluster, m, owner)]
    applied = [m for m in manifests if m not in foreign]
    cluster.apply(applied)
    pruned = _prune(cluster, owner, object_refs(status, "owned", owner.namespace), applied)
    if pruned:
        emit("Normal", "Pruned", "deleted what the plan no longer has: " + ", ".join(pruned))
    if foreign:
        names = ", ".join(f"{m.kind}/{m.name}" for m in foreign)
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
    traffic = traffic_status(result.profile, active)
    return {
        **out,
        "objects": {
            "owned": [object_ref(m) for m in applied],
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
) -> dict[str, Any]:
    """`reconcile`, counted in specdeploy_operator_reconciles_total by trigger and result."""
    try:
        status = reconcile(body, source, cluster, emit)
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
    """The profile a resource spells: its fields, with only the name and namespace of metadata."""
    metadata = body.get("metadata") or {}
    document = {k: v for k, v in body.items() if k not in ("status", "metadata")}
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


def traffic_status(profile: Profile, active: Variant) -> dict[str, Any]:
    gateway = profile.policy is not None and profile.policy.gateway is not None
    return {
        "active": active,
        "share": "100%" if active == "speculative" else "0%",
        "via": "HTTPRoute" if gateway else "Service",
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


def needs_reconcile(
    cluster: KubernetesCluster, owner: Owner, status: Mapping[str, Any]
) -> str | None:
    """Why the resource must be planned and applied again although its spec did not change, or
    None: every object it left to someone else is gone or now ours (the ForeignObject condition
    would otherwise never clear), or an object it applied was deleted (healed within an
    interval). kopf reconciles on spec changes only; the control loop asks this every interval."""
    foreign = object_refs(status, "foreign", owner.namespace)
    if foreign and not any(_foreign(cluster, m, owner) for m in foreign):
        return "the objects that belonged to someone else are gone"
    missing = [m for m in object_refs(status, "owned", owner.namespace) if cluster.live(m) is None]
    if missing:
        names = ", ".join(f"{m.kind}/{m.name}" for m in missing)
        return f"{names} was deleted; recreated"
    return None


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
            deleted.append(f"{manifest.kind}/{manifest.name}")
    return deleted


def _foreign(cluster: KubernetesCluster, manifest: Manifest, owner: Owner) -> bool:
    live = cluster.live(manifest)
    return live is not None and not owned_by(live, owner)


def _finding(f: Finding) -> dict[str, Any]:
    out = {"rule": f.rule, "severity": f.severity, "what": f.what, "why": f.why, "fix": f.fix}
    if f.field:
        out["field"] = f.field
    return out


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
