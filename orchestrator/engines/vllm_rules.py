"""vLLM-only compatibility rules. Run only for profiles with engine.name: vllm
(`VllmEngine.rules`)."""

from __future__ import annotations

from orchestrator.compatibility.rule import CompatContext, Finding, rule

#: Above this share of host memory a CPU vLLM server leaves too little for anything beside it.
CPU_MEMORY_SHARE_WARNING = 0.5


@rule(
    "engine.cpu-memory-fraction",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/worker/cpu_worker.py#L83-L95 ('On the CPU backend, the "
    "`--gpu-memory-utilization` flag controls the fraction of CPU memory reserved'; seen running "
    "profiles/local with two servers)",
    applies=lambda ctx: ctx.profile.hardware.device == "cpu",
)
def cpu_memory_fraction_is_modest(ctx: CompatContext) -> Finding | None:
    """vLLM's CPU backend reserves serving.gpu_memory_fraction of *host* memory at start-up and
    refuses to start when less is free, so the GPU-minded default (0.9) leaves no room for a
    second server (such as the baseline of an A/B) or much else on the machine."""
    share = ctx.profile.serving.gpu_memory_fraction
    if share <= CPU_MEMORY_SHARE_WARNING:
        return None
    return Finding.warning(
        what=f"serving.gpu_memory_fraction={share} on hardware.device: cpu reserves that share of host memory",
        why="vLLM refuses to start when that much host memory is not free, e.g. beside a baseline server",
        fix="set serving.gpu_memory_fraction to what the server needs (0.15 serves the tiny models)",
    )


RULES = (cpu_memory_fraction_is_modest,)
