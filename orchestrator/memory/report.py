"""The `specdeploy plan` text table: the per-GPU breakdown, both concurrencies and the verdict."""

from __future__ import annotations

from orchestrator.memory.estimate import MemoryEstimate
from orchestrator.memory.gpus import Gpu


def memory_table(e: MemoryEstimate) -> str:
    """A fixed-width breakdown of one estimate (figures per GPU, the heaviest one)."""
    o = e.overheads
    graphs = "" if o.graphs_in_budget else "  (captured outside the engine's knob)"
    rows = [
        f"memory per GPU ({e.gpu}, TP {e.tensor_parallel_size}, heaviest: {e.heaviest_rank})",
        _row("GPU memory (NVML)", e.gpu_memory_gib),
        _row("usable (CUDA total)", e.gpu_usable_gib),
        _row(f"budget ({e.gpu_memory_fraction:g} of usable)", e.budget_gib),
        _row("target weights", e.target_weights_gib),
        _row(f"draft weights ({e.method})", e.draft_weights_gib, _share(e.draft_weights_gib, e)),
        _row(f"activation peak ({o.profiled_tokens} tokens)", o.activation_gib),
        _row("CUDA graphs", o.cuda_graph_gib, graphs),
        _row("non-torch + NCCL", o.outside_torch_gib),
        _row("KV cache", e.kv_cache_gib),
        f"  KV bytes/token          {e.kv_bytes_per_token:>10,}  "
        f"(target {e.target_kv_bytes_per_token:,} + draft {e.draft_kv_bytes_per_token:,})",
        f"  KV tokens (engine log)  {e.kv_tokens:>10,}  (baseline {e.baseline_kv_tokens:,})",
        _capacity_line(e),
        f"  engine knob             {e.engine_knob}={e.engine_fraction:g}",
        "",
        f"sequences of {e.max_model_len:,} tokens at once: {e.max_concurrency} with speculation, "
        f"{e.baseline_max_concurrency} without (requested {e.requested_concurrency})",
        _typical_line(e),
        _cost_line(e),
        _verdict(e),
    ]
    rows += [f"  note: {note}" for note in e.notes]
    rows += [
        f"  fix: {s.change} -> {s.max_concurrency} sequences (KV {s.kv_cache_gib:.1f} GiB)"
        for s in e.suggestions
    ]
    return "\n".join(row for row in rows if row is not None)


def gpu_table(gpus: list[Gpu]) -> str:
    """`specdeploy gpus`: one line per catalog entry."""
    header = f"{'GPU':<11} {'NVML GiB':>8} {'TB/s':>6} {'BF16':>7} {'FP8':>7}  node label"
    lines = [header]
    for g in gpus:
        lines.append(
            f"{g.name:<11} {g.memory_gib:>8.1f} {g.bandwidth_tbps:>6.2f} "
            f"{_tflops(g.bf16_tflops):>7} {_tflops(g.fp8_tflops):>7}  {g.label_key}={g.label_value}"
        )
    return "\n".join(lines)


def _row(label: str, gib: float, suffix: str = "") -> str:
    return f"  {label:<30} {gib:>8.2f} GiB{suffix}"


def _share(draft_gib: float, e: MemoryEstimate) -> str:
    draft_kv = e.draft_kv_bytes_per_token / max(e.kv_bytes_per_token, 1)
    if draft_gib <= 0 and draft_kv <= 0:
        return ""
    return f"  (+ {draft_kv:.1%} of every KV token)"


def _capacity_line(e: MemoryEstimate) -> str | None:
    """The real capacity, when the engine's logged figure counts something else (a hybrid layout
    logged as if every layer held full context), or sequences hold a fixed-size part."""
    if e.kv_capacity_tokens == e.kv_tokens and not e.kv_fixed_bytes_per_sequence:
        return None
    return (
        f"  KV capacity             {e.kv_capacity_tokens:>10,}  (baseline "
        f"{e.baseline_kv_capacity_tokens:,}; tokens of {e.max_model_len:,}-token sequences: "
        "windowed layers and recurrent state cost a fixed amount per sequence)"
    )


def _cost_line(e: MemoryEstimate) -> str:
    lost = e.baseline_max_concurrency - e.max_concurrency
    if e.method == "none":
        return "no speculation configured"
    if lost <= 0:
        return "speculation costs no concurrency at this context length"
    return f"speculation costs {lost} concurrent sequence{'s' if lost != 1 else ''}"


def _verdict(e: MemoryEstimate) -> str:
    if not e.fits:
        return "verdict: over budget: not even one sequence of max_model_len fits"
    if e.concurrency_fits:
        return f"verdict: fits ({e.needed_gib:.1f} of {e.budget_gib:.1f} GiB budget)"
    return (
        f"verdict: starts, but only {e.max_concurrency} of serving.max_concurrency="
        f"{e.requested_concurrency} sequences of max_model_len fit at once (all of them would "
        f"need {e.needed_gib:.1f} GiB, budget is {e.budget_gib:.1f} GiB)"
    )


def _typical_line(e: MemoryEstimate) -> str | None:
    if e.typical_concurrency is None:
        return None
    return (
        f"typical requests of {e.typical_context_tokens:,} tokens at once: "
        f"{e.typical_concurrency} with speculation, {e.baseline_typical_concurrency} without"
    )


def _tflops(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
