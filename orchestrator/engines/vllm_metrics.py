"""vLLM's /metrics: speculative-decoding counters and per-phase request histograms.

Counters `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total` and
`..._num_accepted_tokens_total` (`SpecDecodingProm`,
https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/spec_decode/metrics.py#L177): acceptance rate
= accepted / draft tokens; mean acceptance length = 1 + accepted / drafts (bonus token included,
range 1..K+1); `..._num_accepted_tokens_per_pos_total{position}` / drafts is the share of drafts
accepted at each position
(https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/spec_decode/metrics.py#L252-L262).
Serving: histograms `vllm:request_time_per_output_token_seconds` and
`vllm:e2e_request_latency_seconds`, gauges `vllm:num_requests_running` / `_waiting`
(https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/metrics/loggers.py#L527-L545 and
#L951-L968), and the histogram `vllm:request_generation_tokens`, observed with each finished
request's output tokens (#L874-L881, #L1321-L1322), whose `_sum` counts them. Request-phase histograms `vllm:request_{queue,prefill,decode}_time_seconds`
(https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/metrics/loggers.py#L971-L1010).
"""

from __future__ import annotations

from typing import ClassVar, Final

from orchestrator.engines.metrics import (
    Acceptance,
    PhaseTimes,
    Samples,
    Serving,
    ServingNames,
    delta,
    labelled,
    serving_window,
)

_SPEC: Final = "vllm:spec_decode_"
_PER_POSITION: Final = f"{_SPEC}num_accepted_tokens_per_pos_total"
_SERVING: Final = ServingNames(
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:request_generation_tokens_sum",
)


class VllmMetrics:
    times_requests: ClassVar[bool] = True
    accepts_per_position: ClassVar[bool] = True

    def acceptance(self, before: Samples, after: Samples) -> Acceptance | None:
        if f"{_SPEC}num_drafts_total" not in after:
            return None
        drafts = delta(before, after, f"{_SPEC}num_drafts_total")
        drafted = delta(before, after, f"{_SPEC}num_draft_tokens_total")
        accepted = delta(before, after, f"{_SPEC}num_accepted_tokens_total")
        if drafts <= 0 or drafted <= 0:
            return None
        return Acceptance(
            "vllm",
            accepted / drafted,
            1.0 + accepted / drafts,
            drafts,
            drafted,
            accepted,
            per_position=_per_position(before, after, drafts),
        )

    def serving(self, before: Samples, after: Samples) -> Serving | None:
        return serving_window(before, after, "vllm:", _SERVING)

    def phase_times(self, before: Samples, after: Samples) -> PhaseTimes | None:
        means: list[float | None] = []
        for phase in ("queue", "prefill", "decode"):
            base = f"vllm:request_{phase}_time_seconds"
            count = delta(before, after, f"{base}_count")
            total = delta(before, after, f"{base}_sum")
            means.append(total / count if count > 0 else None)
        if all(m is None for m in means):
            return None
        return PhaseTimes(*means)


def _per_position(before: Samples, after: Samples, drafts: float) -> tuple[float, ...] | None:
    shares: list[float] = []
    while labelled(_PER_POSITION, "position", len(shares)) in after:
        key = labelled(_PER_POSITION, "position", len(shares))
        shares.append(delta(before, after, key) / drafts)
    return tuple(shares) or None
