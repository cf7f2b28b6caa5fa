"""The control loop's decisions, as pure functions of what was measured (no cluster, no clock).

Each interval the operator turns both twins' /metrics into an `Observation` and calls `step`
with the loop's `Memory` (kept in the resource's status between intervals). `step` smooths what
it saw (exponential moving averages, so SGLang's last-batch gauges and a noisy interval do not
decide alone), remembers each twin's request time per output token per load level, and returns
the new memory and one `Decision` with its evidence.

* switch: health first: when no pod of the active twin answers and the other twin's do, traffic
  moves at once. Otherwise traffic goes to the twin with the lower request time per output token
  *at the current load* (requests in the server per pod, by Little's law): its finished requests'
  end-to-end latencies over their output tokens (`Serving.seconds_per_token`), queueing included.
  Not the engine's TPOT: a twin that admits fewer requests at once (a step budget spent on
  drafts, less KV room beside a draft model) decodes those faster while the rest queue, and TPOT
  starts at the first token. The other twin must be faster
  by `hysteresis`, and no change happens within `dwell_seconds` of the last one, so traffic never
  flaps. All traffic never goes to a twin not timed at the current load: it is timed from
  mirrored traffic, or by exploring with at most `explore_percent` of the traffic (`explore`).
* retune: `num_speculative_tokens` follows the per-position acceptance: lowered to the positions
  accepted at least `lower_below` of the time, raised by one while the deepest is accepted at
  least `raise_above` of the time; also at most one change per dwell time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from orchestrator.engines.metrics import Acceptance, Serving
from orchestrator.profile.schema import PolicySpec

Variant = Literal["speculative", "baseline"]
Action = Literal["hold", "switch", "retune", "explore"]
VARIANTS: Final[tuple[Variant, Variant]] = ("speculative", "baseline")
#: Intervals the active twin is measured alone at a load before the idle twin is tried there.
EXPLORE_AFTER: Final = 3
#: A remembered request time per output token older than this many dwell times is forgotten.
MEMORY_DWELLS: Final = 10
#: Two twins whose pods finished requests at rates within this factor got the same offered load
#: per pod (mirrored traffic, or a split in proportion to their pods): both are filed under one
#: load level, the mean of theirs, so that the faster twin (fewer requests in the server at the
#: same arrival rate) is not filed under a lower level than the slower one.
SAME_ARRIVALS: Final = 1.5


@dataclass(frozen=True)
class Observation:
    """One interval of both twins' /metrics (None: not scraped, or no data)."""

    at: float
    """Wall-clock seconds (the end of the interval)."""
    interval_s: float
    speculative: Serving | None
    baseline: Serving | None
    acceptance: Acceptance | None
    """The speculative twin's acceptance over the interval."""
    unhealthy: frozenset[Variant] = frozenset()
    """Twins none of whose pods answered /metrics this interval (no ready pod, or all silent)."""
    pods: Mapping[str, int] = field(default_factory=dict)
    """Pods of each twin whose counters the interval's figures sum (1 when not given)."""

    def serving(self, variant: Variant) -> Serving | None:
        return self.speculative if variant == "speculative" else self.baseline

    def per_pod(self, variant: Variant) -> tuple[float, float] | None:
        """(requests in the server, requests finished per second), per pod of the twin; None
        when it finished nothing."""
        serving = self.serving(variant)
        if serving is None or serving.finished <= 0 or self.interval_s <= 0:
            return None
        pods = max(1, self.pods.get(variant, 1))
        return serving.busy_s / self.interval_s / pods, serving.finished / self.interval_s / pods


@dataclass(frozen=True)
class Memory:
    """What the loop carries from one interval to the next (status.loop)."""

    active: Variant = "speculative"
    changed_at: float | None = None
    """When traffic last moved or the draft length last changed."""
    latency: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    """variant -> load level -> (smoothed request seconds per output token, when last
    updated)."""
    alone: int = 0
    """Consecutive intervals the active twin served while the idle one finished nothing."""
    acceptance_length: float | None = None
    acceptance_rate: float | None = None
    per_position: tuple[float, ...] = ()
    num_speculative_tokens: int | None = None
    """The draft length retune set (None: the spec's)."""
    exploring: int = 0
    """Percent of the traffic the idle twin gets while it is timed (0: not exploring)."""
    explored_at: float | None = None
    """When the exploring began."""

    def to_status(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "changedAt": self.changed_at,
            "latencyPerToken": {
                v: {b: list(e) for b, e in lv.items()} for v, lv in self.latency.items()
            },
            "alone": self.alone,
            "acceptanceLength": self.acceptance_length,
            "acceptanceRate": self.acceptance_rate,
            "perPosition": list(self.per_position),
            "numSpeculativeTokens": self.num_speculative_tokens,
            "explore": {"percent": self.exploring, "since": self.explored_at}
            if self.exploring
            else None,
        }

    @classmethod
    def from_status(cls, raw: Any) -> Memory:
        """The memory a status holds; a fresh one when it holds none (or garbage). The TPOT
        earlier releases of the operator remembered there (`tpot`) is not read: it is another
        quantity, so each twin is timed again."""
        if not isinstance(raw, dict):
            return cls()
        try:
            latency = {
                str(v): {str(b): (float(e[0]), float(e[1])) for b, e in lv.items()}
                for v, lv in (raw.get("latencyPerToken") or {}).items()
            }
            active = raw.get("active")
            k = raw.get("numSpeculativeTokens")
            recorded = raw.get("explore")
            explore: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
            since, percent = _float(explore.get("since")), int(explore.get("percent") or 0)
            # an explore without a finite start, or past the bound, is none (a forged status)
            explored = since is not None and math.isfinite(since) and 0 < percent <= 50
            return cls(
                active=active if active in VARIANTS else "speculative",
                changed_at=_float(raw.get("changedAt")),
                latency=latency,
                alone=int(raw.get("alone") or 0),
                acceptance_length=_float(raw.get("acceptanceLength")),
                acceptance_rate=_float(raw.get("acceptanceRate")),
                per_position=tuple(float(p) for p in raw.get("perPosition") or ()),
                num_speculative_tokens=int(k) if k is not None else None,
                exploring=percent if explored else 0,
                explored_at=since if explored else None,
            )
        except (TypeError, ValueError, IndexError, AttributeError):
            return cls()


@dataclass(frozen=True)
class Decision:
    """What the loop did this interval, why, and the figures behind it."""

    action: Action
    reason: str
    """CamelCase, for the Event and the Speculating condition."""
    message: str
    evidence: dict[str, Any]
    active: Variant
    num_speculative_tokens: int | None = None
    explore_percent: int = 0
    """The idle twin's share of the traffic after this decision (0: none)."""


def step(
    policy: PolicySpec,
    memory: Memory,
    obs: Observation,
    spec_tokens: int,
    explore: int | None = None,
) -> tuple[Memory, Decision]:
    """Fold one observation into the memory and decide; `spec_tokens` is the spec's draft length,
    `explore` the share (percent) of traffic the route can give the idle twin to time it (None:
    it cannot, within policy.explore_percent: `explore_share`)."""
    if memory.exploring and memory.exploring != explore:
        # a share the policy does not give now (explore_percent edited, or status written by
        # someone else): not exploring
        memory = replace(memory, exploring=0, explored_at=None)
    memory = observe(policy, memory, obs)
    if policy.mode == "switch":
        return decide_switch(policy, memory, obs, explore)
    if policy.mode == "retune":
        return decide_retune(policy, memory, obs, spec_tokens)
    evidence = _evidence(memory, obs, levels(obs).get(memory.active))
    return memory, Decision("hold", "Static", "policy.mode is static", evidence, memory.active)


def explore_share(policy: PolicySpec, pods_per_twin: int) -> int | None:
    """The share (percent) of traffic exploring gives the idle twin, or None when the route
    cannot keep it within policy.explore_percent: an HTTPRoute splits by weight, so the idle twin
    gets explore_percent; the front Service splits by pod, so it gets its share of the pods
    (half, both twins having deploy.replicas)."""
    bound = policy.explore_percent
    if bound is None or pods_per_twin < 1:
        return None
    if policy.gateway is not None:
        return bound
    return 50 if bound >= 50 else None


def observe(policy: PolicySpec, memory: Memory, obs: Observation) -> Memory:
    """The memory with this interval's measurements folded into its moving averages."""
    latency = {v: dict(levels_) for v, levels_ in memory.latency.items()}
    horizon = obs.at - MEMORY_DWELLS * policy.dwell_seconds
    filed = levels(obs)
    for variant in VARIANTS:
        serving = obs.serving(variant)
        level = filed.get(variant)
        kept = {b: e for b, e in latency.get(variant, {}).items() if e[1] >= horizon}
        measured = None if serving is None else serving.seconds_per_token
        enough = serving is not None and serving.finished >= policy.min_requests
        if measured is not None and level is not None and enough:
            old = kept.get(level)
            value = measured if old is None else _ewma(old[0], measured, policy)
            kept[level] = (value, obs.at)
        latency[variant] = kept
    idle = obs.serving(other_twin(memory.active))
    served_alone = idle is None or idle.finished == 0
    memory = replace(memory, latency=latency, alone=memory.alone + 1 if served_alone else 0)
    return _observe_acceptance(policy, memory, obs.acceptance)


def _observe_acceptance(policy: PolicySpec, memory: Memory, accepted: Acceptance | None) -> Memory:
    if accepted is None:
        return memory
    length = _smooth(memory.acceptance_length, accepted.mean_acceptance_length, policy)
    rate = _smooth(memory.acceptance_rate, accepted.acceptance_rate, policy)
    positions = memory.per_position
    if accepted.per_position is not None:
        fresh = accepted.per_position
        if len(fresh) == len(positions):
            positions = tuple(_ewma(a, b, policy) for a, b in zip(positions, fresh, strict=True))
        else:  # first sample, or the draft length changed: start over
            positions = fresh
    return replace(memory, acceptance_length=length, acceptance_rate=rate, per_position=positions)


def decide_switch(
    policy: PolicySpec, memory: Memory, obs: Observation, explore: int | None = None
) -> tuple[Memory, Decision]:
    """Keep or move traffic: the faster twin at the current load, with hysteresis and dwell. A
    twin not timed at that load gets at most `explore` percent of the traffic until it is."""
    active, other = memory.active, other_twin(memory.active)
    level = levels(obs).get(active)
    evidence = _evidence(memory, obs, level)
    if memory.exploring:
        evidence["explorePercent"] = memory.exploring
    if active in obs.unhealthy and other not in obs.unhealthy:
        # Health before speed, as Argo Rollouts and Flagger gate on health first: no dwell and
        # no evidence needed to leave a twin that cannot serve for one that answers.
        why = f"no pod of the {active} twin answers; traffic to the {other} twin, which does"
        return _switch(memory, obs, "ActiveUnhealthy", why, evidence)
    if memory.exploring and other in obs.unhealthy:
        why = f"the explored {other} twin stopped answering: all traffic back to the {active} twin"
        return _explore(memory, obs, 0, "ExploreAborted", why, evidence)
    if level is None:
        why = f"the {active} twin finished no request"
        return memory, _hold("Idle", why, evidence, active, explore=memory.exploring)
    mine = memory.latency.get(active, {}).get(level)
    theirs = memory.latency.get(other, {}).get(level)
    if mine is None:
        why = f"too few finished requests to time the {active} twin at load {level}"
        return memory, _hold("NoEvidence", why, evidence, active, explore=memory.exploring)
    waited = _dwell_left(policy, memory, obs.at)
    if theirs is None:
        return _explore_or_hold(policy, memory, obs, level, explore, waited, evidence)
    ratio = theirs[0] / mine[0]
    evidence["latencyRatio"] = round(ratio, 3)
    figures = (
        f"at load {level}: {other} {theirs[0] * 1000:.1f} ms of request time per output token, "
        f"{active} {mine[0] * 1000:.1f} ms ({ratio:.2f}x)"
    )
    if ratio > 1 - policy.hysteresis:
        reason = "Winning" if ratio >= 1 else "WithinHysteresis"
        return _held(memory, obs, reason, f"{active} stays: {figures}", evidence)
    if waited > 0 and not memory.exploring:
        why = f"{other} is faster ({figures}) but the last change was {waited:.0f} s too recent"
        return memory, _hold("Dwelling", why, evidence, active)
    reason = "SpeculationWins" if other == "speculative" else "BaselineWins"
    return _switch(memory, obs, reason, f"traffic to {other}: {figures}", evidence)


def _explore_or_hold(
    policy: PolicySpec,
    memory: Memory,
    obs: Observation,
    level: str,
    explore: int | None,
    waited: float,
    evidence: dict[str, Any],
) -> tuple[Memory, Decision]:
    """The idle twin was never timed at the current load: explore with a bounded share of the
    traffic (never all of it), keep exploring until it is timed there, and stop after a dwell
    time if the share cannot load it as the active twin is loaded."""
    active, other = memory.active, other_twin(memory.active)
    if memory.exploring:
        assert memory.explored_at is not None
        timed_at = levels(obs).get(other)
        if obs.at - memory.explored_at < policy.dwell_seconds:
            why = (
                f"{memory.exploring}% of the traffic goes to the {other} twin to time it at load "
                f"{level}" + (f" (timed at load {timed_at} so far)" if timed_at else "")
            )
            return memory, _hold("Exploring", why, evidence, active, explore=memory.exploring)
        why = (
            f"{memory.exploring}% of the traffic for {policy.dwell_seconds} s timed the {other} "
            f"twin at load {timed_at or 'none'} per pod, not at the {active} twin's {level}: a "
            "share that small cannot load it as much (mirror traffic to it, or give the idle "
            "twin fewer pods than the active one); all traffic back to the active twin"
        )
        return _explore(memory, obs, 0, "ExploreInconclusive", why, evidence)
    if explore is None:
        why = (
            f"the {other} twin was never timed at load {level}: mirror traffic to it, or set "
            "policy.explore_percent (with policy.gateway, any share up to 50; with the front "
            "Service, 50: it splits by pod)"
        )
        return memory, _hold("NoEvidence", why, evidence, active)
    if memory.alone < EXPLORE_AFTER or waited > 0:
        why = f"the {other} twin was never timed at load {level}; exploring after a quiet dwell"
        return memory, _hold("NoEvidence", why, evidence, active)
    why = f"the {other} twin was never timed at load {level}: {explore}% of the traffic to it"
    return _explore(memory, obs, explore, "Exploring", why, evidence)


def decide_retune(
    policy: PolicySpec, memory: Memory, obs: Observation, spec_tokens: int
) -> tuple[Memory, Decision]:
    """Keep or change the draft length from the smoothed per-position acceptance."""
    current = memory.num_speculative_tokens or spec_tokens
    level = levels(obs).get("speculative")
    evidence = _evidence(memory, obs, level)
    evidence["numSpeculativeTokens"] = current
    positions, rules = memory.per_position, policy.retune
    if len(positions) != current:
        why = f"no per-position acceptance measured yet for num_speculative_tokens={current}"
        return memory, _hold("NoEvidence", why, evidence, memory.active, current)
    wanted = proposed_length(positions, policy)
    shares = ", ".join(f"{p:.2f}" for p in positions)
    if wanted == current:
        why = f"per-position acceptance [{shares}] keeps num_speculative_tokens={current}"
        return memory, _hold("Tuned", why, evidence, memory.active, current)
    waited = _dwell_left(policy, memory, obs.at)
    if waited > 0:
        why = f"would set num_speculative_tokens={wanted}, but the last change was {waited:.0f} s too recent"
        return memory, _hold("Dwelling", why, evidence, memory.active, current)
    bound = rules.lower_below if wanted < current else rules.raise_above
    why = (
        f"num_speculative_tokens {current} -> {wanted}: per-position acceptance [{shares}] "
        f"against {'lower_below' if wanted < current else 'raise_above'}={bound}"
    )
    memory = replace(memory, num_speculative_tokens=wanted, per_position=(), changed_at=obs.at)
    return memory, Decision("retune", "Retuned", why, evidence, memory.active, wanted)


def proposed_length(positions: tuple[float, ...], policy: PolicySpec) -> int:
    """The draft length the per-position acceptance asks for (within min/max_tokens)."""
    rules, current = policy.retune, len(positions)
    if positions[-1] < rules.lower_below:
        kept = next(i for i, p in enumerate(positions) if p < rules.lower_below)
        return max(rules.min_tokens, kept)
    if positions[-1] >= rules.raise_above and current < rules.max_tokens:
        return current + 1
    return current


def levels(obs: Observation) -> dict[Variant, str]:
    """The load level each twin that served requests is filed under: requests in the server per
    pod (Little's law). Twins whose pods got the same arrivals (SAME_ARRIVALS: mirrored traffic,
    or a split in proportion to their pods) share the mean of their levels, so they compare at
    equal load; otherwise (an explore share below that) each has its own."""
    loads = {v: per for v in VARIANTS if (per := obs.per_pod(v)) is not None}
    if len(loads) == 2:
        (load_a, rate_a), (load_b, rate_b) = loads.values()
        if max(rate_a, rate_b) <= SAME_ARRIVALS * min(rate_a, rate_b):
            common = level_of((load_a + load_b) / 2)
            return dict.fromkeys(loads, common)
    return {v: level_of(load) for v, (load, _) in loads.items()}


def level_of(requests_in_server: float) -> str:
    """ "1", "2", "3-4", "5-8", ...: requests in the server (mean over the interval, by Little's
    law), in doubling ranges: close loads compare, distant ones do not."""
    load = max(requests_in_server, 1.0)
    top = 2 ** math.ceil(math.log2(load) - 1e-9)
    low = top // 2 + 1
    return str(top) if low >= top else f"{low}-{top}"


def _switch(
    memory: Memory, obs: Observation, reason: str, message: str, evidence: dict[str, Any]
) -> tuple[Memory, Decision]:
    target = other_twin(memory.active)
    memory = replace(
        memory, active=target, changed_at=obs.at, alone=0, exploring=0, explored_at=None
    )
    return memory, Decision("switch", reason, message, evidence, target)


def _explore(
    memory: Memory,
    obs: Observation,
    percent: int,
    reason: str,
    message: str,
    evidence: dict[str, Any],
) -> tuple[Memory, Decision]:
    """Give the idle twin `percent` of the traffic (0: end exploring, all to the active twin)."""
    since = obs.at if percent else None
    changed = memory.changed_at if percent else obs.at
    memory = replace(memory, exploring=percent, explored_at=since, changed_at=changed, alone=0)
    decision = Decision("explore", reason, message, evidence, memory.active, None, percent)
    return memory, decision


def _held(
    memory: Memory, obs: Observation, reason: str, message: str, evidence: dict[str, Any]
) -> tuple[Memory, Decision]:
    """Hold: while exploring, the comparison it was for is made, so exploring ends."""
    if memory.exploring:
        return _explore(memory, obs, 0, reason, message + "; exploring ends", evidence)
    return memory, _hold(reason, message, evidence, memory.active)


def _hold(
    reason: str,
    message: str,
    evidence: dict[str, Any],
    active: Variant,
    k: int | None = None,
    *,
    explore: int = 0,
) -> Decision:
    return Decision("hold", reason, message, evidence, active, k, explore)


def _evidence(memory: Memory, obs: Observation, level: str | None) -> dict[str, Any]:
    """The figures behind a decision, as they go into status and Events."""
    out: dict[str, Any] = {"load": level, "active": memory.active}
    for variant in VARIANTS:
        serving = obs.serving(variant)
        smoothed = memory.latency.get(variant, {}).get(level or "")
        measured = None if serving is None else serving.seconds_per_token
        out[variant] = {
            "latencyPerTokenMs": None if measured is None else round(measured * 1000, 2),
            "smoothedLatencyPerTokenMs": None if smoothed is None else round(smoothed[0] * 1000, 2),
            "tpotMs": None
            if serving is None or serving.tpot_s is None
            else round(serving.tpot_s * 1000, 2),
            "finished": None if serving is None else serving.finished,
            "requestsInServer": None
            if serving is None
            else round(serving.busy_s / obs.interval_s, 2),
        }
    out["acceptanceLength"] = _round(memory.acceptance_length)
    out["acceptanceRate"] = _round(memory.acceptance_rate)
    out["perPosition"] = [round(p, 3) for p in memory.per_position]
    return out


def _dwell_left(policy: PolicySpec, memory: Memory, now: float) -> float:
    if memory.changed_at is None:
        return 0.0
    return max(0.0, memory.changed_at + policy.dwell_seconds - now)


def other_twin(variant: Variant) -> Variant:
    return "baseline" if variant == "speculative" else "speculative"


def _ewma(old: float, new: float, policy: PolicySpec) -> float:
    return policy.smoothing * new + (1 - policy.smoothing) * old


def _smooth(old: float | None, new: float | None, policy: PolicySpec) -> float | None:
    if new is None:
        return old
    return new if old is None else _ewma(old, new, policy)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
