"""The control loop's tick: scrape both twins, decide (`policy.step`), act, report.

Each twin's ready pods are found by their labels and scraped at `http://<podIP>:<port>/metrics`
(counters summed over replicas). Deltas between two scrapes give the interval's time per output
token, load and acceptance. A switch re-applies the traffic split; a retune re-plans the resource
with the new draft length and applies the speculative twin's workload (a rolling update). Each
decision and its evidence goes into status (`lastDecision`, and `decisions` for changes) and, for
changes, into an Event.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from orchestrator.bench.metrics import parse_prometheus
from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from orchestrator.engines import ENGINES
from orchestrator.engines.metrics import Samples
from orchestrator.manifests.context import PROFILE_LABEL, VARIANT_LABEL
from orchestrator.operator.objects import Owner, own, speculative_workload, traffic_split
from orchestrator.operator.policy import Decision, Memory, Observation, Variant, step
from orchestrator.operator.reconcile import (
    Emit,
    conditions_of,
    effective_profile,
    owner_of,
    plan_resource,
    profile_of,
    set_condition,
    traffic_status,
    verdict,
)
from orchestrator.plan.resolver import CheckpointSource
from orchestrator.plan.types import DeploymentPlan
from orchestrator.profile.schema import PolicySpec, Profile

#: Decisions that changed something, kept in status (newest last).
KEPT_DECISIONS: Final = 20
SCRAPE_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True)
class Scrape:
    at: float
    samples: Samples


@dataclass
class Scrapes:
    """The previous scrape of each twin of each resource (counters need two)."""

    last: dict[tuple[str, str], Scrape] = field(default_factory=dict)


def tick(
    body: Mapping[str, Any],
    source: CheckpointSource,
    cluster: KubernetesCluster,
    scrapes: Scrapes,
    emit: Emit,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any] | None:
    """One interval for one resource; the status to merge-patch, or None when nothing to do."""
    status = body.get("status") or {}
    if status.get("verdict") in (None, "Invalid"):
        return None  # not planned (yet), or invalid: nothing runs to measure
    profile = profile_of(body)
    policy = profile.policy or PolicySpec()
    owner = owner_of(body)
    now = clock()
    current = {v: scrape_twin(cluster, profile, owner, v) for v in ("speculative", "baseline")}
    observation = _observe(profile, owner, current, scrapes, now)
    if observation is None:
        return _ready_condition(body, cluster, profile, owner)
    loop = status.get("loop") or {}
    memory = Memory.from_status(loop)
    if loop.get("specTokens") != profile.proposer.num_speculative_tokens:
        memory = Memory(active=memory.active, changed_at=memory.changed_at, tpot=memory.tpot)
    memory, decision = step(policy, memory, observation, profile.proposer.num_speculative_tokens)
    out = _act(body, source, cluster, owner, memory, decision, emit)
    loop_status = {**memory.to_status(), "specTokens": profile.proposer.num_speculative_tokens}
    record = _record(decision, now)
    decisions = list(status.get("decisions") or [])
    if decision.action != "hold":
        decisions = [*decisions, record][-KEPT_DECISIONS:]
    acceptance = {
        "meanLength": memory.acceptance_length,
        "rate": memory.acceptance_rate,
        "perPosition": list(memory.per_position),
    }
    conditions = conditions_of(status)
    _speculating(conditions, profile, decision, body)
    return {
        **out,
        "loop": loop_status,
        "lastDecision": record,
        "decisions": decisions,
        "acceptance": acceptance,
        "conditions": _with_ready(conditions, cluster, profile, owner, body),
        "traffic": traffic_status(profile, decision.active),
        "verdict": verdict(profile, decision.active),
    }


def scrape_twin(
    cluster: KubernetesCluster, profile: Profile, owner: Owner, variant: Variant
) -> Samples | None:
    """The twin's /metrics summed over its ready pods; None when no pod answers."""
    labels = {PROFILE_LABEL: profile.metadata.name, VARIANT_LABEL: variant}
    pods = cluster.list_objects("v1", "Pod", owner.namespace, labels)
    total: dict[str, float] = {}
    answered = False
    for pod in pods:
        ip = (pod.get("status") or {}).get("podIP")
        if not ip or not _pod_ready(pod):
            continue
        try:
            text = httpx.get(
                f"http://{ip}:{profile.serving.port}/metrics",
                timeout=SCRAPE_TIMEOUT_S,
                trust_env=False,
            ).text
        except httpx.HTTPError:
            continue
        answered = True
        for name, value in parse_prometheus(text, by_label="position").items():
            total[name] = total.get(name, 0.0) + value
    return total if answered else None


def _observe(
    profile: Profile,
    owner: Owner,
    current: dict[str, Samples | None],
    scrapes: Scrapes,
    now: float,
) -> Observation | None:
    """The interval since the previous scrape, or None on the first one (only remembered)."""
    engine = ENGINES[profile.engine.name].metrics
    windows: dict[str, Any] = {}
    previous_at = None
    for variant, samples in current.items():
        key = (owner.uid, variant)
        before = scrapes.last.get(key)
        if samples is None:
            scrapes.last.pop(key, None)
            continue
        scrapes.last[key] = Scrape(now, samples)
        if before is None:
            continue
        previous_at = before.at if previous_at is None else min(previous_at, before.at)
        windows[variant] = (
            engine.serving(before.samples, samples),
            engine.acceptance(before.samples, samples),
        )
    if previous_at is None:
        return None
    speculative = windows.get("speculative", (None, None))
    baseline = windows.get("baseline", (None, None))
    return Observation(now, now - previous_at, speculative[0], baseline[0], speculative[1])


def _act(
    body: Mapping[str, Any],
    source: CheckpointSource,
    cluster: KubernetesCluster,
    owner: Owner,
    memory: Memory,
    decision: Decision,
    emit: Emit,
) -> dict[str, Any]:
    if decision.action == "hold":
        return {}
    status = {
        **(body.get("status") or {}),
        "loop": {
            **memory.to_status(),
            "specTokens": profile_of(body).proposer.num_speculative_tokens,
        },
    }
    plan = plan_resource({**body, "status": status}, source)
    if not isinstance(plan, DeploymentPlan):
        emit("Warning", "NotApplied", f"{decision.message}; but the resource no longer plans")
        return {}
    if decision.action == "switch":
        cluster.apply([own(traffic_split(plan, decision.active), owner)])
        emit("Normal", "Switched", decision.message)
    else:
        cluster.apply(speculative_workload(plan, owner))
        emit("Normal", "Retuned", decision.message + " (rolling update of the speculative twin)")
    return {}


def _record(decision: Decision, now: float) -> dict[str, Any]:
    return {
        "time": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "at": round(now, 3),
        "action": decision.action,
        "reason": decision.reason,
        "message": decision.message,
        "active": decision.active,
        "numSpeculativeTokens": decision.num_speculative_tokens,
        "evidence": decision.evidence,
    }


def _speculating(
    conditions: list[dict[str, Any]], profile: Profile, decision: Decision, body: Mapping[str, Any]
) -> None:
    generation = (body.get("metadata") or {}).get("generation")
    on = decision.active == "speculative" and profile.speculative
    set_condition(conditions, "Speculating", on, decision.reason, decision.message, generation)


def _with_ready(
    conditions: list[dict[str, Any]],
    cluster: KubernetesCluster,
    profile: Profile,
    owner: Owner,
    body: Mapping[str, Any],
) -> list[dict[str, Any]]:
    current = next((c for c in conditions if c.get("type") == "Ready"), {})
    if current.get("reason") == "ForeignObject":
        return conditions
    generation = (body.get("metadata") or {}).get("generation")
    ready, message = _ready(cluster, profile, owner)
    set_condition(
        conditions, "Ready", ready, "TwinsReady" if ready else "TwinsNotReady", message, generation
    )
    return conditions


def _ready_condition(
    body: Mapping[str, Any], cluster: KubernetesCluster, profile: Profile, owner: Owner
) -> dict[str, Any]:
    conditions = conditions_of(body.get("status") or {})
    return {"conditions": _with_ready(conditions, cluster, profile, owner, body)}


def _ready(cluster: KubernetesCluster, profile: Profile, owner: Owner) -> tuple[bool, str]:
    """Every owned Deployment has its replicas ready."""
    deployments = cluster.list_objects(
        "apps/v1", "Deployment", owner.namespace, {PROFILE_LABEL: profile.metadata.name}
    )
    if not deployments:
        return False, "no Deployment of this resource yet"
    waiting = []
    for item in deployments:
        wanted = int((item.get("spec") or {}).get("replicas", 1))
        ready = int((item.get("status") or {}).get("readyReplicas") or 0)
        if ready < wanted:
            waiting.append(f"{item['metadata']['name']} {ready}/{wanted}")
    return (
        not waiting,
        "every twin is ready" if not waiting else "waiting for " + ", ".join(waiting),
    )


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


__all__ = ["Scrapes", "effective_profile", "tick"]
