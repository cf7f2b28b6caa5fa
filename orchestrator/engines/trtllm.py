"""TensorRT-LLM: `trtllm-serve MODEL --config <yaml>` with the LLM-API options in a YAML file.

The YAML is dumped from the typed models below (extra keys forbidden), not templated. Field names
follow `tensorrt_llm/llmapi/llm_args.py` (TorchLlmArgs, DecodingBaseConfig and subclasses) as read
at releases 1.0.0, 1.1.0, 1.2.0 and 1.2.1; tests/fixtures/trtllm/ holds what each release accepts
and tests/conformance/trtllm_referee.py checks every rendered key and flag against it.

Parallelism and limits are written both as trtllm-serve flags and in the YAML with the same
values: 1.0-1.2 trtllm-serve lets the YAML override flags (`llm_args | yaml` in
update_llm_args_with_extra_dict), newer releases may do the reverse (B1), so identical values keep
the launch correct under either precedence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, ClassVar, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from orchestrator.engines.base import (
    EngineLaunch,
    KvDtypeVerdict,
    LaunchSpec,
    ModelDownload,
    ScheduleSupport,
)
from orchestrator.engines.names import EngineName
from orchestrator.engines.trtllm_memory import TrtllmMemory, effective_max_num_tokens
from orchestrator.engines.trtllm_metrics import TrtllmMetrics
from orchestrator.profile.schema import NgramSpec

if TYPE_CHECKING:
    from orchestrator.compatibility.rule import Rule
    from orchestrator.engines.capabilities import EngineRelease
    from orchestrator.memory.gpus import Gpu
    from orchestrator.profile.schema import KvCacheDtype, Profile, SpecMethod

CONFIG_FILE: Final = "extra-llm-api-config.yaml"
#: Where DecodingBaseConfig was read: the 1.1.0 and 1.2.0 documentation builds' source pages.
SCHEDULE_SOURCE: Final = (
    "https://github.com/NVIDIA/TensorRT-LLM/blob/8660c119a1f9be58cb574b8895f60bdb2e2c40ec/1.1.0/"
    "_modules/tensorrt_llm/llmapi/llm_args.html and "
    "https://github.com/NVIDIA/TensorRT-LLM/blob/7e873e54c296912df55b4c961e67079963ae4d34/1.2.0/"
    "_modules/tensorrt_llm/llmapi/llm_args.html (DecodingBaseConfig)"
)
#: The "Hardware Support Matrix" of the 1.2.0 documentation (build of commit dbdb13b): FP8 KV
#: cache on Blackwell (sm100/103, sm120), Hopper, Ada Lovelace and Ampere.
FP8_KV_MATRIX_SOURCE: Final = (
    "https://github.com/NVIDIA/TensorRT-LLM/blob/7e873e54c296912df55b4c961e67079963ae4d34/"
    "1.2.0/features/quantization.html (Hardware Support Matrix, FP8 KV Cache)"
)
#: Where a draft/head the engine cannot fetch itself is downloaded before it starts.
DRAFT_DOWNLOAD_DIR: Final = "/models/downloads/draft"

#: specdeploy method -> speculative_config.decoding_type (DecodingBaseConfig.from_dict keys).
DECODING_TYPE: Final[Mapping[str, str]] = {
    "eagle3": "Eagle3",
    "mtp": "MTP",
    "ngram": "NGram",
    "draft_model": "DraftTarget",
}
#: kv_cache_config.dtype spelling (KvCacheConfig.dtype: auto | fp8 | torch dtype names).
KV_DTYPE: Final[Mapping[str, str]] = {
    "auto": "auto",
    "bfloat16": "bfloat16",
    "float16": "float16",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
}


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpeculativeConfig(_Options):
    """`speculative_config`: a union keyed by decoding_type (B2/B3)."""

    decoding_type: Literal["Eagle", "Eagle3", "MTP", "NGram", "DraftTarget"]
    max_draft_len: int | None = None
    speculative_model_dir: str | None = None
    """Draft/head path; `speculative_model` is the newer alias, `_dir` is accepted by every release."""
    num_nextn_predict_layers: int | None = None
    """MTP depth on releases where it sets max_draft_len (1.0-1.2: MTPDecodingConfig)."""
    max_matching_ngram_size: int | None = None
    is_keep_all: bool | None = None
    is_use_oldest: bool | None = None


class KvCacheConfig(_Options):
    free_gpu_memory_fraction: float
    """Share of the memory left after weights that the KV cache takes (not of total memory)."""
    dtype: str | None = None


class CudaGraphConfig(_Options):
    max_batch_size: int
    enable_padding: bool = True


class LlmApiOptions(_Options):
    """The subset of TorchLlmArgs that specdeploy writes."""

    backend: Literal["pytorch"] = "pytorch"
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_batch_size: int
    max_seq_len: int
    max_num_tokens: int
    enable_chunked_prefill: bool | None = None
    revision: str | None = None
    kv_cache_config: KvCacheConfig
    cuda_graph_config: CudaGraphConfig | None = None
    disable_overlap_scheduler: bool | None = None
    enable_iter_perf_stats: bool | None = None
    trust_remote_code: bool | None = None
    enable_attention_dp: bool | None = None
    moe_expert_parallel_size: int | None = None
    speculative_config: SpeculativeConfig | None = None


class TrtllmEngine:
    """Renders `trtllm-serve` plus its LLM-API options YAML for the pinned release."""

    name: ClassVar[EngineName] = "trtllm"
    kv_cache_dtypes: ClassVar[Mapping[str, str]] = KV_DTYPE
    #: Flags this module renders -> the profile field that sets each (extra_args may not).
    managed_flags: ClassVar[Mapping[str, str]] = {
        "--host": "(set by specdeploy)",
        "--port": "serving.port",
        "--backend": "(set by specdeploy)",
        "--tp_size": "hardware.tensor_parallel_size",
        "--tensor_parallel_size": "hardware.tensor_parallel_size",
        "--pp_size": "hardware.pipeline_parallel_size",
        "--max_batch_size": "trtllm.max_batch_size",
        "--max_seq_len": "serving.max_model_len",
        "--max_num_tokens": "trtllm.max_num_tokens",
        "--kv_cache_free_gpu_memory_fraction": "trtllm.free_gpu_memory_fraction",
        "--free_gpu_memory_fraction": "trtllm.free_gpu_memory_fraction",
        "--config": "(set by specdeploy)",
        "--extra_llm_api_options": "(set by specdeploy)",
        "--revision": "target.revision",
        "--trust_remote_code": "target.trust_remote_code",
    }

    multi_node_gap: ClassVar[str | None] = (
        "TensorRT-LLM spans nodes through MPI (trtllm-llmapi-launch under mpirun or Slurm), "
        "which specdeploy's manifests do not set up"
    )

    #: TensorRT-LLM documents only `--ipc=host`; it gets SGLang's figure. A limit, not an
    #: allocation.
    shm_size: ClassVar[str] = "32Gi"
    #: DraftTarget does not compare vocab sizes.
    #: The PyTorch backend serves EAGLE-3 heads only; `Eagle` is converted to Eagle3
    #: (https://github.com/NVIDIA/TensorRT-LLM/blob/v1.2.0/docs/source/features/speculative-decoding.md).
    serves_eagle1_heads: ClassVar[bool] = False
    #: Not applicable: every head is served as EAGLE-3 (engine.trtllm-eagle-checkpoint).
    runs_eagle3_head_as_eagle1: ClassVar[bool] = False
    memory: ClassVar[TrtllmMemory] = TrtllmMemory()
    metrics: ClassVar[TrtllmMetrics] = TrtllmMetrics()

    def speculative_flags(self) -> frozenset[str]:
        return frozenset({"speculative_config"})

    def draft_tensor_parallel_choices(
        self, method: SpecMethod, target_tp: int
    ) -> tuple[int, ...] | None:
        del method, target_tp
        return None  # the draft runs at the target's tensor_parallel_size

    def attention_data_parallel_sizes(self, tensor_parallel_size: int) -> tuple[int, ...]:
        # enable_attention_dp is a switch: one attention rank per GPU, or none.
        return (1, tensor_parallel_size)

    def reads_speculators_heads(self, release: EngineRelease) -> bool | None:
        del release
        return None  # not checked: no release's code could be read for it here

    def speculates_with_pipeline_parallel(self, release: EngineRelease, method: SpecMethod) -> bool:
        del release
        del method
        return True

    def reads_batch_size_schedule(self, release: EngineRelease) -> ScheduleSupport:
        # DecodingBaseConfig has max_concurrency from 1.1.0 and draft_len_schedule from 1.2.0
        # (tests/fixtures/trtllm, read at each release); specdeploy maps and renders neither.
        return ScheduleSupport(
            supported=False,
            reason=f"specdeploy renders no draft length by batch size for TensorRT-LLM "
            f"{release.version}: its speculative_config has max_concurrency (from 1.1.0) and "
            "draft_len_schedule (from 1.2.0), which specdeploy does not map",
            source=SCHEDULE_SOURCE,
        )

    def schedule_blocked_by(self, profile: Profile) -> str | None:
        del profile
        return None  # no release's schedule is rendered (reads_batch_size_schedule)

    def fp8_kv_cache_on(
        self, release: EngineRelease, gpu: Gpu, dtype: KvCacheDtype, *, mla: bool | None
    ) -> KvDtypeVerdict | None:
        del release, dtype, mla
        cc = gpu.compute_capability
        if cc is not None and cc >= (8, 0):
            return None
        return KvDtypeVerdict(
            refused=False,
            reason=f"TensorRT-LLM documents an fp8 KV cache on Ampere (SM 8.0) and newer NVIDIA "
            f"GPUs only, not on {gpu.arch_name}",
            source=FP8_KV_MATRIX_SOURCE,
        )

    def draft_vocab_must_match(self, release: EngineRelease) -> bool:
        # DraftTarget: the docs ask for the same tokenizer; no release compares the sizes.
        del release
        return False

    def rules(self) -> tuple[Rule, ...]:
        return ()

    def multi_node(
        self, argv: Sequence[str], *, nodes: int, rank: str, leader_address: str
    ) -> tuple[list[str], list[str]]:
        raise NotImplementedError(self.multi_node_gap)

    def launch(self, spec: LaunchSpec) -> EngineLaunch:
        profile = spec.profile
        downloads = draft_downloads(spec)
        options = build_options(spec, downloads)
        config_flag = "--config" if spec.release.has("config-flag") else "--extra_llm_api_options"
        argv = ["trtllm-serve", spec.target_model, "--host", spec.host]
        argv += ["--port", str(profile.serving.port), "--backend", "pytorch"]
        argv += ["--tp_size", str(options.tensor_parallel_size)]
        argv += ["--pp_size", str(options.pipeline_parallel_size)]
        argv += ["--max_batch_size", str(options.max_batch_size)]
        argv += ["--max_seq_len", str(options.max_seq_len)]
        argv += ["--max_num_tokens", str(options.max_num_tokens)]
        argv += [
            "--kv_cache_free_gpu_memory_fraction",
            str(options.kv_cache_config.free_gpu_memory_fraction),
        ]
        if profile.target.revision is not None and spec.release.has("serve-revision-flag"):
            argv += ["--revision", profile.target.revision]  # else only the YAML `revision`
        if profile.target.trust_remote_code:
            argv.append("--trust_remote_code")
        argv += [config_flag, f"{spec.config_dir}/{CONFIG_FILE}"]
        argv += list(profile.serving.extra_args)
        dumped = options.model_dump(mode="json", exclude_none=True)
        return EngineLaunch(
            engine=self.name,
            version=spec.release.version,
            image=profile.engine.image or spec.release.image,
            argv=tuple(argv),
            port=profile.serving.port,
            # /health: server up; /health_generate: a 1-token generation succeeded (B5).
            health_path="/health",
            ready_path="/health_generate",
            metrics_path="/metrics",
            config_files={CONFIG_FILE: yaml.safe_dump(dumped, sort_keys=True)},
            config_dir=spec.config_dir,
            downloads=downloads,
        )


def draft_downloads(spec: LaunchSpec) -> tuple[ModelDownload, ...]:
    """The draft/head to fetch before start: a hub id on releases whose speculative_model_dir
    must be a local directory (before PR #10099, in 1.2.0), or a pinned proposer.revision, which
    no release's speculative_config can pass on."""
    draft = spec.draft_model
    if not spec.speculative or draft is None or PurePosixPath(draft).is_absolute():
        return ()
    revision = spec.profile.proposer.revision
    if spec.release.has("speculative-model-hub-id") and revision is None:
        return ()
    return (ModelDownload(repo_id=draft, revision=revision, target_dir=DRAFT_DOWNLOAD_DIR),)


def build_options(spec: LaunchSpec, downloads: tuple[ModelDownload, ...] = ()) -> LlmApiOptions:
    """The typed LLM-API options for this launch."""
    profile = spec.profile
    tuning = profile.trtllm
    fraction = spec.memory_fraction
    if tuning is not None and tuning.free_gpu_memory_fraction is not None:
        fraction = tuning.free_gpu_memory_fraction
    max_batch = profile.serving.max_concurrency
    if tuning is not None and tuning.max_batch_size is not None:
        max_batch = tuning.max_batch_size
    graph = None
    if tuning is not None and tuning.cuda_graph_max_batch_size is not None:
        graph = CudaGraphConfig(max_batch_size=tuning.cuda_graph_max_batch_size)
    kv_dtype = profile.serving.kv_cache_dtype
    max_num_tokens = effective_max_num_tokens(profile)
    return LlmApiOptions(
        tensor_parallel_size=profile.hardware.tensor_parallel_size,
        pipeline_parallel_size=profile.hardware.pipeline_parallel_size,
        max_batch_size=max_batch,
        max_seq_len=profile.serving.max_model_len,
        max_num_tokens=max_num_tokens,
        # Without chunked prefill a prompt longer than max_num_tokens is refused (#9277).
        enable_chunked_prefill=True if max_num_tokens < profile.serving.max_model_len else None,
        revision=profile.target.revision,
        kv_cache_config=KvCacheConfig(
            free_gpu_memory_fraction=round(fraction, 3),
            dtype=None if kv_dtype == "auto" else KV_DTYPE[kv_dtype],
        ),
        cuda_graph_config=graph,
        disable_overlap_scheduler=_overlap_disabled(spec),
        enable_iter_perf_stats=tuning.enable_iter_perf_stats if tuning is not None else True,
        trust_remote_code=True if profile.target.trust_remote_code else None,
        # enable_attention_dp gives every rank its own attention (attention DP size = TP); the
        # attention-data-parallel rule refuses any other group count for TensorRT-LLM.
        enable_attention_dp=True if profile.hardware.attention_data_parallel_size > 1 else None,
        moe_expert_parallel_size=(
            profile.hardware.tensor_parallel_size if profile.hardware.expert_parallel else None
        ),
        speculative_config=_speculative_config(spec, downloads) if spec.speculative else None,
    )


def _speculative_config(
    spec: LaunchSpec, downloads: tuple[ModelDownload, ...]
) -> SpeculativeConfig:
    proposer = spec.profile.proposer
    k = proposer.num_speculative_tokens
    decoding = DECODING_TYPE.get(proposer.method, "Eagle3")
    if decoding == "Eagle3" and not spec.release.has("eagle3-decoding-type"):
        decoding = "Eagle"  # from_dict knows "Eagle" only up to 1.2.1; PyTorch runs it as EAGLE-3
    if decoding == "MTP" and spec.release.has("mtp-nextn-field"):
        return SpeculativeConfig(decoding_type="MTP", num_nextn_predict_layers=k)
    draft = downloads[0].target_dir if downloads else spec.draft_model
    if decoding == "NGram":
        # max_matching_ngram_size defaults to 0, which validate_speculative_config refuses.
        window = (proposer.ngram or NgramSpec()).max_window
        return SpeculativeConfig(
            decoding_type=decoding, max_draft_len=k, max_matching_ngram_size=window
        )
    return SpeculativeConfig(decoding_type=decoding, max_draft_len=k, speculative_model_dir=draft)


def _overlap_disabled(spec: LaunchSpec) -> bool | None:
    """NGram runs its drafter outside the engine loop and does not support the overlap scheduler;
    draft/target did not on <= 1.2 either (B4). Otherwise leave the engine default."""
    tuning = spec.profile.trtllm
    if tuning is not None and tuning.disable_overlap_scheduler is not None:
        return tuning.disable_overlap_scheduler
    if spec.method in ("ngram", "draft_model"):
        return True
    return None
