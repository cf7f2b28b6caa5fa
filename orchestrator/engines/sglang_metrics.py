"""SGLang's /metrics (with --enable-metrics): gauges `sglang:spec_accept_length` (accepted drafts
+ 1 bonus per verify step) and `sglang:spec_accept_rate`
(https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/observability/metrics_collector.py#L511-L522).
They are gauges, so the value after the level is reported, not a difference."""

from __future__ import annotations

from orchestrator.engines.metrics import Acceptance, NoPhaseTimes, Samples


class SglangMetrics(NoPhaseTimes):
    def acceptance(self, before: Samples, after: Samples) -> Acceptance | None:
        del before
        if "sglang:spec_accept_length" not in after:
            return None
        rate = after.get("sglang:spec_accept_rate")
        return Acceptance("sglang", rate, after["sglang:spec_accept_length"])
