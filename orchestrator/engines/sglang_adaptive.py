"""SGLang's adaptive speculation (--speculative-adaptive): which profiles it runs for, the config
file specdeploy renders from sglang.adaptive or from a draft-length schedule, and the draft
lengths that size SGLang's buffers. Read in SGLang 0.5.23.

Beneath `sglang.py` (the launch) and `sglang_memory.py` (the buffers), which both need it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from orchestrator.profile.schema import Profile

_S: Final = "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/"
#: specdeploy method -> --speculative-algorithm (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/speculative/spec_info.py#L32-L46).
#: NEXTN is SGLang's name for native MTP layers (rewritten to EAGLE internally, with the target as
#: draft: https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/speculative_hook.py#L109).
ALGORITHM: Final[Mapping[str, str]] = {
    "draft_model": "STANDALONE",
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "ngram": "NGRAM",
}
#: The config file of --speculative-adaptive: sglang.adaptive.slots, or the slots of
#: proposer.num_speculative_tokens_per_batch_size.
ADAPTIVE_FILE: Final = "sglang-adaptive.json"
#: The draft lengths of SGLang 0.5.23's DEFAULT_ADAPTIVE_CONFIG (--speculative-adaptive without
#: a config file): slots 1, 8, 32 and 64 with candidates [1, 3, 5, 7], [0, 1, 3], [0, 1], [0].
DEFAULT_CANDIDATE_STEPS: Final = (0, 1, 3, 5, 7)
#: Where those defaults are, and that the buffers are sized for the longest candidate (steps + 1
#: draft tokens, topk 1).
ADAPTIVE_DEFAULTS_SOURCE: Final = (
    f"{_S}speculative/adaptive_spec_params.py#L28-L53 (DEFAULT_ADAPTIVE_CONFIG), #L142-L150 "
    f"(resolve_candidate_steps_from_config); {_S}speculative/spec_info.py#L268-L292 "
    "(resolve_max_speculative_num_draft_tokens)"
)
#: How SGLang 0.5.23 runs a draft length per batch size. --speculative-adaptive-config is JSON with
#: one slot per batch size (a key of digits) and its `candidate_steps`; a batch goes to the slot of
#: the largest key at or below its size (the first slot below every key), after padding the size
#: to the CUDA-graph batch size it runs at. A slot moves between its candidates with the measured
#: acceptance, so a slot with one candidate keeps it, and 0 steps drafts nothing. Only EAGLE,
#: EAGLE3 and NEXTN (resolved to EAGLE first) with topk 1 and no attention data parallelism adapt;
#: otherwise SGLang logs a warning and runs --speculative-num-steps at every load, which must be
#: one of the candidates; the draft tokens become steps + 1.
ADAPTIVE_SOURCE: Final = (
    f"{_S}speculative/adaptive_spec_params.py#L56-L100 (adaptive_unsupported_reason), "
    "#L103-L139 (_load_adaptive_config), #L153-L272 (AdaptiveStepSlot), #L275-L358 (routing by "
    f"batch size); {_S}arg_groups/speculative_hook.py#L1374-L1427 (the fallback, the steps "
    f"check); {_S}speculative/eagle_worker_v2.py#L1469-L1492 (0 steps: no draft)"
)
#: The methods whose draft length SGLang adapts (mtp is NEXTN, which becomes EAGLE before the check).
_ADAPTIVE_METHODS: Final = frozenset({"eagle", "eagle3", "mtp"})


def adaptive_unsupported(profile: Profile) -> str | None:
    """Why SGLang would run one draft length at every load despite the profile's schedule or
    sglang.adaptive, in SGLang's terms (`adaptive_unsupported_reason`, ADAPTIVE_SOURCE); None
    when it adapts."""
    method = profile.proposer.method
    if method not in _ADAPTIVE_METHODS:
        algorithm = ALGORITHM.get(method, method)
        return (
            f"--speculative-algorithm {algorithm} does not adapt (only EAGLE, EAGLE3 and NEXTN do)"
        )
    tuning = profile.sglang
    if tuning is not None and tuning.eagle_topk != 1:
        return f"sglang.eagle_topk={tuning.eagle_topk}: only topk 1 chains adapt"
    if profile.hardware.attention_data_parallel_size > 1:
        return (
            f"hardware.attention_data_parallel_size={profile.hardware.attention_data_parallel_size}: "
            "attention data parallelism does not adapt (its ranks would choose apart)"
        )
    schedule = profile.proposer.num_speculative_tokens_per_batch_size or ()
    adaptive = tuning.adaptive if tuning is not None else None
    if adaptive is None and schedule and not any(k > 0 for _, _, k in schedule):
        return "every range has k=0, which leaves no draft length to start with"
    return None


@dataclass(frozen=True)
class AdaptiveLaunch:
    """How SGLang runs a profile's draft length per load: --speculative-adaptive, starting at
    `start_steps`, with `document` as its --speculative-adaptive-config (None: SGLang's default
    config, no file)."""

    start_steps: int
    document: Mapping[str, Mapping[str, object]] | None
    candidate_steps: tuple[int, ...]
    """Every draft length a slot may run (SGLang's union, which sizes its buffers)."""

    def config_file(self) -> str | None:
        if self.document is None:
            return None
        return json.dumps(self.document, indent=2, sort_keys=False) + "\n"


def adaptive_launch(profile: Profile) -> AdaptiveLaunch | None:
    """The adaptive launch for the profile's sglang.adaptive or its schedule (None: neither, or
    one SGLang would not adapt, which then runs proposer.num_speculative_tokens at every load).

    A schedule becomes one slot where each range starts, with that range's draft length as
    `ProposerSpec.tokens_at` reads it as its only candidate (and slot 1 for the batch sizes
    below the first range), so SGLang's acceptance-driven moves have nowhere to go and the draft
    length follows the batch size; it starts at the longest, which sizes the buffers."""
    tuning = profile.sglang
    adaptive = tuning.adaptive if tuning is not None else None
    schedule = profile.proposer.num_speculative_tokens_per_batch_size
    if (adaptive is None and not schedule) or adaptive_unsupported(profile) is not None:
        return None
    if adaptive is not None:
        start = profile.proposer.num_speculative_tokens
        if adaptive.slots is None:
            return AdaptiveLaunch(start, None, DEFAULT_CANDIDATE_STEPS)
        ordered = sorted(adaptive.slots, key=lambda slot: slot.batch_size)
        document = {
            str(slot.batch_size): slot.model_dump(exclude={"batch_size"}, exclude_none=True)
            for slot in ordered
        }
        steps = sorted({k for slot in ordered for k in slot.candidate_steps})
        return AdaptiveLaunch(start, document, tuple(steps))
    starts = sorted({1, *(start for start, _, _ in schedule or () if start >= 1)})
    slots = {start: profile.proposer.tokens_at(start) for start in starts}
    document = {str(size): {"candidate_steps": [k]} for size, k in slots.items()}
    return AdaptiveLaunch(max(slots.values()), document, tuple(sorted(set(slots.values()))))
