"""SGLang: `python3 -m sglang.launch_server --model-path MODEL ... --speculative-*`.

Flags follow SGLang's server arguments
(https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/fields/spec.py) and are
checked against sglang 0.5.23's `prepare_server_args` in tests/conformance. SGLang wants steps,
topk and draft tokens either all unset or all set
(https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/speculative_hook.py#L1159-L1163),
so specdeploy always sets all three.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Final

from orchestrator.engines.argv import fraction, optional_flag
from orchestrator.engines.base import EngineLaunch, KvDtypeVerdict, LaunchSpec, ScheduleSupport
from orchestrator.engines.names import EngineName
from orchestrator.engines.sglang_adaptive import (
    ADAPTIVE_FILE,
    ADAPTIVE_SOURCE,
    ALGORITHM,
    AdaptiveLaunch,
    adaptive_launch,
    adaptive_unsupported,
)
from orchestrator.engines.sglang_memory import SglangMemory
from orchestrator.engines.sglang_metrics import SglangMetrics

if TYPE_CHECKING:
    from orchestrator.compatibility.rule import Rule
    from orchestrator.engines.capabilities import EngineRelease
    from orchestrator.memory.gpus import Gpu
    from orchestrator.profile.schema import KvCacheDtype, Profile, SpecMethod

#: Port of the torch.distributed rendezvous on the first node, with --nnodes / --node-rank /
#: --dist-init-addr (SGLang's multi-node StatefulSet example uses these flags and port 20000:
#: https://github.com/sgl-project/sglang/blob/v0.5.23/docker/k8s-sglang-distributed-sts.yaml).
DIST_INIT_PORT: Final = 20000
#: --kv-cache-dtype spelling; float16 has no SGLang spelling
#: (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/fields/model.py#L197-L221).
KV_DTYPE: Final[Mapping[str, str]] = {
    "auto": "auto",
    "bfloat16": "bfloat16",
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}


_S: Final = "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/"
#: The default attention backend per architecture (MHA: fa3 on Hopper, trtllm_mha on SM100,
#: FlashInfer elsewhere unless the model has attention sinks, then Triton; MLA: fa3 on Hopper,
#: FlashInfer on SM100, Triton elsewhere), and the fp8 KV dtype mapping, which checks no
#: architecture. Read in sglang 0.5.23.
FP8_KV_BACKEND_SOURCE: Final = (
    f"{_S}arg_groups/model_override_base.py#L302-L351; {_S}mem_cache/kv_cache_dtype.py#L60-L72"
)
#: fa3 cannot read fp8_e5m2: SGLang switches the backend to Triton with a log line.
FP8_E5M2_FA3_SOURCE: Final = f"{_S}arg_groups/overrides.py#L1262-L1270"


class SglangEngine:
    """Renders `sglang.launch_server` for the pinned SGLang release."""

    name: ClassVar[EngineName] = "sglang"
    kv_cache_dtypes: ClassVar[Mapping[str, str]] = KV_DTYPE
    #: Flags this module renders -> the profile field that sets each (extra_args may not).
    managed_flags: ClassVar[Mapping[str, str]] = {
        "--model-path": "target.model",
        "--model": "target.model",
        "--host": "(set by specdeploy)",
        "--port": "serving.port",
        "--served-model-name": "(set by specdeploy)",
        "--tp-size": "hardware.tensor_parallel_size",
        "--attn-dp-size": "hardware.attention_data_parallel_size",
        "--attention-data-parallel-size": "hardware.attention_data_parallel_size",
        "--dp-size": "hardware.attention_data_parallel_size",
        "--data-parallel-size": "hardware.attention_data_parallel_size",
        "--enable-dp-attention": "hardware.attention_data_parallel_size",
        "--ep-size": "hardware.expert_parallel",
        "--expert-parallel-size": "hardware.expert_parallel",
        "--enable-ep-moe": "hardware.expert_parallel",
        "--tensor-parallel-size": "hardware.tensor_parallel_size",
        "--pp-size": "hardware.pipeline_parallel_size",
        "--context-length": "serving.max_model_len",
        "--max-running-requests": "serving.max_concurrency",
        "--mem-fraction-static": "sglang.mem_fraction_static",
        "--kv-cache-dtype": "serving.kv_cache_dtype",
        "--dtype": "target.dtype",
        "--revision": "target.revision",
        "--quantization": "target.quantization",
        "--trust-remote-code": "target.trust_remote_code",
        "--speculative-algorithm": "proposer.method",
        "--speculative-draft-model-path": "proposer.model",
        "--speculative-draft-model": "proposer.model",
        "--speculative-draft-model-revision": "proposer.revision",
        "--speculative-num-steps": "proposer.num_speculative_tokens",
        "--speculative-eagle-topk": "sglang.eagle_topk",
        "--speculative-num-draft-tokens": "sglang.num_draft_tokens",
        "--speculative-adaptive": "sglang.adaptive",
        "--speculative-adaptive-config": "sglang.adaptive.slots",
        "--cuda-graph-max-bs": "sglang.cuda_graph_max_bs",
        "--cuda-graph-max-bs-decode": "sglang.cuda_graph_max_bs",
        "--disable-overlap-schedule": "sglang.disable_overlap_schedule",
        "--enable-metrics": "(set by specdeploy)",
        "--nnodes": "hardware.gpus_per_node",
        "--node-rank": "(set by specdeploy)",
        "--dist-init-addr": "(set by specdeploy)",
    }
    multi_node_gap: ClassVar[str | None] = None
    #: `docker run --shm-size 32g` in SGLang's install docs
    #: (https://github.com/sgl-project/sglang/blob/v0.5.23/docs/get_started/install.md).
    shm_size: ClassVar[str] = "32Gi"
    #: STANDALONE drafts are not compared by vocab_size (padding-only differences run).
    serves_eagle1_heads: ClassVar[bool] = True
    #: The draft class comes from the head's own config (LlamaForCausalLMEagle3), and under EAGLE
    #: it gets one hidden state, so its fc is skipped and acceptance falls to ~1.0 without an error
    #: (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/models/llama_eagle3.py#L237-L238;
    #: sgl-project/sglang PR #21272).
    runs_eagle3_head_as_eagle1: ClassVar[bool] = True
    memory: ClassVar[SglangMemory] = SglangMemory()
    metrics: ClassVar[SglangMetrics] = SglangMetrics()

    def speculative_flags(self) -> frozenset[str]:
        return frozenset(f for f in self.managed_flags if f.startswith("--speculative-"))

    def draft_tensor_parallel_choices(
        self, method: SpecMethod, target_tp: int
    ) -> tuple[int, ...] | None:
        del method, target_tp
        return None  # the draft runs at the target's --tp-size

    def attention_data_parallel_sizes(self, tensor_parallel_size: int) -> tuple[int, ...]:
        # attn_dp_size must divide tp_size (`assert cfg.tp_size % cfg.attn_dp_size == 0`,
        # https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/parallel_hook.py#L326).
        return tuple(n for n in range(1, tensor_parallel_size + 1) if tensor_parallel_size % n == 0)

    def reads_speculators_heads(self, release: EngineRelease) -> bool | None:
        # No release has code for the speculators format: sglang==0.5.23 has no reference to
        # `speculators_config` or `speculators_model_type` anywhere in the wheel.
        del release
        return False

    def reads_batch_size_schedule(self, release: EngineRelease) -> ScheduleSupport:
        # Read in 0.5.23 only: --speculative-adaptive-config keys its slots by batch size
        # (ADAPTIVE_SOURCE); when the flag and its slots first shipped was not established.
        if release.has("spec-batch-size-schedule"):
            return ScheduleSupport(
                supported=True,
                reason="--speculative-adaptive-config takes a draft length per batch size",
                source=ADAPTIVE_SOURCE,
            )
        return ScheduleSupport(
            supported=None,
            reason="specdeploy read --speculative-adaptive and its per-batch-size slots in SGLang "
            "0.5.23's code only",
            source=ADAPTIVE_SOURCE,
        )

    def schedule_blocked_by(self, profile: Profile) -> str | None:
        return adaptive_unsupported(profile)

    def speculates_with_pipeline_parallel(self, release: EngineRelease, method: SpecMethod) -> bool:
        # pp_size > 1 refuses every speculative algorithm up to 0.5.20. From 0.5.21 EAGLE (and
        # NEXTN, resolved to EAGLE) passes only on the prefill nodes of a disaggregated
        # deployment, or behind the experimental SGLANG_ENABLE_PP_SPEC gate; specdeploy renders
        # neither, so for its deployments every release refuses
        # (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/validation_hook.py#L119-L164).
        del release, method
        return False

    def fp8_kv_cache_on(
        self, release: EngineRelease, gpu: Gpu, dtype: KvCacheDtype, *, mla: bool | None
    ) -> KvDtypeVerdict | None:
        # No SGLang release checks the architecture for an fp8 KV cache: where its default
        # backend has no fp8 path the failure comes from a kernel, so these are warnings.
        del release
        cc = gpu.compute_capability
        if cc is None:
            return KvDtypeVerdict(
                refused=False,
                reason=f"on {gpu.arch_name} SGLang maps fp8 to the fnuz format of its aiter "
                "backend; specdeploy has not checked that path",
                source=FP8_KV_BACKEND_SOURCE,
            )
        if cc < (8, 0):
            return KvDtypeVerdict(
                refused=False,
                reason="no SGLang code or documentation confirms an fp8 KV cache below SM 8.0",
                source=FP8_KV_BACKEND_SOURCE,
            )
        if mla is not False and cc < (8, 9):
            return KvDtypeVerdict(
                refused=False,
                reason="below Hopper SGLang serves MLA models with its Triton backend, and Triton "
                "has no native fp8 below SM 8.9; SGLang does not check this",
                source=FP8_KV_BACKEND_SOURCE,
            )
        if dtype == "fp8_e5m2" and cc[0] == 9:
            return KvDtypeVerdict(
                refused=False,
                reason="fa3, the Hopper default, reads only fp8_e4m3: SGLang switches to the slower "
                "Triton backend",
                source=FP8_E5M2_FA3_SOURCE,
                fix="set serving.kv_cache_dtype: fp8_e4m3",
            )
        return None

    def draft_vocab_must_match(self, release: EngineRelease) -> bool:
        # STANDALONE: _validate_vocab_compatibility from 0.5.15 (capabilities.yaml).
        return release.has("standalone-vocab-check")

    def rules(self) -> tuple[Rule, ...]:
        from orchestrator.engines import sglang_rules

        return sglang_rules.RULES

    def multi_node(
        self, argv: Sequence[str], *, nodes: int, rank: str, leader_address: str
    ) -> tuple[list[str], list[str]]:
        # Every node runs the same launch_server with its rank; only rank 0 serves HTTP.
        node = [
            *argv,
            "--nnodes",
            str(nodes),
            "--node-rank",
            rank,
            "--dist-init-addr",
            f"{leader_address}:{DIST_INIT_PORT}",
        ]
        return node, list(node)

    def launch(self, spec: LaunchSpec) -> EngineLaunch:
        profile = spec.profile
        serving, hardware, tuning = profile.serving, profile.hardware, profile.sglang
        knob = spec.memory_fraction
        if tuning is not None and tuning.mem_fraction_static is not None:
            knob = tuning.mem_fraction_static
        argv = ["python3", "-m", "sglang.launch_server", "--model-path", spec.target_model]
        argv += ["--host", spec.host, "--port", str(serving.port)]
        argv += ["--served-model-name", spec.served_model_name]
        argv += ["--tp-size", str(hardware.tensor_parallel_size)]
        if hardware.pipeline_parallel_size > 1:
            argv += ["--pp-size", str(hardware.pipeline_parallel_size)]
        argv += _data_and_expert_parallel(spec)
        argv += ["--context-length", str(serving.max_model_len)]
        argv += ["--max-running-requests", str(serving.max_concurrency)]
        argv += ["--mem-fraction-static", fraction(knob)]
        if serving.kv_cache_dtype != "auto":
            argv += ["--kv-cache-dtype", KV_DTYPE[serving.kv_cache_dtype]]
        argv += ["--dtype", profile.target.dtype]
        argv += optional_flag("--revision", profile.target.revision)
        argv += optional_flag("--quantization", profile.target.quantization)
        if profile.target.trust_remote_code:
            argv.append("--trust-remote-code")
        if hardware.device == "cpu":
            argv += ["--device", "cpu"]
        argv.append("--enable-metrics")  # Prometheus /metrics, incl. spec_accept_length (Part C)
        adaptive = adaptive_launch(profile) if spec.speculative else None
        if spec.speculative:
            argv += _speculative_args(spec, adaptive)
        if tuning is not None and tuning.cuda_graph_max_bs is not None:
            flag = "--cuda-graph-max-bs"
            if spec.release.has("cuda-graph-max-bs-decode"):
                flag = "--cuda-graph-max-bs-decode"  # --cuda-graph-max-bs became an alias
            argv += [flag, str(tuning.cuda_graph_max_bs)]
        if needs_overlap_disabled(spec):
            argv.append("--disable-overlap-schedule")
        argv += list(serving.extra_args)
        return EngineLaunch(
            engine=self.name,
            version=spec.release.version,
            image=profile.engine.image or spec.release.image,
            argv=tuple(argv),
            port=serving.port,
            # /health answers 503 while starting; /health_generate runs a 1-token generation (A5).
            health_path="/health",
            ready_path="/health_generate",
            metrics_path="/metrics",
            config_files=_adaptive_files(adaptive),
            config_dir=spec.config_dir,
        )


def _adaptive_files(adaptive: AdaptiveLaunch | None) -> dict[str, str]:
    text = adaptive.config_file() if adaptive is not None else None
    return {} if text is None else {ADAPTIVE_FILE: text}


def _data_and_expert_parallel(spec: LaunchSpec) -> list[str]:
    """Attention data parallelism and expert parallelism in the release's spelling: from 0.5.22
    --attn-dp-size N (the old --dp-size N --enable-dp-attention is deprecated there); experts with
    --ep-size, which before 0.5.1 also needed --enable-ep-moe."""
    hardware, release = spec.profile.hardware, spec.release
    args: list[str] = []
    groups = hardware.attention_data_parallel_size
    if groups > 1 and release.has("attn-dp-size-flag"):
        args += ["--attn-dp-size", str(groups)]
    elif groups > 1:
        args += ["--dp-size", str(groups), "--enable-dp-attention"]
    if hardware.expert_parallel:
        args += ["--ep-size", str(hardware.tensor_parallel_size)]
        if release.has("ep-moe-flag"):
            args.append("--enable-ep-moe")
    return args


def draft_token_count(spec: LaunchSpec) -> int:
    """Tokens verified per step: steps + 1 for a chain (topk 1), else the configured tree size."""
    tuning = spec.profile.sglang
    steps = spec.profile.proposer.num_speculative_tokens
    if tuning is not None and tuning.num_draft_tokens is not None:
        return tuning.num_draft_tokens
    return steps + 1


def needs_overlap_disabled(spec: LaunchSpec) -> bool:
    """The overlap scheduler supports only topk 1 chains; SGLang's docs also disable it for NGRAM
    (https://github.com/sgl-project/sglang/blob/16974b80f378fe1bc80550b0736cd1b6a9a4bdad/docs_new/docs/advanced_features/speculative_decoding.mdx).
    A user may always ask for it."""
    tuning = spec.profile.sglang
    if tuning is not None and tuning.disable_overlap_schedule:
        return True
    return spec.method == "ngram"


def _draft_revision(spec: LaunchSpec) -> str | None:
    """NEXTN (MTP) drafts from the target checkpoint, and SGLang loads a draft path at revision
    "main" unless told otherwise (`handle_speculative_decoding`,
    https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/speculative_hook.py#L122-L131),
    so a pinned target.revision must reach the draft too."""
    proposer = spec.profile.proposer
    if proposer.method == "mtp":
        return proposer.revision or spec.profile.target.revision
    return proposer.revision


def _speculative_args(spec: LaunchSpec, adaptive: AdaptiveLaunch | None) -> list[str]:
    proposer = spec.profile.proposer
    tuning = spec.profile.sglang
    topk = tuning.eagle_topk if tuning is not None else 1
    args = ["--speculative-algorithm", ALGORITHM[proposer.method]]
    draft = spec.target_model if proposer.method == "mtp" else spec.draft_model
    if draft is not None:
        args += ["--speculative-draft-model-path", draft]
    args += optional_flag("--speculative-draft-model-revision", _draft_revision(spec))
    if proposer.method == "ngram":
        # NGRAM derives topk from its BFS breadth and steps from the draft tokens (A2).
        return [*args, "--speculative-num-draft-tokens", str(draft_token_count(spec))]
    if adaptive is not None:
        # The start must be a candidate; SGLang sets the draft tokens to steps + 1 itself.
        steps = adaptive.start_steps
        args += ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1"]
        args += ["--speculative-num-draft-tokens", str(steps + 1), "--speculative-adaptive"]
        if adaptive.document is None:
            return args
        return [*args, "--speculative-adaptive-config", f"{spec.config_dir}/{ADAPTIVE_FILE}"]
    args += ["--speculative-num-steps", str(proposer.num_speculative_tokens)]
    args += ["--speculative-eagle-topk", str(topk)]
    args += ["--speculative-num-draft-tokens", str(draft_token_count(spec))]
    return args
