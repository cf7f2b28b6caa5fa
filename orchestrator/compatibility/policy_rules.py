"""Policy rules: an operator policy the profile's engine cannot feed. `switch` compares the twins'
request time per output token, which needs a per-request end-to-end latency histogram and a count
of the finished requests' output tokens in the engine's /metrics;
`retune` reads acceptance per drafted position. Where the engine exposes neither, the operator
would hold the traffic and the draft length as `static` does, forever, while the resource says
`switch` or `retune`."""

from __future__ import annotations

from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.compatibility.unchecked import at_field
from orchestrator.engines import ENGINES

#: What each mode reads from the engine's /metrics (an attribute of its `EngineMetrics`).
_NEEDS = {
    "switch": (
        "times_requests",
        "a per-request end-to-end latency histogram with the finished requests' output tokens",
    ),
    "retune": ("accepts_per_position", "speculative acceptance counted per drafted position"),
}


@rule(
    "engine.policy-cannot-act",
    source="orchestrator/operator/policy.py (what switch and retune compare); each engine's "
    "metrics reader: orchestrator/engines/vllm_metrics.py, orchestrator/engines/sglang_metrics.py, "
    "orchestrator/engines/trtllm_metrics.py",
    applies=lambda ctx: ctx.profile.policy is not None and ctx.profile.policy.mode in _NEEDS,
)
def policy_can_act(ctx: CompatContext) -> Finding | None:
    """A warning, not an error: the engine serves as it would with `static`, so nothing breaks,
    but the operator never moves traffic or changes the draft length, which is the reason the
    policy was written; saying so at validate keeps a silent no-op out of production."""
    policy = ctx.profile.policy
    assert policy is not None
    attribute, what = _NEEDS[policy.mode]
    metrics = ENGINES[ctx.engine].metrics
    if getattr(metrics, attribute, False):
        return None
    able = sorted(name for name, e in ENGINES.items() if getattr(e.metrics, attribute, False))
    return at_field(
        "policy.mode",
        Finding.warning(
            what=f"policy.mode={policy.mode} on engine {ctx.engine}: its /metrics have no {what}",
            why=f"the operator's {policy.mode} reads {what} from both twins; without it every "
            "interval holds, so traffic and the draft length stay as deployed (as with static)",
            fix=f"use policy.mode: static (and measure with `specdeploy bench`), or serve with "
            f"an engine whose /metrics have it ({', '.join(able)})",
        ),
    )


@rule(
    "engine.policy-explore",
    source="orchestrator/operator/policy.py explore_share (an HTTPRoute splits by weight, the "
    "front Service by pod); https://github.com/kubernetes/kubernetes/blob/v1.36.0/pkg/proxy/"
    "iptables/proxier.go (kube-proxy picks one endpoint pod per connection, each equally likely)",
    applies=lambda ctx: (
        ctx.profile.policy is not None and ctx.profile.policy.explore_percent is not None
    ),
)
def policy_explore_can_act(ctx: CompatContext) -> Finding | None:
    """policy.explore_percent bounds the traffic the idle twin gets while the operator times it.
    Only `switch` explores, and the front Service (no policy.gateway) splits by pod, so it can
    give the idle twin half the traffic (both twins run deploy.replicas) or nothing: a smaller
    bound there means the operator never explores, which the profile does not say."""
    policy = ctx.profile.policy
    assert policy is not None and policy.explore_percent is not None
    percent = policy.explore_percent
    if policy.mode != "switch":
        what = f"policy.explore_percent={percent} with policy.mode={policy.mode}"
        why = "only switch moves traffic between the twins, so nothing is explored"
        fix = "remove policy.explore_percent, or set policy.mode: switch"
    elif policy.gateway is None and percent < 50:
        what = f"policy.explore_percent={percent} without policy.gateway"
        why = (
            "the front Service splits traffic by pod, so exploring would give the idle twin half "
            f"of it (its share of the pods), more than {percent}%: the operator never explores "
            "and times the idle twin only from mirrored traffic"
        )
        fix = "set policy.gateway (an HTTPRoute splits by weight), or policy.explore_percent: 50"
    else:
        return None
    return at_field("policy.explore_percent", Finding.warning(what=what, why=why, fix=fix))


RULES = (policy_can_act, policy_explore_can_act)
