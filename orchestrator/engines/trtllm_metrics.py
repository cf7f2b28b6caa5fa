"""TensorRT-LLM's /metrics: counters `trtllm_spec_decode_num_draft_tokens_total`,
`trtllm_spec_decode_num_accepted_tokens_total` and gauge `trtllm_spec_decode_acceptance_length`
(newer trtllm-serve; version-dependent, https://github.com/NVIDIA/TensorRT-LLM/blob/main/
tensorrt_llm/metrics/collector.py)."""

from __future__ import annotations

from typing import ClassVar, Final

from orchestrator.engines.metrics import Acceptance, NoPhaseTimes, NoServing, Samples, delta

_SPEC: Final = "trtllm_spec_decode_"


class TrtllmMetrics(NoPhaseTimes, NoServing):
    accepts_per_position: ClassVar[bool] = False

    def acceptance(self, before: Samples, after: Samples) -> Acceptance | None:
        if f"{_SPEC}num_draft_tokens_total" not in after:
            return None
        drafted = delta(before, after, f"{_SPEC}num_draft_tokens_total")
        accepted = delta(before, after, f"{_SPEC}num_accepted_tokens_total")
        if drafted <= 0:
            return None
        length = after.get(f"{_SPEC}acceptance_length")
        return Acceptance("trtllm", accepted / drafted, length, None, drafted, accepted)
