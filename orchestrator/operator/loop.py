"""The control loop's tick: scrape both twins, decide (`policy.step`), act, report.

Each twin's ready pods are found by their labels and scraped at `http://<podIP>:<port>/metrics`
(counters summed over replicas). Deltas between two scrapes give the interval's time per output
token, load and acceptance. A switch re-applies the traffic split; a retune re-plans the resource
with the new draft length and applies the speculative twin's workload (a rolling update). Each
decision and its evidence goes into status (`lastDecision`, and `decisions` for changes) and, for
changes, into an Event.

Before that, every owned object is read once (`needs_reconcile`): one deleted is recreated, and
one whose specdeploy-owned fields someone else changed (`drift`) is applied again with force and
named in a Warning Event `DriftCorrected`. Nothing is applied while nothing changed.
"""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

import httpx

from orchestrator.bench.metrics import parse_prometheus
from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from orchestrator.engines import ENGINES
from orchestrator.engines.metrics import Samples
from orchestrator.manifests.context import PROFILE_LABEL, VARIANT_LABEL
from orchestrator.operator.metrics import (
    DECISIONS,
    DROPPED_SERIES_TOTAL,
    SCRAPE_FAILURES_TOTAL,
    SCRAPES,
)
from orchestrator.operator.objects import Owner, own, speculative_workload, traffic_split
from orchestrator.operator.policy import (
    VARIANTS,
    Decision,
    Memory,
    Observation,
    Variant,
    explore_share,
    step,
)
from orchestrator.operator.reconcile import (
    Emit,
    conditions_of,
    counted_reconcile,
    effective_profile,
    needs_reconcile,
    owner_of,
    plan_resource,
    profile_of,
    refreshed_objects,
    set_condition,
    traffic_status,
    verdict,
)
from orchestrator.plan.resolver import CheckpointSource
from orchestrator.plan.types import DeploymentPlan
from orchestrator.profile.schema import PolicySpec, Profile

_log = logging.getLogger("specdeploy.operator")

#: Decisions that changed something, kept in status (newest last).
KEPT_DECISIONS: Final = 20
#: Seconds one pod's /metrics may take in all (connect, headers and body).
SCRAPE_DEADLINE_S: Final = 5.0
#: Largest /metrics body read: vLLM 0.32's is about 64 KiB; a tenant's pod may send anything.
MAX_METRICS_BYTES: Final = 4 << 20
#: Most per-position acceptance series kept (vLLM labels one per drafted position).
MAX_POSITIONS: Final = 64


@dataclass(frozen=True)
class Scrape:
    at: float
    samples: dict[str, Samples]
    """By pod name: counters are differenced per pod, so pods joining or leaving do not count."""


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
    owner = owner_of(body)
    heal = needs_reconcile(cluster, owner, status)
    if heal is not None:
        if heal.why:
            emit("Normal", "Reconciled", f"planned and applied again: {heal.why}")
        return counted_reconcile("loop", body, source, cluster, emit, drifted=heal.drifted)
    profile = profile_of(body)
    policy = profile.policy or PolicySpec()
    now = clock()
    current = {v: scrape_twin(cluster, profile, owner, v) for v in VARIANTS}
    unhealthy = frozenset(v for v in VARIANTS if current[v] is None)
    loop = status.get("loop") or {}
    memory = Memory.from_status(loop)
    _health_events(loop, unhealthy, memory.active, emit)
    health = {"unhealthy": sorted(unhealthy)}
    observation = _observe(profile, owner, current, scrapes, now)
    if observation is not None:
        observation = replace(observation, unhealthy=unhealthy)
    elif policy.mode == "switch" and memory.active in unhealthy and len(unhealthy) == 1:
        observation = Observation(now, 0.0, None, None, None, unhealthy)  # the health gate
    else:
        return {**_ready_condition(body, cluster, profile, owner), "loop": health}
    if loop.get("specTokens") != profile.proposer.num_speculative_tokens:
        memory = Memory(active=memory.active, changed_at=memory.changed_at, latency=memory.latency)
    share = explore_share(policy, profile.deploy.replicas)
    spec_tokens = profile.proposer.num_speculative_tokens
    memory, decision = step(policy, memory, observation, spec_tokens, share)
    DECISIONS.inc(action=decision.action, reason=decision.reason)
    out = _act(body, source, cluster, owner, memory, decision, emit)
    loop_status = {
        **memory.to_status(),
        "specTokens": profile.proposer.num_speculative_tokens,
        **health,
    }
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
        "traffic": traffic_status(profile, decision.active, decision.explore_percent),
        "verdict": verdict(profile, decision.active),
    }


def _health_events(
    loop: Mapping[str, Any], unhealthy: frozenset[str], active: str, emit: Emit
) -> None:
    """A Warning when a twin stops answering (both: traffic holds where it is), a Normal Event
    when it answers again; nothing on the first interval (twins that are starting) or while
    nothing changes, so Events are not repeated every interval."""
    was = loop.get("unhealthy")
    if not isinstance(was, list) or set(was) == unhealthy:
        return
    if unhealthy == set(VARIANTS):
        emit(
            "Warning",
            "NoTwinAnswers",
            f"no pod of either twin answers /metrics; traffic stays on the {active} twin",
        )
    else:
        for variant in sorted(unhealthy - set(was)):
            emit("Warning", "TwinUnhealthy", f"no pod of the {variant} twin answers /metrics")
    for variant in sorted(set(was) - unhealthy):
        emit("Normal", "TwinHealthy", f"the {variant} twin answers /metrics again")


def scrape_twin(
    cluster: KubernetesCluster, profile: Profile, owner: Owner, variant: Variant
) -> dict[str, Samples] | None:
    """The /metrics of each ready pod of the twin, by pod name; None when no pod answers. Each
    read is bounded (see `read_metrics`) and keeps only what the loop uses, so a tenant's pod
    cannot grow the operator's memory or its status."""
    labels = {PROFILE_LABEL: profile.metadata.name, VARIANT_LABEL: variant}
    pods = cluster.list_objects("v1", "Pod", owner.namespace, labels)
    positions = profile.proposer.num_speculative_tokens or MAX_POSITIONS
    found: dict[str, Samples] = {}
    for pod in pods:
        ip = (pod.get("status") or {}).get("podIP")
        if not ip or not _pod_ready(pod):
            continue
        text = read_metrics(f"http://{ip}:{profile.serving.port}/metrics")
        if text is None:
            continue
        samples = parse_prometheus(text, by_label="position")
        found[str(pod["metadata"]["name"])] = _kept(samples, min(positions, MAX_POSITIONS))
    return found or None


def read_metrics(url: str) -> str | None:
    """One pod's exposition, or None (logged, and counted by reason) when it does not answer
    within SCRAPE_DEADLINE_S in all, sends more than MAX_METRICS_BYTES, or is not UTF-8. A slow
    drip cannot hold an interval: the deadline covers the whole read, not each chunk."""
    SCRAPES.inc()
    deadline = time.monotonic() + SCRAPE_DEADLINE_S
    body = bytearray()
    try:
        with httpx.stream("GET", url, timeout=SCRAPE_DEADLINE_S, trust_env=False) as response:
            if response.status_code != 200:
                return _failed(url, "http_status", f"HTTP {response.status_code}")
            for chunk in response.iter_raw():  # as read: a chunk size would wait for it to fill
                body += chunk
                if len(body) > MAX_METRICS_BYTES:
                    return _failed(url, "too_large", f"more than {MAX_METRICS_BYTES} bytes")
                if time.monotonic() > deadline:
                    return _failed(url, "timeout", f"not read within {SCRAPE_DEADLINE_S:.0f} s")
    except httpx.TimeoutException as exc:
        return _failed(url, "timeout", type(exc).__name__)
    except httpx.HTTPError as exc:
        return _failed(url, "connection", type(exc).__name__)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return _failed(url, "not_utf8", "not UTF-8")


def _failed(url: str, reason: str, detail: str) -> str | None:
    """No exposition (what `read_metrics` answers), logged and counted by reason."""
    _log.warning("scrape %s: %s, skipped", url, detail)
    SCRAPE_FAILURES_TOTAL.inc(reason=reason)
    return None


def _kept(samples: Samples, positions: int) -> Samples:
    """Finite values only, and per-position series only for positions the proposer drafts."""
    kept: dict[str, float] = {}
    dropped = {"non_finite": 0, "position": 0}
    for name, value in samples.items():
        if not math.isfinite(value):
            dropped["non_finite"] += 1
            continue
        if "{" in name:
            position = name.rsplit('="', 1)[-1].rstrip('"}')
            if not position.isdigit() or int(position) >= positions:
                dropped["position"] += 1
                continue
        kept[name] = value
    for reason, count in dropped.items():
        DROPPED_SERIES_TOTAL.inc(count, reason=reason)
    return kept


def _counter(name: str) -> bool:
    """Prometheus counters (and histogram parts) only grow while their process lives."""
    return name.split("{", 1)[0].endswith(("_total", "_sum", "_count", "_bucket"))


def _common_sums(
    before: dict[str, Samples], after: dict[str, Samples]
) -> tuple[Samples, Samples, int] | None:
    """Both scrapes summed over the pods present in both whose counters did not go back (a
    restarted pod starts from zero), and how many pods that is: a pod joining or leaving changes
    neither sum, so the difference is the interval's traffic. None when no pod is comparable."""
    first: dict[str, float] = {}
    second: dict[str, float] = {}
    pods = 0
    for pod, now in after.items():
        then = before.get(pod)
        if then is None or any(
            _counter(name) and now.get(name, value) < value for name, value in then.items()
        ):
            continue
        pods += 1
        for name, value in then.items():
            first[name] = first.get(name, 0.0) + value
        for name, value in now.items():
            second[name] = second.get(name, 0.0) + value
    return (first, second, pods) if second else None


def _observe(
    profile: Profile,
    owner: Owner,
    current: Mapping[Variant, dict[str, Samples] | None],
    scrapes: Scrapes,
    now: float,
) -> Observation | None:
    """The interval since the previous scrape, or None on the first one (only remembered)."""
    engine = ENGINES[profile.engine.name].metrics
    windows: dict[str, Any] = {}
    pods: dict[str, int] = {}
    previous_at = None
    for variant, samples in current.items():
        key = (owner.uid, variant)
        before = scrapes.last.get(key)
        if samples is None:
            scrapes.last.pop(key, None)
            continue
        scrapes.last[key] = Scrape(now, samples)
        sums = None if before is None else _common_sums(before.samples, samples)
        if before is None or sums is None:
            continue
        previous_at = before.at if previous_at is None else min(previous_at, before.at)
        first, second, pods[variant] = sums
        windows[variant] = (engine.serving(first, second), engine.acceptance(first, second))
    if previous_at is None:
        return None
    speculative = windows.get("speculative", (None, None))
    baseline = windows.get("baseline", (None, None))
    return Observation(
        now, now - previous_at, speculative[0], baseline[0], speculative[1], pods=pods
    )


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
        results = cluster.apply(
            [own(traffic_split(plan, decision.active), owner)], force_conflicts=True
        )
        failover = decision.reason == "ActiveUnhealthy"
        emit(
            "Warning" if failover else "Normal",
            decision.reason if failover else "Switched",
            decision.message,
        )
    elif decision.action == "explore":
        split = traffic_split(plan, decision.active, decision.explore_percent)
        results = cluster.apply([own(split, owner)], force_conflicts=True)
        aborted = decision.reason == "ExploreAborted"
        emit("Warning" if aborted else "Normal", decision.reason, decision.message)
    else:
        results = cluster.apply(speculative_workload(plan, owner), force_conflicts=True)
        emit("Normal", "Retuned", decision.message + " (rolling update of the speculative twin)")
    return {"objects": refreshed_objects(status, results)}


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
