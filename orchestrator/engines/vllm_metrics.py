"""vLLM's /metrics: speculative-decoding counters and per-phase request histograms.

Counters `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total` and
`..._num_accepted_tokens_total` (`SpecDecodingProm`,
https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/spec_decode/metrics.py#L177): acceptance rate
= accepted / draft tokens; mean acceptance length = 1 + accepted / drafts (bonus token included,
range 1..K+1). Request-phase histograms `vllm:request_{queue,prefill,decode}_time_seconds`
(https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/metrics/loggers.py#L971-L1010).
"""

from __future__ import annotations

from typing import Final

from orchestrator.engines.metrics import Acceptance, PhaseTimes, Samples, delta

_SPEC: Final = "vllm:spec_decode_"


class VllmMetrics:
    def acceptance(self, before: Samples, after: Samples) -> Acceptance | None:
        if f"{_SPEC}num_drafts_total" not in after:
            return None
        drafts = delta(before, after, f"{_SPEC}num_drafts_total")
        drafted = delta(before, after, f"{_SPEC}num_draft_tokens_total")
        accepted = delta(before, after, f"{_SPEC}num_accepted_tokens_total")
        if drafts <= 0 or drafted <= 0:
            return None
        return Acceptance(
            "vllm", accepted / drafted, 1.0 + accepted / drafts, drafts, drafted, accepted
        )

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
