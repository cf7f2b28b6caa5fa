"""SGLang's /metrics (with --enable-metrics): gauges `sglang:spec_accept_length` (accepted drafts
+ 1 bonus per verify step) and `sglang:spec_accept_rate`
(https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/observability/metrics_collector.py#L511-L522).
They are gauges, so the value after the level is reported, not a difference (and marked
`last_batch`, for whoever averages them over time). Serving: histograms
`sglang:request_time_per_output_token_seconds` and `sglang:e2e_request_latency_seconds`, gauges
`sglang:num_running_reqs` / `sglang:num_queue_reqs` (same file, #L365-L376 and #L2057-L2075), and
the counter `sglang:generation_tokens_total`, grown by each finished request's output tokens in
`observe_one_finished_request` beside its end-to-end latency (#L1860-L1864, #L2110)."""

from __future__ import annotations

from typing import ClassVar, Final

from orchestrator.engines.metrics import (
    Acceptance,
    NoPhaseTimes,
    Samples,
    Serving,
    ServingNames,
    serving_window,
)

_SERVING: Final = ServingNames(
    "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:generation_tokens_total"
)


class SglangMetrics(NoPhaseTimes):
    times_requests: ClassVar[bool] = True
    accepts_per_position: ClassVar[bool] = False

    def acceptance(self, before: Samples, after: Samples) -> Acceptance | None:
        del before
        if "sglang:spec_accept_length" not in after:
            return None
        rate = after.get("sglang:spec_accept_rate")
        length = after["sglang:spec_accept_length"]
        return Acceptance("sglang", rate, length, last_batch=True)

    def serving(self, before: Samples, after: Samples) -> Serving | None:
        return serving_window(before, after, "sglang:", _SERVING)
