"""Shape rules: the checkpoints' geometry against the requested topology and context length
(attention heads vs tensor parallelism, positions vs max_model_len)."""

from __future__ import annotations

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.compatibility.unchecked import at_field, cannot_check
from orchestrator.engines import ENGINES


def _draft_model(ctx: CompatContext) -> bool:
    return ctx.method == "draft_model"


@rule(
    "engine.tensor-parallel-shape",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/layers/linear.py#L1052-L1058 (vLLM QKVParallelLinear: divide() "
    "asserts heads % tp == 0 and kv % tp == 0, or tp % kv == 0 when KV heads are replicated); "
    "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/layers/linear.py#L1139-L1146 (SGLang's QKVParallelLinear, the same division)",
)
def tensor_parallel_shape(ctx: CompatContext) -> list[Finding]:
    """Tensor parallelism splits attention heads across GPUs, so the query heads must divide by
    the TP size. KV heads are split the same way, or replicated when there are fewer of them than
    GPUs, which needs tp to be a multiple of the KV-head count."""
    tp = ctx.profile.hardware.tensor_parallel_size
    draft_tp = ctx.profile.proposer.draft_tensor_parallel_size or tp
    checks = [("target.model", ctx.target, tp)]
    if ctx.method in ("draft_model", "eagle", "eagle3"):
        checks.append(("proposer.model", ctx.draft, draft_tp))
    return [
        f for field, info, size in checks if info and (f := _tp_finding(ctx, field, info, size))
    ]


#: Tensor parallel sizes a fix may propose.
_TP_SIZES = (1, 2, 4, 8, 16)


def _splits(info: CheckpointInfo | None, tp: int) -> bool:
    """Whether `tp` splits the model's query heads, and its KV heads (or replicates them)."""
    if info is None or info.num_attention_heads is None or info.kv_heads is None:
        return True  # unknown: do not rule a size out
    heads, kv = info.num_attention_heads, info.kv_heads
    return heads % tp == 0 and (kv % tp == 0 if kv >= tp else tp % kv == 0)


def _tp_finding(ctx: CompatContext, field: str, info: CheckpointInfo, tp: int) -> Finding | None:
    heads, kv = info.num_attention_heads, info.kv_heads
    if heads is None or kv is None:
        return at_field(field, cannot_check(f"{field} attention head counts unknown", info, None))
    if _splits(info, tp):
        return None
    return at_field(
        field,
        Finding.error(
            what=f"{field} {info.ref} has {heads} attention heads and {kv} KV heads, which "
            f"tensor parallel size {tp} cannot split evenly",
            why="the engine asserts divisible head counts when it builds the attention layers",
            fix=_tp_fix(ctx, field),
        ),
    )


def _tp_fix(ctx: CompatContext, field: str) -> str:
    """Sizes that every other check accepts too: a draft TP the engine allows at this target TP,
    or a target TP that splits the target and leaves the draft a TP the engine allows."""
    hardware, proposer = ctx.profile.hardware, ctx.profile.proposer
    engine = ENGINES[ctx.engine]
    draft = ctx.draft if field == "proposer.model" or proposer.model is not None else None

    def draft_fits(target_tp: int) -> bool:
        options = engine.draft_tensor_parallel_choices(ctx.method, target_tp) or (target_tp,)
        return draft is None or any(_splits(draft, n) for n in options)

    if field == "proposer.model":
        choices = engine.draft_tensor_parallel_choices(ctx.method, hardware.tensor_parallel_size)
        drafts = [n for n in choices or () if _splits(draft, n)]
        if drafts:
            return f"set proposer.draft_tensor_parallel_size to {' or '.join(map(str, drafts))}"
    sizes = [
        n
        for n in _TP_SIZES
        if n <= hardware.gpus_per_node and _splits(ctx.target, n) and draft_fits(n)
    ]
    if not sizes:
        return "choose models whose attention heads divide by the GPUs you use"
    fix = f"set hardware.tensor_parallel_size to one of {sizes}"
    if proposer.draft_tensor_parallel_size is not None:
        fix += " (and proposer.draft_tensor_parallel_size to a size the engine accepts with it)"
    if field == "proposer.model":
        fix += (
            f", or choose a draft whose attention heads divide by {hardware.tensor_parallel_size}"
        )
    return fix


@rule(
    "serving.max-model-len",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/model.py#L2527-L2666 (vLLM _get_and_verify_max_len: rope scaling "
    "extends max_position_embeddings; a longer max_model_len is refused); "
    "https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L1633-L1675 (the draft is capped at its own limit)",
)
def max_model_len_supported(ctx: CompatContext) -> list[Finding]:
    """A max_model_len above what the target's positions (with any RoPE scaling its config
    declares) support is refused at start-up or degrades quality. A draft LM with a shorter
    limit stops helping on long sequences (vLLM caps the draft at its own limit)."""
    length = ctx.profile.serving.max_model_len
    found: list[Finding] = []
    if ctx.target is not None:
        found += _length_finding("target.model", ctx.target, length, error=True)
    if ctx.draft is not None and _draft_model(ctx):
        found += _length_finding("proposer.model", ctx.draft, length, error=False)
    return found


def _length_finding(field: str, info: CheckpointInfo, length: int, *, error: bool) -> list[Finding]:
    limit = info.max_context
    if limit is None:
        return [
            at_field(field, cannot_check(f"{field} max_position_embeddings unknown", info, None))
        ]
    if length <= limit:
        return []
    rope = f", rope_scaling {info.rope_type} x{info.rope_scaling_factor}" if info.rope_type else ""
    what = (
        f"serving.max_model_len={length} exceeds {field} {info.ref} limit {limit} "
        f"(max_position_embeddings={info.max_position_embeddings}{rope})"
    )
    if not error:
        why = "the draft runs only up to its own limit, so long sequences lose speculation"
        fix = f"lower serving.max_model_len to {limit}, or choose a draft with a longer context"
        return [at_field(field, Finding.warning(what=what, why=why, fix=fix))]
    why = "the engine refuses a context longer than the model's positions (or quality degrades)"
    fix = (
        f"set serving.max_model_len: {limit} (or lower), or use a checkpoint whose config "
        "declares RoPE scaling for longer contexts"
    )
    return [at_field(field, Finding.error(what=what, why=why, fix=fix))]


RULES = (tensor_parallel_shape, max_model_len_supported)
