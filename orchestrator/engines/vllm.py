"""vLLM: `vllm serve MODEL ... --speculative-config '<json>'` (V1 engine, vLLM >= 0.10).

Flag names and speculative-config keys follow vLLM's `EngineArgs` / `SpeculativeConfig`
(https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py), checked against
vLLM 0.32.0's own parser in tests/conformance. `method` is always explicit: vLLM otherwise guesses
it from the draft's repository name (SpeculativeConfig.__post_init__, #L1334 of that file).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from orchestrator.engines.argv import fraction, optional_flag
from orchestrator.engines.base import EngineLaunch, KvDtypeVerdict, LaunchSpec, ScheduleSupport
from orchestrator.engines.names import EngineName
from orchestrator.engines.vllm_memory import VllmMemory
from orchestrator.engines.vllm_metrics import VllmMetrics

if TYPE_CHECKING:
    from orchestrator.compatibility.rule import Rule
    from orchestrator.engines.capabilities import EngineRelease
    from orchestrator.memory.gpus import Gpu
    from orchestrator.profile.schema import KvCacheDtype, Profile, SpecMethod

#: specdeploy method -> vLLM speculative-config method (SpeculativeMethod,
#: https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L73-L83).
_METHOD: Final[Mapping[str, str]] = {
    "draft_model": "draft_model",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "mtp": "mtp",
    "ngram": "ngram",
}
#: Before vLLM 0.11 the only MTP method the config accepted was "deepseek_mtp"; vLLM then found
#: the real family itself, but filled in the draft path only for some families, so specdeploy
#: names the target explicitly
#: (https://github.com/vllm-project/vllm/blob/v0.10.0/vllm/config.py#L2745-L2765; docs/engine-matrix.md).
_LEGACY_MTP_METHOD: Final = "deepseek_mtp"
#: vLLM's multi-node recipe
#: (https://github.com/vllm-project/vllm/blob/v0.32.0/docs/deployment/frameworks/lws.md; the script
#: is https://github.com/vllm-project/vllm/blob/7a3bde4c9988d419449263a80f79e5d586e872a4/examples/online_serving/multi-node-serving.sh,
#: shipped in the vllm/vllm-openai image): the leader starts a Ray head and waits for the whole
#: group, then serves; workers join the Ray cluster, over which vLLM spreads TP x PP.
RAY_SCRIPT: Final = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
#: Where vLLM's fp8 KV-cache facts were read (`fp8_kv_cache_on`); other releases get warnings.
FP8_KV_READ_AT: Final = "0.32.0"
_V: Final = "https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/"
#: Below SM 8.0 neither FlashAttention nor FlashInfer qualifies, so vLLM picks its Triton backend,
#: which refuses an fp8 KV cache below SM 8.9 ("native FP8 (fp8e4nv) requires SM89+").
FP8_KV_TRITON_SOURCE: Final = (
    f"{_V}platforms/cuda.py#L83-L176 (backend priorities); "
    f"{_V}v1/attention/backends/flash_attn.py#L453-L454 and "
    f"{_V}v1/attention/backends/flashinfer.py#L571-L579 (SM 8.0 and up); "
    f"{_V}v1/attention/backends/triton_attn.py#L486-L500 (fp8 refused below SM 8.9)"
)
#: MLA models below SM 9.0 get only the Triton MLA backend, which refuses fp8 below SM 8.9; no MLA
#: backend lists fp8_e5m2.
FP8_KV_MLA_SOURCE: Final = (
    f"{_V}v1/attention/backends/mla/triton_mla.py#L97-L103 and #L195-L209; "
    f"{_V}v1/attention/backends/mla/flashattn_mla.py#L70-L71, "
    f"{_V}v1/attention/backends/mla/flashmla.py#L49-L55, "
    f"{_V}v1/attention/backends/mla/flashinfer_mla.py#L195-L201, "
    f"{_V}v1/attention/backends/mla/cutlass_mla.py#L40-L46"
)
#: The release whose code the draft-length schedule (num_speculative_tokens_per_batch_size) was
#: read in; its first release was not established, so older ones are unchecked.
SCHEDULE_READ_AT: Final = "0.32.0"
SCHEDULE_SOURCE: Final = (
    f"{_V}config/speculative.py#L490-L496 (the field); "
    f"{_V}v1/spec_decode/dynamic/utils.py#L7-L148 (validation and the batch-size lookup); "
    f"{_V}config/utils.py#L70-L71 (unknown keys are refused)"
)
#: vLLM KV-cache dtype spelling (CacheDType,
#: https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/cache.py#L39-L59).
KV_DTYPE: Final[Mapping[str, str]] = {
    "auto": "auto",
    "bfloat16": "bfloat16",
    "float16": "float16",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}


class VllmEngine:
    """Renders `vllm serve` for the pinned vLLM release."""

    name: ClassVar[EngineName] = "vllm"
    kv_cache_dtypes: ClassVar[Mapping[str, str]] = KV_DTYPE
    #: Flags this module renders -> the profile field that sets each (extra_args may not).
    managed_flags: ClassVar[Mapping[str, str]] = {
        "--host": "(set by specdeploy)",
        "--port": "serving.port",
        "--served-model-name": "(set by specdeploy)",
        "--tensor-parallel-size": "hardware.tensor_parallel_size",
        "--data-parallel-size": "hardware.attention_data_parallel_size",
        "-dp": "hardware.attention_data_parallel_size",
        "--enable-expert-parallel": "hardware.expert_parallel",
        "-ep": "hardware.expert_parallel",
        "-tp": "hardware.tensor_parallel_size",
        "--pipeline-parallel-size": "hardware.pipeline_parallel_size",
        "-pp": "hardware.pipeline_parallel_size",
        "--max-model-len": "serving.max_model_len",
        "--max-num-seqs": "serving.max_concurrency",
        "--gpu-memory-utilization": "serving.gpu_memory_fraction",
        "--kv-cache-dtype": "serving.kv_cache_dtype",
        "--dtype": "target.dtype",
        "--revision": "target.revision",
        "--quantization": "target.quantization",
        "-q": "target.quantization",
        "--trust-remote-code": "target.trust_remote_code",
        "--speculative-config": "proposer",
        "-sc": "proposer",
        "--spec-method": "proposer.method",
        "--spec-model": "proposer.model",
        "--spec-tokens": "proposer.num_speculative_tokens",
        "--enforce-eager": "vllm.enforce_eager",
        "--max-num-batched-tokens": "vllm.max_num_batched_tokens",
        "--model": "target.model",
    }

    multi_node_gap: ClassVar[str | None] = None
    #: /dev/shm for NCCL/torch shared memory with tensor parallelism: 2Gi in vLLM's Kubernetes
    #: guide (https://github.com/vllm-project/vllm/blob/v0.32.0/docs/deployment/k8s.md).
    shm_size: ClassVar[str] = "2Gi"
    #: `verify_equal_vocab_size_if_draft_model` refuses a draft whose vocab_size differs, even by
    #: padding (https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py).
    serves_eagle1_heads: ClassVar[bool] = True
    #: `method: eagle` builds EagleLlamaForCausalLM, whose weight loader refuses an EAGLE-3 head's
    #: tensors (midlayer.*, a 3 x hidden fc)
    #: (https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/llama_eagle.py#L187-L196).
    runs_eagle3_head_as_eagle1: ClassVar[bool] = False
    memory: ClassVar[VllmMemory] = VllmMemory()
    metrics: ClassVar[VllmMetrics] = VllmMetrics()

    def speculative_flags(self) -> frozenset[str]:
        return frozenset({"--speculative-config"})

    def draft_tensor_parallel_choices(
        self, method: SpecMethod, target_tp: int
    ) -> tuple[int, ...] | None:
        # `_verify_and_get_draft_tp`: 1 or the target's TP; the draft_model proposer shares the
        # target's TP group, so it must be the target's
        # (https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py).
        if method == "draft_model":
            return (target_tp,)
        return tuple(sorted({1, target_tp}))

    def attention_data_parallel_sizes(self, tensor_parallel_size: int) -> tuple[int, ...]:
        # --data-parallel-size N with --tensor-parallel-size TP / N: any divisor.
        return tuple(n for n in range(1, tensor_parallel_size + 1) if tensor_parallel_size % n == 0)

    def reads_speculators_heads(self, release: EngineRelease) -> bool | None:
        return release.has("speculators-heads")

    def reads_batch_size_schedule(self, release: EngineRelease) -> ScheduleSupport:
        if release.has("spec-batch-size-schedule"):
            return ScheduleSupport(
                supported=True,
                reason="--speculative-config takes num_speculative_tokens_per_batch_size",
                source=SCHEDULE_SOURCE,
            )
        return ScheduleSupport(
            supported=None,
            reason=f"specdeploy checked num_speculative_tokens_per_batch_size against vLLM "
            f"{SCHEDULE_READ_AT}'s code only; a release without the field refuses the whole "
            "--speculative-config (vLLM configs forbid unknown keys)",
            source=SCHEDULE_SOURCE,
        )

    def schedule_blocked_by(self, profile: Profile) -> str | None:
        # VllmConfig drops the schedule with data parallelism (vllm_rules.py, the rule that says so).
        groups = profile.hardware.attention_data_parallel_size
        if groups > 1:
            return f"--data-parallel-size {groups}: vLLM drops the schedule with data parallelism"
        return None

    def speculates_with_pipeline_parallel(self, release: EngineRelease, method: SpecMethod) -> bool:
        del release
        # vLLM documents speculation as not composable with PP, except EAGLE-3 on recent releases
        # (https://github.com/vllm-project/vllm/blob/v0.32.0/docs/features/spec_decode.md).
        return method == "eagle3"

    def fp8_kv_cache_on(
        self, release: EngineRelease, gpu: Gpu, dtype: KvCacheDtype, *, mla: bool | None
    ) -> KvDtypeVerdict | None:
        verdict = _fp8_kv_at_0320(gpu, dtype, mla=mla)
        if verdict is None or release.rules_version == FP8_KV_READ_AT or not verdict.refused:
            return verdict
        return KvDtypeVerdict(
            refused=False,
            reason=f"vLLM {FP8_KV_READ_AT} refuses it ({verdict.reason}); this release was not "
            "checked",
            source=verdict.source,
            fix=verdict.fix,
        )

    def draft_vocab_must_match(self, release: EngineRelease) -> bool:
        # verify_equal_vocab_size_if_draft_model (vllm/config/speculative.py) at every release
        # specdeploy supports.
        del release
        return True

    def rules(self) -> tuple[Rule, ...]:
        from orchestrator.engines import vllm_rules

        return vllm_rules.RULES

    def multi_node(
        self, argv: Sequence[str], *, nodes: int, rank: str, leader_address: str
    ) -> tuple[list[str], list[str]]:
        del rank  # Ray places the ranks
        ray_head = f"bash {RAY_SCRIPT} leader --ray_cluster_size={nodes}"
        leader = ["/bin/sh", "-c", f"{ray_head} && exec {shlex.join(argv)}"]
        worker = ["/bin/sh", "-c", f"bash {RAY_SCRIPT} worker --ray_address={leader_address}"]
        return leader, worker

    def launch(self, spec: LaunchSpec) -> EngineLaunch:
        profile = spec.profile
        serving, hardware = profile.serving, profile.hardware
        argv: list[str] = ["vllm", "serve", spec.target_model]
        argv += ["--host", spec.host, "--port", str(serving.port)]
        argv += ["--served-model-name", spec.served_model_name]
        groups = hardware.attention_data_parallel_size
        argv += ["--tensor-parallel-size", str(hardware.attention_tensor_parallel_size)]
        argv += ["--pipeline-parallel-size", str(hardware.pipeline_parallel_size)]
        if groups > 1:
            argv += ["--data-parallel-size", str(groups)]
        if hardware.expert_parallel:
            argv.append("--enable-expert-parallel")
        argv += ["--max-model-len", str(serving.max_model_len)]
        # Each data-parallel rank is an engine core with its own scheduler and max_num_seqs
        # (vllm/v1/engine/core.py builds one per rank), so the replica's cap is split over them.
        argv += ["--max-num-seqs", str(-(-serving.max_concurrency // groups))]
        argv += ["--gpu-memory-utilization", fraction(spec.memory_fraction)]
        argv += ["--kv-cache-dtype", KV_DTYPE[serving.kv_cache_dtype]]
        argv += ["--dtype", profile.target.dtype]
        argv += optional_flag("--revision", profile.target.revision)
        argv += optional_flag("--quantization", profile.target.quantization)
        if profile.target.trust_remote_code:
            argv.append("--trust-remote-code")
        tuning = profile.vllm
        if tuning is not None and tuning.enforce_eager:
            argv.append("--enforce-eager")
        if tuning is not None and tuning.max_num_batched_tokens is not None:
            argv += ["--max-num-batched-tokens", str(tuning.max_num_batched_tokens)]
        if spec.speculative:
            argv += ["--speculative-config", json.dumps(_speculative_config(spec), sort_keys=True)]
        argv += list(serving.extra_args)
        env: dict[str, str] = {}
        if hardware.device == "cpu" and tuning is not None and tuning.cpu_kvcache_space_gib:
            # vLLM's CPU backend sizes its KV cache from this variable (GiB), not from
            # --gpu-memory-utilization (docs: getting_started/installation/cpu).
            env["VLLM_CPU_KVCACHE_SPACE"] = str(tuning.cpu_kvcache_space_gib)
        return EngineLaunch(
            engine=self.name,
            version=spec.release.version,
            image=profile.engine.image or spec.release.image,
            argv=tuple(argv),
            port=serving.port,
            # /health is 200 once the engine is up (503 once it has died):
            # https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/entrypoints/serve/instrumentator/health.py#L22-L33
            health_path="/health",
            ready_path="/health",
            metrics_path="/metrics",
            env=env,
        )


def _fp8_kv_at_0320(gpu: Gpu, dtype: KvCacheDtype, *, mla: bool | None) -> KvDtypeVerdict | None:
    """vLLM 0.32.0's attention-backend selection for an fp8 KV cache (CUDA)."""
    cc = gpu.compute_capability
    if cc is None:
        return KvDtypeVerdict(
            refused=False,
            reason=f"specdeploy has not read vLLM's ROCm attention backends ({gpu.arch_name})",
            source=f"{_V}platforms/rocm.py",
        )
    if mla and dtype == "fp8_e5m2":
        return KvDtypeVerdict(
            refused=True,
            reason="no MLA attention backend lists fp8_e5m2 (no valid attention backend)",
            source=FP8_KV_MLA_SOURCE,
            fix="set serving.kv_cache_dtype: fp8_e4m3",
        )
    if mla and cc < (8, 9):
        return KvDtypeVerdict(
            refused=True,
            reason="MLA models below SM 9.0 run on the Triton MLA backend, which refuses an fp8 "
            "KV cache below SM 8.9",
            source=FP8_KV_MLA_SOURCE,
        )
    if cc < (8, 0):
        return KvDtypeVerdict(
            refused=True,
            reason="below SM 8.0 only the Triton attention backend qualifies, and it refuses an "
            "fp8 KV cache below SM 8.9",
            source=FP8_KV_TRITON_SOURCE,
        )
    if mla is None and cc < (8, 9):
        return KvDtypeVerdict(
            refused=False,
            reason="MLA targets are refused below SM 8.9 and this target's attention is unknown",
            source=FP8_KV_MLA_SOURCE,
        )
    return None


def draft_revision(spec: LaunchSpec) -> str | None:
    """The revision of the weights the proposer loads. MTP layers live in the target checkpoint,
    and vLLM points the draft at the target's path but not at its revision (SpeculativeConfig
    builds the draft ModelConfig with `revision=self.revision`:
    https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L1148-L1158 and
    #L1303), so a pinned target.revision must be passed on or the MTP weights come from `main`."""
    proposer = spec.profile.proposer
    if proposer.method == "mtp":
        return proposer.revision or spec.profile.target.revision
    return proposer.revision


def _speculative_config(spec: LaunchSpec) -> dict[str, Any]:
    proposer = spec.profile.proposer
    method = _METHOD[proposer.method]
    draft = spec.draft_model
    if method == "mtp" and not spec.release.has("mtp-unified-method"):
        method, draft = _LEGACY_MTP_METHOD, spec.target_model
    config: dict[str, Any] = {
        "method": method,
        "num_speculative_tokens": proposer.num_speculative_tokens,
    }
    if draft is not None:
        config["model"] = draft
    revision = draft_revision(spec)
    if revision is not None:
        config["revision"] = revision
    if proposer.draft_tensor_parallel_size is not None:
        config["draft_tensor_parallel_size"] = proposer.draft_tensor_parallel_size
    if proposer.method == "ngram" and proposer.ngram is not None:
        config["prompt_lookup_min"] = proposer.ngram.min_window
        config["prompt_lookup_max"] = proposer.ngram.max_window
    schedule = proposer.num_speculative_tokens_per_batch_size
    if schedule is not None:
        # As written (vLLM sorts the ranges itself): [[range_start, range_end, k], ...].
        config["num_speculative_tokens_per_batch_size"] = [list(entry) for entry in schedule]
    return config
