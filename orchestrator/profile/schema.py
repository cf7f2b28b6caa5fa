"""The profile schema (DESIGN.md §2): what a user writes, as strict, frozen pydantic models.

Validators here check only what the YAML alone can show. Anything that needs checkpoint files, an
engine release or a GPU is a compatibility rule or a memory check, not a validator.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable
from typing import Annotated, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

# A leaf module: the engine names live with the engines (adding one touches only engines/).
from orchestrator.engines.names import ENGINE_NAMES as ENGINE_NAMES
from orchestrator.engines.names import EngineName as EngineName

SpecMethod = Literal["draft_model", "eagle", "eagle3", "mtp", "ngram", "none"]
Device = Literal["gpu", "cpu"]
KvCacheDtype = Literal["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]
ModelDtype = Literal["auto", "bfloat16", "float16", "float32"]

#: Speculative methods an engine release implements that specdeploy has no rules for yet (no
#: pairing, memory or flag model): a profile naming one is refused at load with what the method
#: is, rather than with a bare "not one of". From vLLM 0.32.0's `SpeculativeMethod`
#: (https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L67-L83) and
#: SGLang 0.5.23's `SpeculativeAlgorithm`
#: (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/speculative/spec_info.py#L32-L47).
UNMODELLED_METHODS: Final[dict[str, tuple[str, str]]] = {
    # method: (what it is, the method specdeploy checks that comes closest; "" when none does)
    "suffix": (
        "vLLM's suffix decoding (model-free; vLLM also needs the arctic-inference package in the "
        "image)",
        "ngram",
    ),
    "ngram_gpu": ("vLLM's n-gram lookup on the GPU", "ngram"),
    "medusa": ("Medusa heads (vLLM)", "eagle3"),
    "mlp_speculator": ("vLLM's MLP speculator heads", "eagle3"),
    "dflash": ("DFlash drafters (vLLM, SGLang)", ""),
    "dspark": ("DSpark drafters (vLLM, SGLang)", ""),
    "uno": ("SGLang's UNO algorithm", ""),
    "frozen_kv_mtp": ("SGLang's FROZEN_KV_MTP algorithm", "mtp"),
    "custom_class": ("a vLLM plugin proposer", ""),
}
#: Engine spellings of methods specdeploy names otherwise: SGLang's STANDALONE and NEXTN
#: (`--speculative-algorithm`; NEXTN is run as EAGLE on the target's MTP layers,
#: https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/speculative/spec_info.py#L32-L47).
METHOD_SPELLINGS: Final[dict[str, str]] = {"standalone": "draft_model", "nextn": "mtp"}

#: Methods that need a separate checkpoint in `proposer.model`.
METHODS_WITH_MODEL: frozenset[str] = frozenset({"draft_model", "eagle", "eagle3"})
#: Methods whose proposer lives inside the target (mtp) or needs no weights at all (ngram).
METHODS_WITHOUT_MODEL: frozenset[str] = frozenset({"mtp", "ngram", "none"})

#: Kubernetes names, as the API server checks them (IsDNS1123Label, IsDNS1123Subdomain and their
#: lengths in https://github.com/kubernetes/kubernetes/blob/v1.36.0/staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go).
#: Written without anchors; matched with fullmatch (`$` would also match before a trailing
#: newline, "x\n") and anchored with ^...$ in the JSON Schema.
DNS1123_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN: Final = rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*"
DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
_DNS1123_LABEL = re.compile(DNS1123_LABEL)

# Bounds on every number, so that no value can overflow the memory arithmetic (floats) or the
# engines' and Kubernetes' own integer types. Types are strict: `true` is not 1, 2.0 is not 2.
#: Kubernetes `replicas` is an int32 (https://kubernetes.io/docs/reference/kubernetes-api/
#: workload-resources/deployment-v1/#DeploymentSpec), and so are TensorRT-LLM's maxBatchSize and
#: maxNumTokens (`SizeType32` in cpp/include/tensorrt_llm/executor/executor.h, ExecutorConfig).
INT32_MAX: Final = 2**31 - 1
#: A bound on GPU counts (TP, PP, GPUs per node): far beyond any one replica, small enough that
#: TP x PP and the memory arithmetic stay exact.
MAX_GPUS: Final = 1024
#: Longest model reference: Linux PATH_MAX is 4096 including the profile's directory; each path
#: component is at most NAME_MAX (255) bytes.
MAX_MODEL_REF: Final = 1024
NAME_MAX: Final = 255
StrictInt = Annotated[int, Strict()]
PositiveInt = Annotated[int, Strict(), Field(ge=1, le=INT32_MAX)]
GpuCount = Annotated[int, Strict(), Field(ge=1, le=MAX_GPUS)]
Fraction = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Flag = Annotated[bool, Strict()]
#: Longest suffix specdeploy appends to metadata.name ("<name>-baseline-leader" Service,
#: "<name>-baseline-config" ConfigMap); Service and ConfigMap names have at most 63 characters.
LONGEST_NAME_SUFFIX = len("-baseline-leader")
MAX_NAME_LENGTH = 63 - LONGEST_NAME_SUFFIX
#: `name` or `namespace/name` of a Gateway (DNS-1123 label namespace, DNS-1123 subdomain name).
_GATEWAY_REF = rf"({DNS1123_LABEL}/)?{DNS1123_SUBDOMAIN}"
#: pydantic error type of a cross-field check pinned to one field (see `field_error`).
FIELD_ERROR = "profile_field"
#: pydantic error type of a value check that carries its own why and fix (see `value_error`).
VALUE_ERROR = "profile_value"

#: A hub revision: a branch or tag name as `git check-ref-format --allow-onelevel` accepts it
#: (https://git-scm.com/docs/git-check-ref-format), or a commit sha (7-40 or 64 hex digits, which
#: that grammar already accepts). Narrower than git in two ways: printable ASCII only (git allows
#: any byte from 0x80; U+0085 and U+2028 end a line in YAML and Python, and bidi controls disguise
#: text) and no leading '-' (it would read as an option, as `git check-ref-format --branch`
#: refuses too). Two patterns, so that each is a plain regular expression that Python, ECMA-262
#: (editors) and RE2 (the API server, for the CRD) all read the same way: the characters allowed,
#: and (as JSON Schema `not`) the sequences refused.
REVISION_CHARS: Final = r"^[!-~]+$"
#: Each refused sequence and why, in the order they are reported.
REVISION_REFUSED: Final = (
    (r"[~^:?*\[\\]", "holds one of ~ ^ : ? * [ \\, which git does not allow in a ref"),
    (r"\.\.", "holds '..', which git does not allow (in a URL it climbs out of the path)"),
    (r"@\{", "holds '@{', git's reflog syntax"),
    (r"//", "has an empty path component ('//')"),
    (r"^[-/.]", "starts with '-', '/' or '.'"),
    (r"/\.", "has a path component starting with '.'"),
    (r"[/.]$", "ends with '/' or '.'"),
    (r"\.lock(/|$)", "has a path component ending in '.lock', which git reserves"),
    (r"^@$", "is '@', git's name for HEAD"),
)
#: The schema's `not` also refuses any character outside REVISION_CHARS: Python's `$` (which the
#: jsonschema package uses) matches before a final newline, so "main\n" would pass `^[!-~]+$`.
REVISION_NOT: Final = "|".join([*(pattern for pattern, _ in REVISION_REFUSED), r"[^!-~]"])


def field_error(field: str, message: str) -> PydanticCustomError:
    """A cross-field validation error reported at `field` (dotted, relative to the model that
    raises it) instead of at the model, so the loader points at that field's line."""
    return PydanticCustomError(FIELD_ERROR, "{message}", {"message": message, "field": field})


def _image(value: str) -> str:
    """An image reference is one word without control characters (the OCI reference grammar)."""
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in value):
        raise ValueError(f"{_clip(value)!r} contains a space or control character; remove it")
    return value


def _no_nul(value: str) -> str:
    """NUL ends a C string: no path, argv element or environment value can hold one."""
    if "\x00" in value:
        raise ValueError(
            "contains a NUL character, which no path or command-line argument can hold"
        )
    return value


def _model_ref(value: str) -> str:
    _no_nul(value)
    if value.startswith("~") and value != "~" and not value.startswith("~/"):
        raise ValueError(
            f"{_clip(value)!r} starts with ~user, which specdeploy does not expand; "
            "write the directory as an absolute path or relative to the profile"
        )
    longest = max(value.split("/"), key=lambda part: len(part.encode()))
    if len(longest.encode()) > NAME_MAX:
        raise ValueError(
            f"has a part of {len(longest.encode())} bytes ({_clip(longest)!r}); a hub id part "
            f"has at most 96 characters and a directory name at most {NAME_MAX} bytes"
        )
    return value


def _clip(value: str) -> str:
    return value if len(value) <= 40 else value[:40] + "..."


def value_error(message: str, *, why: str, fix: str) -> PydanticCustomError:
    """A value check's error with its own why and fix, which the loader shows as they are."""
    return PydanticCustomError(
        VALUE_ERROR, "{message}", {"message": message, "why": why, "fix": fix}
    )


def _revision(value: str) -> str:
    shown = repr(_clip(value))
    fix = (
        "pin a commit sha (the 40 hex digits of `git rev-parse HEAD`, or the commit on the "
        "model's hub page), or write the branch or tag exactly as the hub names it (e.g. main, "
        "v1.0, refs/pr/1)"
    )
    why = (
        "the revision goes into hub URLs, the engine's --revision argument and platform "
        "storage URIs; a value git does not accept as a ref cannot name a commit there"
    )
    if not re.fullmatch(REVISION_CHARS, value):
        bad = next(c for c in value if not "!" <= c <= "~")
        raise value_error(
            f"{shown} holds {bad!r}: a revision is printable ASCII with no spaces or control "
            "characters",
            why=why,
            fix=fix,
        )
    for pattern, reason in REVISION_REFUSED:
        if re.search(pattern, value):
            raise value_error(f"{shown} {reason}", why=why, fix=fix)
    return value


def _dns_name(kind: str, *, subdomain: bool) -> Callable[[str], str]:
    """The check of a Kubernetes object name or reference of `kind`: a DNS-1123 subdomain (most
    objects: Secrets, StorageClasses, Gateways, listener names) or label (namespaces)."""
    fmt, longest = (
        (DNS1123_SUBDOMAIN, DNS1123_SUBDOMAIN_MAX)
        if subdomain
        else (DNS1123_LABEL, DNS1123_LABEL_MAX)
    )
    grammar = "DNS-1123 subdomain" if subdomain else "DNS-1123 label"
    allowed = "lower-case letters, digits, '-'" + (" and '.'" if subdomain else "")
    compiled = re.compile(fmt)

    def check(value: str) -> str:
        if len(value) <= longest and compiled.fullmatch(value):
            return value
        length = f" of at most {longest} characters" if len(value) > longest else ""
        raise value_error(
            f"{_clip(value)!r} is not a valid {kind} name (a {grammar}{length})",
            why=f"Kubernetes refuses a {kind} name that is not a {grammar}, so the objects "
            "rendered from this profile would fail at the API server",
            fix=f"use {allowed}, starting and ending with a letter or digit, at most "
            f"{longest} characters (e.g. 'my-name')",
        )

    return check


_LABEL_FIELD = Field(
    min_length=1,
    json_schema_extra={"pattern": f"^{DNS1123_LABEL}$", "maxLength": DNS1123_LABEL_MAX},
)
_SUBDOMAIN_FIELD = Field(
    min_length=1,
    json_schema_extra={"pattern": f"^{DNS1123_SUBDOMAIN}$", "maxLength": DNS1123_SUBDOMAIN_MAX},
)


Text = Annotated[str, Field(min_length=1, max_length=NAME_MAX), AfterValidator(_no_nul)]
Revision = Annotated[
    str,
    Field(
        min_length=1,
        max_length=NAME_MAX,
        json_schema_extra={"pattern": REVISION_CHARS, "not": {"pattern": REVISION_NOT}},
    ),
    AfterValidator(_revision),
]
NamespaceName = Annotated[
    str, _LABEL_FIELD, AfterValidator(_dns_name("namespace", subdomain=False))
]
SecretName = Annotated[str, _SUBDOMAIN_FIELD, AfterValidator(_dns_name("Secret", subdomain=True))]
StorageClassName = Annotated[
    str, _SUBDOMAIN_FIELD, AfterValidator(_dns_name("StorageClass", subdomain=True))
]
GatewayName = Annotated[str, _SUBDOMAIN_FIELD, AfterValidator(_dns_name("Gateway", subdomain=True))]
#: Gateway API SectionName (apis/v1/shared_types.go of gateway-api v1.6.1): a DNS-1123 subdomain.
ListenerName = Annotated[
    str, _SUBDOMAIN_FIELD, AfterValidator(_dns_name("Gateway listener", subdomain=True))
]
ModelRef = Annotated[str, Field(min_length=1, max_length=MAX_MODEL_REF), AfterValidator(_model_ref)]
ImageRef = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_image)]
ExtraArg = Annotated[str, Field(max_length=65536), AfterValidator(_no_nul)]

#: Most draft tokens per step specdeploy renders (proposer.num_speculative_tokens' bound).
MAX_SPECULATIVE_TOKENS: Final = 32
#: Bounds of a draft-length schedule (proposer.num_speculative_tokens_per_batch_size). Structural
#: only, so that no value overflows an engine's integers or the lookup it expands the schedule
#: into (vLLM fills one slot per batch size up to max-num-seqs); what the engine accepts beyond
#: that (ranges start at 1, do not overlap, ...) is a compatibility rule with its severity.
#: A million running sequences is far beyond any replica's max-num-seqs; 64 ranges is far more
#: than one per power of two of it (20).
MAX_SCHEDULE_BATCH_SIZE: Final = 1_000_000
MAX_SCHEDULE_ENTRIES: Final = 64
#: A batch size or a draft length is a count: never negative (0 is for the rules to judge).
ScheduleBatchSize = Annotated[int, Strict(), Field(ge=0, le=MAX_SCHEDULE_BATCH_SIZE)]
ScheduleTokens = Annotated[int, Strict(), Field(ge=0, le=MAX_SPECULATIVE_TOKENS)]
_SCHEDULE_WHY = (
    "each entry of proposer.num_speculative_tokens_per_batch_size is one inclusive batch-size "
    "range and the draft length for it"
)


def _schedule_entry(value: object) -> object:
    """An entry is a list of three numbers; anything else is refused with the entry's shape."""
    if not isinstance(value, list | tuple) or len(value) != 3:
        got = f"has {len(value)} values" if isinstance(value, list | tuple) else "is not a list"
        raise value_error(
            f"{got}: an entry is [range_start, range_end, num_speculative_tokens]",
            why=_SCHEDULE_WHY,
            fix="write the entry as three integers, e.g. [1, 16, 4]",
        )
    return value


def _schedule_list(value: object) -> object:
    if not isinstance(value, list | tuple):
        raise value_error(
            "is not a list of [range_start, range_end, num_speculative_tokens] entries",
            why=_SCHEDULE_WHY,
            fix="write it as a YAML list of entries, e.g. [[1, 16, 4], [17, 64, 2], [65, 256, 0]]",
        )
    return value


def _schedule_length(value: tuple[object, ...]) -> tuple[object, ...]:
    # After the entries (a length bound in Field would also report an "empty" tuple whenever
    # an entry fails, which pydantic counts as not validated).
    if not value:
        raise value_error(
            "is empty",
            why="an empty schedule gives no batch size a draft length",
            fix="remove the field for one draft length at every load, or write at least one "
            "[range_start, range_end, num_speculative_tokens] entry starting at 1",
        )
    if len(value) > MAX_SCHEDULE_ENTRIES:
        raise value_error(
            f"has {len(value)} ranges, more than {MAX_SCHEDULE_ENTRIES}",
            why=f"specdeploy accepts at most {MAX_SCHEDULE_ENTRIES} ranges in a schedule",
            fix="merge neighbouring ranges that use the same draft length",
        )
    return value


#: One schedule entry, [range_start, range_end, num_speculative_tokens]. Its JSON Schema is one
#: `items` schema for the three (a Kubernetes structural schema has no per-position items); the
#: draft length's own bound (MAX_SPECULATIVE_TOKENS) is checked when the profile loads.
ScheduleEntry = Annotated[
    tuple[ScheduleBatchSize, ScheduleBatchSize, ScheduleTokens],
    BeforeValidator(_schedule_entry),
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": MAX_SCHEDULE_BATCH_SIZE},
            "minItems": 3,
            "maxItems": 3,
        }
    ),
]
Schedule = Annotated[
    tuple[ScheduleEntry, ...],
    BeforeValidator(_schedule_list),
    AfterValidator(_schedule_length),
    Field(json_schema_extra={"minItems": 1, "maxItems": MAX_SCHEDULE_ENTRIES}),
]


class StrictModel(BaseModel):
    """Base for all profile models: unknown keys are errors and models are immutable after
    validation. Attribute docstrings become field descriptions in the JSON Schema
    (`orchestrator.profile.docs`, read only by `specdeploy schema`). Validators are built on first
    use (`defer_build`): a profile is validated as a whole `Profile`, so building every section's
    own validator when the module loads would cost each CLI start for nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Metadata(StrictModel):
    name: str = Field(min_length=1, json_schema_extra={"maxLength": MAX_NAME_LENGTH})
    """DNS-1123 label (lower-case letters, digits, '-') starting with a letter, at most 47
    characters; names every Kubernetes object."""
    namespace: NamespaceName | None = None
    """Kubernetes namespace (a DNS-1123 label); the current context's namespace when omitted."""

    @field_validator("name")
    @classmethod
    def _dns1123(cls, value: str) -> str:
        if not _DNS1123_LABEL.fullmatch(value):
            raise ValueError(
                f"{_clip(value)!r} is not a DNS-1123 label: use lower-case letters, digits and '-', "
                "starting and ending with a letter or digit (e.g. 'qwen3-4b-draft')"
            )
        return value

    @field_validator("name")
    @classmethod
    def _names_services(cls, value: str) -> str:
        if value[0].isdigit():
            raise ValueError(
                f"{value!r} starts with a digit, and it names Kubernetes Services, whose names "
                "must start with a letter (DNS-1035)"
            )
        if len(value) > MAX_NAME_LENGTH:
            raise ValueError(
                f"{value!r} has {len(value)} characters; names derived from it (such as the "
                f"Service {value}-baseline-leader) may have at most 63, so use at most "
                f"{MAX_NAME_LENGTH}"
            )
        return value


class EngineSpec(StrictModel):
    name: EngineName
    """Serving engine: vllm, sglang or trtllm."""
    version: str = Field(
        max_length=64,
        pattern=r"^[0-9]{1,6}\.[0-9]{1,6}(\.[0-9]{1,6})?([.-]?(rc|post|dev)[0-9]{1,6})?$",
    )
    """Engine release the launch is rendered for, e.g. "0.32.0"; flags differ between releases."""
    image: ImageRef | None = None
    """Container image; the engine's official image at `version` when omitted."""


class TargetSpec(StrictModel):
    model: ModelRef
    """Hub repo id (org/name) or a local checkpoint directory (relative to the profile file)."""
    revision: Revision | None = None
    """Hub commit sha, branch or tag to pin (a git ref name: no '..', spaces or control
    characters); an unpinned hub model gets a warning."""
    dtype: ModelDtype = "auto"
    """Weight and activation dtype; "auto" takes the checkpoint's torch_dtype."""
    quantization: Text | None = None
    """Quantization method passed to the engine (e.g. fp8, awq); the checkpoint's own when omitted."""
    trust_remote_code: Flag = False
    """Allow the engine to run model code shipped in the checkpoint repository."""


class NgramSpec(StrictModel):
    min_window: PositiveInt = 1
    """Smallest n-gram matched against the prompt (vLLM prompt_lookup_min)."""
    max_window: PositiveInt = 4
    """Largest n-gram matched against the prompt (vLLM prompt_lookup_max, TensorRT-LLM
    max_matching_ngram_size)."""

    @model_validator(mode="after")
    def _ordered(self) -> NgramSpec:
        if self.min_window > self.max_window:
            raise ValueError(
                f"min_window={self.min_window} is larger than max_window={self.max_window}; "
                "set min_window <= max_window"
            )
        return self


class ProposerSpec(StrictModel):
    method: SpecMethod = "none"
    """How draft tokens are proposed: draft_model, eagle, eagle3, mtp, ngram, or none (baseline).
    Always explicit: specdeploy never infers it from a model name."""
    model: ModelRef | None = None
    """Draft LM or EAGLE head (hub id or local directory). Required for draft_model/eagle/eagle3;
    not allowed for mtp (the target's own layers) and ngram (no weights)."""
    revision: Revision | None = None
    """Hub commit sha, branch or tag of the proposer checkpoint (a git ref name, as
    target.revision)."""
    num_speculative_tokens: StrictInt = Field(default=3, ge=1, le=MAX_SPECULATIVE_TOKENS)
    """Draft tokens proposed per step (SGLang speculative-num-steps, TensorRT-LLM max_draft_len)."""
    num_speculative_tokens_per_batch_size: Schedule | None = None
    """Draft length by load (vLLM's dynamic speculative decoding): entries
    [range_start, range_end, k], each an inclusive range of batch sizes (sequences running at
    once) and the draft tokens proposed per step while the batch is in that range. k: 0 turns
    speculation off there, e.g. above the load where it stops paying (the crossover `plan
    --speedup` and `specdeploy bench` show; `specdeploy tune` measures it and writes this list). The first range starts at 1 and ranges do not overlap;
    a batch size in a gap or past the last range keeps the k of the range before it, and a k above
    num_speculative_tokens runs as num_speculative_tokens (the maximum, which sizes the engine's
    buffers). Rendered as --speculative-config num_speculative_tokens_per_batch_size (vLLM 0.32.0);
    omit it for one draft length at every load."""
    draft_tensor_parallel_size: GpuCount | None = None
    """Tensor parallel size of the draft; the engine default (the target's) when omitted."""
    ngram: NgramSpec | None = None
    """n-gram lookup window; only with method: ngram (vLLM and TensorRT-LLM; SGLang uses its own
    trie defaults)."""

    @model_validator(mode="after")
    def _model_matches_method(self) -> ProposerSpec:
        if self.method in METHODS_WITH_MODEL and self.model is None:
            raise ValueError(
                f"method {self.method!r} needs proposer.model (the draft checkpoint or EAGLE head); "
                "add `model: <hub id or directory>` or choose method: ngram"
            )
        if self.method in METHODS_WITHOUT_MODEL and self.model is not None:
            reason = {
                "mtp": "MTP uses the target checkpoint's own MTP layers",
                "ngram": "n-gram lookup needs no weights",
                "none": "a baseline has no proposer",
            }[self.method]
            raise ValueError(
                f"method {self.method!r} takes no proposer.model ({reason}); "
                f"remove `model: {self.model}`"
            )
        if self.ngram is not None and self.method != "ngram":
            raise ValueError(f"proposer.ngram applies to method 'ngram', not {self.method!r}")
        if self.method == "none" and self.draft_tensor_parallel_size is not None:
            raise ValueError("draft_tensor_parallel_size needs a proposer method other than 'none'")
        return self

    def tokens_at(self, batch_size: int) -> int:
        """Draft tokens per step with `batch_size` sequences running: the k of the last schedule
        range starting at or below it (gaps and the tail keep the k before them), at most
        num_speculative_tokens; num_speculative_tokens at every load without a schedule (or below
        a schedule's first range, which the rules refuse)."""
        schedule = self.num_speculative_tokens_per_batch_size
        started = [entry for entry in sorted(schedule or ()) if entry[0] <= batch_size]
        if not started:
            return self.num_speculative_tokens
        return min(started[-1][2], self.num_speculative_tokens)


class HardwareSpec(StrictModel):
    device: Device = "gpu"
    """Where the engine runs: gpu (Kubernetes or Docker with GPUs) or cpu (laptop, CI)."""
    gpu: Text | None = "H100-80GB"
    """GPU catalog name (`specdeploy gpus` lists them); ignored on device: cpu."""
    tensor_parallel_size: GpuCount = 1
    """GPUs each model replica is split across, within a node."""
    pipeline_parallel_size: GpuCount = 1
    """Pipeline stages; TP x PP beyond gpus_per_node needs a multi-node LeaderWorkerSet."""
    gpus_per_node: GpuCount = 8
    """GPUs available on one node."""
    attention_data_parallel_size: GpuCount = 1
    """Data-parallel attention groups inside the replica's tensor-parallel GPUs: each group keeps
    the KV cache of its own requests, so an MLA or few-KV-head model holds many more sequences.
    Must divide tensor_parallel_size. SGLang --attn-dp-size (--dp-size with
    --enable-dp-attention before 0.5.22), vLLM --data-parallel-size with a tensor parallel size
    of tensor_parallel_size / this, TensorRT-LLM enable_attention_dp (which needs it equal to
    tensor_parallel_size)."""
    expert_parallel: Flag = False
    """Place whole MoE experts on the replica's GPUs instead of sharding every expert (SGLang
    --ep-size, vLLM --enable-expert-parallel, TensorRT-LLM moe_expert_parallel_size)."""

    @model_validator(mode="after")
    def _attention_groups_divide_tp(self) -> HardwareSpec:
        adp, tp = self.attention_data_parallel_size, self.tensor_parallel_size
        if tp % adp:
            raise field_error(
                "attention_data_parallel_size",
                f"attention_data_parallel_size={adp} does not divide tensor_parallel_size={tp}; "
                f"use a divisor of {tp}",
            )
        return self

    @property
    def attention_tensor_parallel_size(self) -> int:
        """GPUs one attention group's heads and KV are split over."""
        return self.tensor_parallel_size // self.attention_data_parallel_size

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one model replica uses: tensor_parallel_size x pipeline_parallel_size."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def nodes_per_replica(self) -> int:
        """Nodes one replica spans: 1 when its GPUs fit gpus_per_node (or on CPU), else the
        fewest nodes that hold them."""
        if self.device == "cpu" or self.gpus_per_replica <= self.gpus_per_node:
            return 1
        return math.ceil(self.gpus_per_replica / self.gpus_per_node)


class ServingSpec(StrictModel):
    max_model_len: PositiveInt = 8192
    """Longest sequence (prompt + output) in tokens."""
    max_concurrency: PositiveInt = 16
    """The engine's cap on sequences running at once (max-num-seqs / running requests); fewer
    of them fitting at max_model_len is a warning, since real requests are rarely all that long."""
    typical_context_tokens: PositiveInt | None = None
    """Prompt + output tokens of a typical request; `plan` then also reports how many typical
    requests fit at once (with and without speculation). At most max_model_len."""
    gpu_memory_fraction: Fraction = Field(default=0.9, gt=0.0, le=1.0)
    """Share of each GPU's memory specdeploy may plan for; translated to each engine's knob. On
    device: cpu, vLLM applies it to host memory (its CPU backend reserves that share up front)."""
    kv_cache_dtype: KvCacheDtype = "auto"
    """KV cache dtype; fp8 halves KV memory."""
    port: StrictInt = Field(default=8000, ge=1, le=65535)
    """Port the OpenAI-compatible server listens on."""
    extra_args: tuple[ExtraArg, ...] = Field(default=(), max_length=1024)
    """Extra engine command-line tokens, passed through; may not override flags specdeploy manages."""

    @model_validator(mode="after")
    def _typical_within_limit(self) -> ServingSpec:
        typical = self.typical_context_tokens
        if typical is not None and typical > self.max_model_len:
            raise field_error(
                "typical_context_tokens",
                f"typical_context_tokens={typical} is longer than max_model_len="
                f"{self.max_model_len}; set it to at most {self.max_model_len}",
            )
        return self


class ModelCacheSpec(StrictModel):
    size: str = Field(default="200Gi", pattern=r"^[0-9]{1,9}(Mi|Gi|Ti)$")
    """Capacity of the PVC that holds the Hugging Face cache, shared by both variants."""
    storage_class: StorageClassName | None = None
    """StorageClass of the PVC (a DNS-1123 subdomain); the cluster default when omitted."""
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany"] = "ReadWriteMany"
    """ReadWriteMany lets replicas on different nodes share the cache."""


class DeploySpec(StrictModel):
    replicas: StrictInt = Field(default=1, ge=0, le=INT32_MAX)
    """Serving replicas."""
    baseline: Flag = False
    """Also deploy the same target without speculation, for an A/B comparison."""
    hf_token_secret: SecretName | None = None
    """Name of a Kubernetes Secret (a DNS-1123 subdomain) with key HF_TOKEN; never the token
    itself."""
    model_cache: ModelCacheSpec | None = None
    """A PersistentVolumeClaim for the model cache; an emptyDir when omitted."""
    baseline_traffic_percent: int | None = Field(default=None, ge=0, le=100)
    """Share of requests (percent) the baseline twin receives in an A/B traffic split with the
    speculative deployment; the rest goes to the speculative one. Rendered where the platform
    splits traffic (`render --platform`: an HTTPRoute with weighted backendRefs, KServe route
    weights). Needs baseline: true; omitted, no split is rendered and each twin has its own
    endpoint."""
    gateway: str | None = Field(
        default=None,
        json_schema_extra={
            "pattern": f"^{_GATEWAY_REF}$",
            "maxLength": DNS1123_LABEL_MAX + 1 + DNS1123_SUBDOMAIN_MAX,
        },
    )
    """Gateway API Gateway (`name`, or `namespace/name`) that the A/B route attaches to; omitted,
    an HTTPRoute has no parent (add one to carry traffic) and KServe uses its default Gateway."""

    @model_validator(mode="after")
    def _split_needs_twin(self) -> DeploySpec:
        if self.baseline_traffic_percent is not None and not self.baseline:
            raise field_error(
                "baseline_traffic_percent",
                "a traffic split needs the baseline twin; set deploy.baseline: true or remove "
                "deploy.baseline_traffic_percent",
            )
        return self

    @field_validator("hf_token_secret", mode="before")
    @classmethod
    def _not_a_token(cls, value: object) -> object:
        # Before the name check, whose message would repeat the value: a token is never shown.
        if isinstance(value, str) and value.startswith("hf_"):
            raise ValueError(
                "this looks like a Hugging Face token, not a Secret name; create a Secret "
                "(`kubectl create secret generic hf-token --from-literal=HF_TOKEN=...`) and put "
                "its name here"
            )
        return value

    @field_validator("gateway")
    @classmethod
    def _gateway(cls, value: str | None) -> str | None:
        if value is None:
            return None
        namespace, slash, name = value.rpartition("/")
        if slash and "/" not in namespace:
            _dns_name("Gateway namespace", subdomain=False)(namespace)
        elif slash:
            raise value_error(
                f"{_clip(value)!r} has more than one '/'",
                why="a Gateway is named `name` or `namespace/name`",
                fix="write the Gateway as `name` or `namespace/name` (e.g. 'infra/inference')",
            )
        _dns_name("Gateway", subdomain=True)(name)
        return value


class VllmTuning(StrictModel):
    """vLLM-only knobs. Only allowed with engine.name: vllm."""

    enforce_eager: Flag = False
    """Disable CUDA graphs / torch.compile (faster start, slower decode)."""
    max_num_batched_tokens: PositiveInt | None = None
    """Tokens per scheduler step; the engine default when omitted."""
    cpu_kvcache_space_gib: PositiveInt | None = None
    """KV cache size in GiB on device: cpu (VLLM_CPU_KVCACHE_SPACE); vLLM's default when omitted."""


#: Most slots an SGLang adaptive config takes here (one per power of two of any batch is 20).
MAX_ADAPTIVE_SLOTS: Final = 64


class SglangAdaptiveSlot(StrictModel):
    """One batch-size slot of SGLang's --speculative-adaptive-config: the draft lengths a batch of
    at least `batch_size` sequences (up to the next slot's) moves between as the acceptance it
    measures rises and falls. The knobs omitted take SGLang's defaults (AdaptiveStepSlot)."""

    batch_size: PositiveInt
    """Smallest batch size (after padding to the CUDA-graph batch size it runs at) of the slot;
    a batch below every slot uses the first."""
    candidate_steps: list[ScheduleTokens] = Field(min_length=1, max_length=MAX_SPECULATIVE_TOKENS)
    """Draft lengths (--speculative-num-steps values) the slot may run; 0 drafts nothing."""
    ema_alpha: Fraction | None = Field(default=None, gt=0.0, le=1.0)
    """Weight of the newest batch in the acceptance average (SGLang's default 0.2)."""
    warmup_batches: Annotated[int, Strict(), Field(ge=0, le=INT32_MAX)] | None = None
    """Batches measured before the first move (default 10)."""
    update_interval: PositiveInt | None = None
    """Batches between moves (default 5)."""
    up_hysteresis: Fraction | None = Field(default=None, ge=-8.0, le=8.0)
    """Added to the acceptance a longer draft needs (default 0.0)."""
    down_hysteresis: Fraction | None = Field(default=None, ge=-8.0, le=8.0)
    """Added to the acceptance below which a shorter draft is chosen (default -0.25)."""
    ceiling_coeff: Fraction | None = Field(default=None, ge=0.0, le=64.0)
    """Caps a held draft length at ceil(acceptance x this); 0 (the default) caps nothing."""


class SglangAdaptive(StrictModel):
    """SGLang's acceptance-driven draft length (--speculative-adaptive): per batch-size slot, it
    moves between candidate draft lengths as the acceptance it measures rises and falls, starting
    at proposer.num_speculative_tokens. `slots` omitted runs SGLang's own default config."""

    slots: list[SglangAdaptiveSlot] | None = Field(
        default=None, min_length=1, max_length=MAX_ADAPTIVE_SLOTS
    )
    """The slots of --speculative-adaptive-config, each batch size once; omitted: SGLang's
    DEFAULT_ADAPTIVE_CONFIG (no config file)."""

    @model_validator(mode="after")
    def _batch_sizes_once(self) -> SglangAdaptive:
        sizes = [slot.batch_size for slot in self.slots or ()]
        repeated = sorted({size for size in sizes if sizes.count(size) > 1})
        if repeated:
            raise ValueError(
                f"batch_size {', '.join(map(str, repeated))} has more than one slot: SGLang keys "
                "its config by batch size, so one would replace the other; merge them"
            )
        return self


class SglangTuning(StrictModel):
    """SGLang-only knobs. Only allowed with engine.name: sglang."""

    eagle_topk: PositiveInt = 1
    """Branching factor per draft step (--speculative-eagle-topk). Values above 1 build a tree and
    need disable_overlap_schedule: true."""
    num_draft_tokens: PositiveInt | None = None
    """Tokens verified per step (--speculative-num-draft-tokens); steps + 1 for a chain (topk 1)."""
    mem_fraction_static: Fraction | None = Field(default=None, gt=0.0, lt=1.0)
    """Override --mem-fraction-static (weights + KV share of GPU memory); translated from
    serving.gpu_memory_fraction when omitted."""
    cuda_graph_max_bs: PositiveInt | None = None
    """Largest batch captured in a CUDA graph; lower it when memory is tight."""
    disable_overlap_schedule: Flag = False
    """Use the synchronous scheduler; required for tree drafting (eagle_topk > 1)."""
    adaptive: SglangAdaptive | None = None
    """Acceptance-driven draft length (--speculative-adaptive, SGLang 0.5.23): EAGLE, EAGLE-3 and
    MTP chains only. For a draft length fixed per load use
    proposer.num_speculative_tokens_per_batch_size instead (not both)."""


class TrtllmTuning(StrictModel):
    """TensorRT-LLM-only knobs. Only allowed with engine.name: trtllm."""

    free_gpu_memory_fraction: Fraction | None = Field(default=None, gt=0.0, le=1.0)
    """Override kv_cache_config.free_gpu_memory_fraction (share of memory left after weights);
    translated from serving.gpu_memory_fraction when omitted."""
    max_batch_size: PositiveInt | None = None
    """Largest runtime batch; defaults to serving.max_concurrency."""
    max_num_tokens: PositiveInt | None = None
    """Tokens per iteration (prefill chunk + decode); the engine default when omitted."""
    cuda_graph_max_batch_size: PositiveInt | None = None
    """Largest batch captured in a CUDA graph."""
    disable_overlap_scheduler: Flag | None = None
    """Force the overlap scheduler off; specdeploy turns it off where the method requires."""
    enable_iter_perf_stats: Flag = True
    """Expose per-iteration stats (including speculative acceptance) on /metrics."""


PolicyMode = Literal["static", "switch", "retune"]


class RetuneSpec(StrictModel):
    """When `policy.mode: retune` lowers or raises proposer.num_speculative_tokens."""

    lower_below: float = Field(default=0.3, gt=0.0, lt=1.0)
    """Lower the draft length when the deepest drafted position is accepted less often than this
    (accepted at that position / drafts); the new length keeps the positions at or above it."""
    raise_above: float = Field(default=0.8, gt=0.0, le=1.0)
    """Raise the draft length by one when the deepest position is accepted at least this often."""
    min_tokens: PositiveInt = 1
    """Never draft fewer tokens than this."""
    max_tokens: int = Field(default=8, ge=1, le=32)
    """Never draft more tokens than this."""

    @model_validator(mode="after")
    def _ordered(self) -> RetuneSpec:
        if self.lower_below >= self.raise_above:
            raise ValueError(
                f"lower_below={self.lower_below} must be below raise_above={self.raise_above}, "
                "or a length could be lowered and raised on the same evidence"
            )
        if self.min_tokens > self.max_tokens:
            raise ValueError(
                f"min_tokens={self.min_tokens} is larger than max_tokens={self.max_tokens}"
            )
        return self


class GatewayRef(StrictModel):
    """A Gateway API parent (a Gateway) the operator's HTTPRoute attaches to."""

    name: GatewayName
    """Name of the Gateway (a DNS-1123 subdomain)."""
    namespace: NamespaceName | None = None
    """Namespace of the Gateway (a DNS-1123 label); the deployment's own when omitted."""
    section_name: ListenerName | None = None
    """Listener of the Gateway to attach to (a DNS-1123 subdomain, the Gateway API's
    SectionName); every listener that allows the route when omitted."""
    backend: Literal["Service", "InferencePool"] = "Service"
    """What the route's weighted backendRefs name for each twin. Service: the twin's own
    Service. InferencePool (llm-d, the Gateway API Inference Extension): the twin's
    InferencePool, named like its Service, whose endpoint picker chooses the pod; install llm-d's
    router chart once per twin with the values `specdeploy operator --router-values` writes. The
    Gateway must be one whose implementation routes to InferencePools."""


class PolicySpec(StrictModel):
    """What `specdeploy operator` does with live measurements (ignored by the CLI commands)."""

    mode: PolicyMode = "static"
    """static: keep the deployment as planned. switch: send traffic to the speculative twin
    while its measured request time per output token (end-to-end latency over output tokens,
    queueing included) beats the baseline twin's at the current load, and
    to the baseline above the crossover (needs deploy.baseline: true). retune: lower or raise
    proposer.num_speculative_tokens from the measured per-position acceptance, by a rolling
    update of the speculative twin (vLLM, whose /metrics count acceptance per position)."""
    interval_seconds: PositiveInt = 15
    """How often both twins' /metrics are read and a decision is made."""
    dwell_seconds: PositiveInt = 120
    """Minimum time between two changes (a traffic switch or a retune): no flapping."""
    hysteresis: float = Field(default=0.1, ge=0.0, lt=1.0)
    """switch: the other twin must be faster by at least this share of the current one's request
    time per output token before traffic moves (0.1 = 10 %)."""
    smoothing: float = Field(default=0.5, gt=0.0, le=1.0)
    """Weight of the newest interval in the moving averages of request time per output token and
    acceptance (1 = no smoothing; SGLang's acceptance gauges are last-batch values)."""
    min_requests: PositiveInt = 2
    """Finished requests an interval needs before its request time per output token counts."""
    retune: RetuneSpec = RetuneSpec()
    """Thresholds of the retune mode."""
    gateway: GatewayRef | None = None
    """Split traffic with a Gateway API HTTPRoute (weighted backendRefs to both twins' Services)
    attached to this Gateway; without it, a front Service `<name>-front` selects the twin."""
    explore_percent: int | None = Field(default=None, ge=1, le=50)
    """switch: the most traffic (percent) the idle twin gets while it is timed at a load it was
    never timed at; all traffic never goes to an untimed twin. With policy.gateway the HTTPRoute
    gives it exactly this share; the front Service splits by pod, so there it explores only at
    50 (half the pods). Omitted: no exploring, and the idle twin is timed only from mirrored
    traffic (docs/operator.md, which routing supports which)."""


class Profile(StrictModel):
    """A speculative deployment: target, proposer, engine, hardware and serving settings."""

    apiVersion: Literal["specdeploy/v1", "specdeploy.io/v1"]
    """Schema version: specdeploy/v1, or specdeploy.io/v1 (the same spec as a Kubernetes custom
    resource, which needs a dotted API group)."""
    kind: Literal["SpeculativeDeployment"]
    """Always SpeculativeDeployment."""
    metadata: Metadata
    """Name (and namespace) of the deployment."""
    engine: EngineSpec
    """Engine and the release to render for."""
    target: TargetSpec
    """The model whose output is served."""
    proposer: ProposerSpec = ProposerSpec()
    """How draft tokens are proposed; omit (or method: none) for a baseline."""
    hardware: HardwareSpec = HardwareSpec()
    """GPUs and parallelism."""
    serving: ServingSpec = ServingSpec()
    """Context length, concurrency, memory share, port, extra engine args."""
    deploy: DeploySpec = DeploySpec()
    """Replicas, baseline twin, secrets."""
    vllm: VllmTuning | None = None
    """vLLM-only tuning; only with engine.name: vllm."""
    sglang: SglangTuning | None = None
    """SGLang-only tuning; only with engine.name: sglang."""
    trtllm: TrtllmTuning | None = None
    """TensorRT-LLM-only tuning; only with engine.name: trtllm."""
    policy: PolicySpec | None = None
    """What `specdeploy operator` does with live measurements: static, switch or retune."""

    @model_validator(mode="after")
    def _sections_agree(self) -> Profile:
        for name in ENGINE_NAMES:
            if getattr(self, name, None) is not None and name != self.engine.name:
                raise field_error(
                    name,
                    f"the `{name}:` block tunes engine {name!r} but engine.name is "
                    f"{self.engine.name!r}; remove the block or change engine.name",
                )
        if self.hardware.device == "gpu" and self.hardware.gpu is None:
            raise field_error("hardware.gpu", "required on device: gpu (see `specdeploy gpus`)")
        if self.deploy.baseline_traffic_percent is not None and not self.speculative:
            raise field_error(
                "deploy.baseline_traffic_percent",
                "a traffic split needs a speculative deployment to split against; set a "
                "proposer or remove deploy.baseline_traffic_percent",
            )
        self._policy_applies()
        return self

    def _policy_applies(self) -> None:
        mode = self.policy.mode if self.policy is not None else "static"
        if mode != "static" and not self.speculative:
            raise field_error(
                "policy.mode",
                f"policy.mode {mode!r} acts on speculation, but proposer.method is 'none'; "
                "configure a proposer or set policy.mode: static",
            )
        if mode == "switch" and not self.deploy.baseline:
            raise field_error(
                "policy.mode",
                "policy.mode 'switch' moves traffic between the speculative and the baseline "
                "twin, but deploy.baseline is false; set deploy.baseline: true",
            )

    @property
    def speculative(self) -> bool:
        """True when a proposer is configured (anything but method: none)."""
        return self.proposer.method != "none"

    def as_baseline(self) -> Profile:
        """The same deployment without speculation: same weights, same flags, no proposer."""
        return self.model_copy(update={"proposer": ProposerSpec()})
