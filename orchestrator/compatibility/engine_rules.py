"""Engine rules: what the pinned engine release accepts for this method and topology.

These need only the profile and the capability matrix (plus the target's architecture, when known,
for the EAGLE-3 / MTP support check).
"""

from __future__ import annotations

from dataclasses import replace

from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.engines import ENGINES
from orchestrator.engines.capabilities import known_versions, release_for
from orchestrator.errors import ProfileError
from orchestrator.memory.gpus import Gpu, find_gpu
from orchestrator.profile.schema import EngineName, SpecMethod


def _speculative(ctx: CompatContext) -> bool:
    return ctx.profile.speculative


@rule(
    "engine.version-unknown",
    source="orchestrator/engines/capabilities.yaml (newest release entry per engine)",
    applies=lambda ctx: ctx.release.newer_than_known,
)
def engine_version_is_known(ctx: CompatContext) -> Finding | None:
    """A release newer than the capability matrix knows is rendered with the newest known rules.
    Flags change between releases, so the user should know the launch was not checked for it."""
    release = ctx.release
    return Finding.warning(
        what=(
            f"engine.version {release.version} is newer than the newest {release.engine} release "
            f"specdeploy knows ({release.rules_version}); rendered with the {release.rules_version} rules"
        ),
        why="a flag renamed or removed in the newer release would fail at start-up",
        fix=(
            f"pin engine.version: {release.rules_version}, or check the rendered launch against "
            f"`{release.engine} --help` of the newer release"
        ),
    )


@rule(
    "engine.method-supported",
    source="orchestrator/engines/capabilities.yaml; https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/worker/gpu_model_runner.py"
    "#L5230-L5238 (vLLM: 'Model does not support EAGLE3 interface' for a target class without "
    "SupportsEagle3)",
    applies=_speculative,
)
def engine_supports_method(ctx: CompatContext) -> Finding | None:
    """The engine release must implement the proposer method, and for EAGLE-3 and MTP the target
    architecture must implement it too (vLLM: `Model does not support EAGLE3 interface` at load)."""
    release = ctx.release
    if ctx.method not in release.methods:
        supported = sorted(release.methods - {"none"})
        return Finding.error(
            what=(
                f"proposer.method {ctx.method!r} is not supported by {release.engine} "
                f"{release.version} (supported: {', '.join(supported)})"
            ),
            why="the engine refuses the speculative configuration at start-up",
            fix=_method_fix(ctx, supported),
        )
    return _architecture_finding(ctx)


def _method_fix(ctx: CompatContext, supported: list[str]) -> str:
    later = _first_release_with(ctx.release.engine, ctx.method)
    if later is not None:
        return f"set engine.version to {later} or newer, or choose proposer.method from {supported}"
    return f"choose proposer.method from {supported}, or another engine.name"


def _first_release_with(engine: EngineName, method: SpecMethod) -> str | None:
    for version in known_versions(engine):
        if method in release_for(engine, version).methods:
            return version
    return None


def _architecture_finding(ctx: CompatContext) -> Finding | None:
    if ctx.target is None or not ctx.target.architectures or ctx.method not in ("eagle3", "mtp"):
        return None
    allowed = (
        ctx.release.eagle3_architectures
        if ctx.method == "eagle3"
        else ctx.release.mtp_architectures
    )
    architectures = set(ctx.target.architectures)
    if architectures & allowed:
        return None
    return Finding.error(
        what=(
            f"target architecture {', '.join(sorted(architectures))} has no {ctx.method} support in "
            f"{ctx.release.engine} {ctx.release.version} (known: {', '.join(sorted(allowed)) or 'none'})"
        ),
        why=(
            "the engine loads the target and then fails: the model class does not expose the hidden "
            "states (EAGLE-3) or MTP layers the proposer needs"
        ),
        fix=(
            "use a target architecture from the list, a newer engine.version, or proposer.method: "
            "draft_model/ngram; if you know this release supports it, pass --ignore engine.method-supported"
        ),
    )


@rule(
    "engine.draft-tensor-parallel",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L1712-L1742 (vLLM _verify_and_get_draft_tp: 1 or the "
    "target's TP); https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/spec_decode/draft_model.py#L63-L78 (draft_model: equal to the target's)",
    applies=lambda ctx: ctx.profile.proposer.draft_tensor_parallel_size is not None,
)
def draft_tensor_parallel_is_accepted(ctx: CompatContext) -> Finding | None:
    """vLLM accepts a draft TP of 1 or the target's TP, and draft_model requires it to equal the
    target's. SGLang and TensorRT-LLM have no separate draft TP: the draft runs at the target's.
    Each engine module says which sizes it accepts (`Engine.draft_tensor_parallel_choices`)."""
    draft_tp = ctx.profile.proposer.draft_tensor_parallel_size
    target_tp = ctx.profile.hardware.tensor_parallel_size
    choices = ENGINES[ctx.engine].draft_tensor_parallel_choices(ctx.method, target_tp)
    if choices is None:
        return Finding.error(
            what=f"proposer.draft_tensor_parallel_size={draft_tp} but {ctx.engine} has no draft TP setting",
            why=f"{ctx.engine} runs the draft at the target's tensor parallel size ({target_tp})",
            fix="remove proposer.draft_tensor_parallel_size",
        )
    if draft_tp in choices:
        return None
    accepted = " or ".join(str(c) for c in choices)
    return Finding.error(
        what=(
            f"proposer.draft_tensor_parallel_size={draft_tp} with hardware.tensor_parallel_size="
            f"{target_tp}; {ctx.engine} accepts {accepted} for proposer.method {ctx.method!r}"
        ),
        why=f"{ctx.engine} refuses any other draft tensor parallel size at start-up",
        fix=f"set proposer.draft_tensor_parallel_size to {accepted}, or remove it",
    )


@rule(
    "engine.pipeline-parallel",
    source="https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/validation_hook.py#L119-L164 (SGLang 0.5.23 with pp_size > 1: "
    "EAGLE only, and only with disaggregation-mode prefill or SGLANG_ENABLE_PP_SPEC; "
    "https://github.com/sgl-project/sglang/blob/v0.5.20/python/sglang/srt/arg_groups/validation_hook.py: "
    "no speculation at all off NPUs); "
    "https://github.com/vllm-project/vllm/blob/01ed47b4166b26251895a9c298352fcdb2385149/docs/"
    "features/speculative_decoding/README.md (vLLM: pipeline parallelism 'not composible with "
    "speculative decoding as of vllm<=0.15.0')",
    applies=lambda ctx: ctx.profile.speculative and ctx.profile.hardware.pipeline_parallel_size > 1,
)
def pipeline_parallel_allows_speculation(ctx: CompatContext) -> Finding | None:
    """SGLang refuses speculative decoding with pipeline parallelism (from 0.5.21 it accepts EAGLE
    only on the prefill nodes of a disaggregated deployment, or behind an experimental gate);
    vLLM documents speculation as not composable with PP except EAGLE-3 on recent releases."""
    pp = ctx.profile.hardware.pipeline_parallel_size
    engine = ENGINES[ctx.engine]
    if engine.speculates_with_pipeline_parallel(ctx.release, ctx.method):
        return None
    version = ctx.profile.engine.version
    return Finding.error(
        what=f"hardware.pipeline_parallel_size={pp} with proposer.method {ctx.method!r} on "
        f"{ctx.engine} {version}",
        why=f"{ctx.engine} {version} refuses this speculative method with pipeline parallelism",
        fix="set hardware.pipeline_parallel_size: 1 and raise tensor_parallel_size instead",
    )


@rule(
    "engine.attention-data-parallel",
    source="vLLM --data-parallel-size (https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/"
    "engine/arg_utils.py#L1209); SGLang attn_dp_size (https://github.com/sgl-project/sglang/blob/"
    "v0.5.23/python/sglang/srt/arg_groups/parallel_hook.py#L326); TensorRT-LLM "
    "enable_attention_dp (https://github.com/NVIDIA/TensorRT-LLM/blob/v1.2.0/tensorrt_llm/llmapi/"
    "llm_args.py)",
    applies=lambda ctx: ctx.profile.hardware.attention_data_parallel_size > 1,
)
def attention_data_parallel_is_supported(ctx: CompatContext) -> Finding | None:
    """Attention data parallelism splits a replica's GPUs into groups that each run attention
    on their own requests. Engines take different group counts: vLLM and SGLang any divisor of
    the TP size, TensorRT-LLM only one rank per GPU (enable_attention_dp is a switch)."""
    hardware = ctx.profile.hardware
    groups, tp = hardware.attention_data_parallel_size, hardware.tensor_parallel_size
    sizes = ENGINES[ctx.engine].attention_data_parallel_sizes(tp)
    if groups in sizes:
        return None
    return Finding.error(
        what=(
            f"hardware.attention_data_parallel_size={groups} with tensor_parallel_size={tp}: "
            f"{ctx.engine} runs {' or '.join(map(str, sizes))} attention groups there"
        ),
        why=f"{ctx.engine} cannot split attention into {groups} groups; the launch would not match "
        "the plan or would be refused",
        fix=f"set hardware.attention_data_parallel_size to {' or '.join(map(str, sizes))}",
    )


@rule(
    "engine.kv-cache-dtype",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/cache.py#L39-L59 (vLLM CacheDType); "
    "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/fields/model.py#L197-L221 (SGLang --kv-cache-dtype choices); "
    "https://nvidia.github.io/TensorRT-LLM/1.2.0/_modules/tensorrt_llm/llmapi/llm_args.html "
    "(TensorRT-LLM KvCacheConfig.dtype)",
)
def kv_cache_dtype_is_spelled(ctx: CompatContext) -> Finding | None:
    """Each engine accepts its own set of KV-cache dtypes (SGLang has no float16 choice,
    TensorRT-LLM no fp8_e5m2); rendering a nearby value instead would silently change memory
    use and numerics, so an unsupported choice is refused."""
    wanted = ctx.profile.serving.kv_cache_dtype
    accepted = ENGINES[ctx.engine].kv_cache_dtypes
    if wanted in accepted:
        return None
    return Finding.error(
        what=f"serving.kv_cache_dtype {wanted!r} has no {ctx.engine} spelling (accepted: {', '.join(accepted)})",
        why=f"{ctx.engine} refuses the flag at start-up",
        fix=f"set serving.kv_cache_dtype to one of {', '.join(sorted(accepted))}",
    )


def _fp8_kv_on_gpu(ctx: CompatContext) -> bool:
    serving, hardware = ctx.profile.serving, ctx.profile.hardware
    return (
        serving.kv_cache_dtype.startswith("fp8")
        and serving.kv_cache_dtype in ENGINES[ctx.engine].kv_cache_dtypes
        and hardware.device == "gpu"
    )


@rule(
    "engine.kv-cache-dtype-gpu",
    source="orchestrator/engines/vllm.py, orchestrator/engines/sglang.py and "
    "orchestrator/engines/trtllm.py fp8_kv_cache_on (vLLM 0.32.0 attention-backend selection, "
    "SGLang 0.5.23 default backends, TensorRT-LLM 1.2.0 hardware support matrix; each finding "
    "names the upstream lines)",
    applies=_fp8_kv_on_gpu,
)
def kv_cache_dtype_runs_on_gpu(ctx: CompatContext) -> Finding | None:
    """An fp8 KV cache needs an attention kernel that reads fp8 on the GPU's architecture. vLLM
    refuses it at start-up where its only eligible backend is Triton below SM 8.9 (Turing, and
    MLA models on Ampere); SGLang and TensorRT-LLM check nothing, so where neither their code nor
    their documentation confirms the combination it is flagged as unverified. Each engine module
    states what its release does (`Engine.fp8_kv_cache_on`), with the code it was read in."""
    gpu = _gpu(ctx)
    if gpu is None:
        return None
    dtype = ctx.profile.serving.kv_cache_dtype
    mla = ctx.target.is_mla if ctx.target is not None else None
    verdict = ENGINES[ctx.engine].fp8_kv_cache_on(ctx.release, gpu, dtype, mla=mla)
    if verdict is None:
        return None
    what = (
        f"serving.kv_cache_dtype: {dtype} on hardware.gpu: {gpu.name} ({gpu.arch_name}) with "
        f"{ctx.engine} {ctx.release.version}: {verdict.reason}"
    )
    if verdict.refused:
        finding = Finding.error(
            what=what,
            why=f"{ctx.engine} exits at start-up when it builds the attention backend",
            fix=verdict.fix
            or "set serving.kv_cache_dtype: auto, or hardware.gpu to one of SM 8.9 or newer",
        )
    else:
        finding = Finding.warning(
            what=what,
            why="the engine may fail when it first runs attention, or run slower than planned",
            fix=f"{verdict.fix or 'set serving.kv_cache_dtype: auto'}, unless this combination "
            "has run on this GPU before",
        )
    return replace(finding, source=verdict.source, field="serving.kv_cache_dtype")


def _gpu(ctx: CompatContext) -> Gpu | None:
    try:
        return find_gpu(ctx.profile.hardware.gpu or "")
    except ProfileError:
        return None  # the memory stage reports an unknown GPU


@rule("engine.removed-flag", source="orchestrator/engines/capabilities.yaml removed_flags")
def extra_args_use_no_removed_flag(ctx: CompatContext) -> list[Finding]:
    """Flags the pinned release removed or renamed make the engine exit at start-up with
    'unrecognized arguments'; copying examples from older releases is the usual cause."""
    findings = []
    for flag in _flags(ctx.profile.serving.extra_args):
        removed = ctx.release.removed(flag)
        if removed is not None:
            findings.append(
                Finding.error(
                    what=(
                        f"serving.extra_args has {flag}, removed in {ctx.engine} {removed.removed_in} "
                        f"({removed.source})"
                    ),
                    why=f"{ctx.engine} {ctx.release.version} exits at start-up on an unknown flag",
                    fix=f"remove {flag} from serving.extra_args; use {removed.replacement}",
                )
            )
    return findings


@rule("engine.managed-flag", source="orchestrator/engines/<engine>.py managed_flags")
def extra_args_do_not_override_managed_flags(ctx: CompatContext) -> list[Finding]:
    """specdeploy renders these flags from the profile; a second copy in extra_args would make the
    launch differ from the profile that was validated (and from its baseline twin)."""
    managed = ENGINES[ctx.engine].managed_flags
    return [
        Finding.error(
            what=f"serving.extra_args sets {flag}, which specdeploy renders from the profile",
            why="the engine would run with a value that validation and the memory budget never saw",
            fix=_managed_fix(flag, managed[flag]),
        )
        for flag in _flags(ctx.profile.serving.extra_args)
        if flag in managed and ctx.release.removed(flag) is None
    ]


def _managed_fix(flag: str, field: str) -> str:
    if field.startswith("("):
        return f"remove {flag} from serving.extra_args: specdeploy sets it for every launch"
    return f"remove {flag} from serving.extra_args and set `{field}` in the profile instead"


def _flags(args: tuple[str, ...]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("-") and not _is_number(a)]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


RULES = (
    engine_version_is_known,
    engine_supports_method,
    draft_tensor_parallel_is_accepted,
    pipeline_parallel_allows_speculation,
    kv_cache_dtype_is_spelled,
    attention_data_parallel_is_supported,
    kv_cache_dtype_runs_on_gpu,
    extra_args_use_no_removed_flag,
    extra_args_do_not_override_managed_flags,
)
