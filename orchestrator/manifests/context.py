"""ManifestContext: every value a Kubernetes template prints, decided here when a profile is planned.

Templates only lay these values out (STYLE §8.8). `ManifestSet.values()` is also exactly what
`render --helm-values` writes, so the Helm chart in charts/specdeploy renders the same objects
from the same values. Each variant (the speculative deployment and its baseline twin) becomes one
workload (Deployment, or LeaderWorkerSet when TP x PP exceeds gpus_per_node), one Service and,
when the engine has config files, one ConfigMap; an optional PVC holds the shared model cache.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from orchestrator.engines import ENGINES
from orchestrator.engines.base import EngineLaunch
from orchestrator.manifests import commands
from orchestrator.memory.gpus import find_gpu
from orchestrator.plan.inputs import (
    CONTAINER_DRAFT_DIR,
    CONTAINER_TARGET_DIR,
    ManifestInputs,
    ModelLocation,
)
from orchestrator.profile.schema import ModelCacheSpec, Profile

Variant = Literal["speculative", "baseline"]
WorkloadKind = Literal["Deployment", "LeaderWorkerSet"]

MANAGED_BY: Final = "specdeploy"
PROFILE_LABEL: Final = "specdeploy.io/profile"
VARIANT_LABEL: Final = "specdeploy.io/variant"
#: Key inside deploy.hf_token_secret that holds the token (profile.schema.json); the engines load
#: weights through huggingface_hub, which reads HF_TOKEN
#: (https://github.com/huggingface/huggingface_hub/blob/v2.4.0/src/huggingface_hub/utils/_auth.py#L68).
HF_TOKEN_KEY: Final = "HF_TOKEN"
#: Hugging Face cache inside the official engine images, which run as root (vLLM's Kubernetes
#: guide mounts it, https://github.com/vllm-project/vllm/blob/07b3dbf3a5dc86a5caaf71b512fb1b3af07e5e37/docs/deployment/k8s.md; SGLang's Docker example
#: mounts the same path, https://github.com/sgl-project/sglang/blob/0b082f520802a6bb644b73ea5a3bccf61244836f/docker/k8s-sglang-service.yaml#L42-L45).
HF_CACHE_DIR: Final = "/root/.cache/huggingface"
#: Extended resource for a catalog GPU's node label key: nvidia.com/gpu from NVIDIA's device plugin
#: (https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/README.md#L187), amd.com/gpu from
#: AMD's (https://github.com/ROCm/k8s-device-plugin/blob/v1.31.0.10/example/pod/pytorch.yaml#L26).
GPU_RESOURCE_BY_LABEL: Final[dict[str, str]] = {
    "nvidia.com/gpu.product": "nvidia.com/gpu",
    "amd.com/gpu.product-name": "amd.com/gpu",
}
#: Start-up budget before the first healthy answer: image pull, weight download and load, CUDA
#: graph capture / compilation. vLLM's Kubernetes guide (https://github.com/vllm-project/vllm/blob/07b3dbf3a5dc86a5caaf71b512fb1b3af07e5e37/docs/deployment/k8s.md):
#: the download "might take a couple of minutes"; raise the startup failureThreshold when events
#: say "failed startup probe". These are
#: engineering allowances, not measurements: 10 min fixed + 30 s per GiB of weights (a download
#: at about 35 MB/s plus loading), or 60 min when the weight size is unknown.
STARTUP_BASE_SECONDS: Final = 600
STARTUP_SECONDS_PER_GIB: Final = 30
STARTUP_UNKNOWN_WEIGHTS_SECONDS: Final = 3600
STARTUP_PERIOD_SECONDS: Final = 10
#: Readiness every 5 s and liveness every 10 s, as in vLLM's Kubernetes guide (https://github.com/vllm-project/vllm/blob/07b3dbf3a5dc86a5caaf71b512fb1b3af07e5e37/docs/deployment/k8s.md).
READINESS_PERIOD_SECONDS: Final = 5
LIVENESS_PERIOD_SECONDS: Final = 10
#: An init container's download of one EngineLaunch.downloads entry, run with the engine image:
#: `sh -c SCRIPT download REPO_ID REVISION DIR` (an empty REVISION: the default branch). `hf` is
#: huggingface_hub's CLI from 0.34.0 (https://github.com/huggingface/huggingface_hub/releases/tag/v0.34.0);
#: 1.0 removed `huggingface-cli` (https://github.com/huggingface/huggingface_hub/releases/tag/v1.0.0),
#: which older images have instead (TensorRT-LLM 1.0-1.2 pin transformers 4.x, hence
#: huggingface_hub < 1.0).
DOWNLOAD_SCRIPT: Final = (
    "cli=hf; command -v hf >/dev/null 2>&1 || cli=huggingface-cli; "
    'exec "$cli" download "$1" --local-dir "$3" ${2:+--revision "$2"}'
)


@dataclass(frozen=True, kw_only=True)
class CtxModel:
    """Context values: frozen, built only by this module, dumped with camelCase keys (the Helm
    convention). Plain dataclasses rather than pydantic models: every `validate` builds them, and
    each pydantic model class costs about a millisecond of every CLI start. The constraints in
    the annotations are for the chart's values.schema.json (`helm.values_schema`)."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid", alias_generator=to_camel)

    def dump(self, exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
        """Plain JSON types with camelCase field names (keys inside dict values are kept)."""
        return {
            _camel(f.name): _plain(getattr(self, f.name))
            for f in fields(self)
            if f.name not in exclude
        }


@dataclass(frozen=True, kw_only=True)
class Probe(CtxModel):
    """An HTTP probe of the engine container."""

    path: Annotated[str, Field(pattern=r"^/")]
    period_seconds: Annotated[int, Field(ge=1)]
    timeout_seconds: Annotated[int, Field(ge=1)]
    failure_threshold: Annotated[int, Field(ge=1)]


@dataclass(frozen=True, kw_only=True)
class Probes(CtxModel):
    """Start-up, readiness and liveness probes."""

    startup: Probe
    readiness: Probe
    liveness: Probe


@dataclass(frozen=True, kw_only=True)
class PodContext(CtxModel):
    """One pod template: labels, the engine container and what surrounds it."""

    labels: dict[str, str]
    annotations: dict[str, str]
    image: str
    command: list[str]
    env: list[dict[str, Any]]
    resources: dict[str, dict[str, str]]
    node_selector: dict[str, str]
    tolerations: list[dict[str, str]]
    volumes: list[dict[str, Any]]
    volume_mounts: list[dict[str, Any]]
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    """Run to completion before the engine starts (model downloads)."""


@dataclass(frozen=True, kw_only=True)
class ServingPodContext(PodContext):
    """A pod that serves the OpenAI API: a named port and probes."""

    port: Annotated[int, Field(ge=1, le=65535)]
    probes: Probes


@dataclass(frozen=True, kw_only=True)
class ServiceContext(CtxModel):
    """The Service in front of a variant's serving pods."""

    metadata: dict[str, Any]
    selector: dict[str, str]
    port: Annotated[int, Field(ge=1, le=65535)]


@dataclass(frozen=True, kw_only=True)
class ConfigMapContext(CtxModel):
    """The engine's configuration files, mounted into its container."""

    metadata: dict[str, Any]
    data: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class VariantContext(CtxModel):
    """Everything for one launch (speculative or baseline)."""

    variant: Variant
    workload_kind: WorkloadKind
    metadata: dict[str, Any]
    selector: dict[str, str]
    replicas: Annotated[int, Field(ge=0)]
    group_size: Annotated[int, Field(ge=1)]
    pod: ServingPodContext
    worker: PodContext | None = None
    service: ServiceContext
    config_map: ConfigMapContext | None = None


@dataclass(frozen=True, kw_only=True)
class ModelCacheContext(CtxModel):
    """The PersistentVolumeClaim that holds the shared model cache."""

    metadata: dict[str, Any]
    spec: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ManifestSet(CtxModel):
    """All objects for one profile; also the Helm chart's values."""

    variants: list[VariantContext]
    model_cache: ModelCacheContext | None = None

    def values(self) -> dict[str, Any]:
        """Plain JSON types with camelCase keys: what templates and `--helm-values` see."""
        return self.dump()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _plain(value: Any) -> Any:
    if isinstance(value, CtxModel):
        return value.dump()
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def build_manifest_set(inputs: ManifestInputs) -> ManifestSet:
    """The context for every object of a planned profile: its own variant, the baseline twin
    when deploy.baseline asks for one, and the model-cache PVC when deploy.model_cache is set.
    Raises an OrchestratorError (a finding of the plan) for a topology that cannot be rendered."""
    profile = inputs.profile
    cache = profile.deploy.model_cache
    own: Variant = "speculative" if profile.speculative else "baseline"
    variants = [_variant(inputs, inputs.launches.container, own)]
    if profile.deploy.baseline and profile.speculative:
        variants.append(_variant(inputs, inputs.launches.baseline_container, "baseline"))
    cache_ctx = _model_cache(profile, cache) if cache is not None else None
    return ManifestSet(variants=variants, model_cache=cache_ctx)


def object_name(profile: Profile, variant: Variant) -> str:
    """The speculative deployment keeps the profile's name; its twin gets `-baseline`."""
    twin = variant == "baseline" and profile.speculative
    return f"{profile.metadata.name}-baseline" if twin else profile.metadata.name


def profile_selector(profile: Profile) -> dict[str, str]:
    """Labels every object of this profile carries (what status and delete select on)."""
    return name_selector(profile.metadata.name)


def name_selector(name: str) -> dict[str, str]:
    """Labels every object of the profile named `name` carries: its metadata.name is all that
    `delete` needs, so it also works for a profile that no longer validates."""
    return {"app.kubernetes.io/managed-by": MANAGED_BY, PROFILE_LABEL: name}


def profile_hash(profile: Profile) -> str:
    """sha256 of the profile's canonical JSON: changes when any setting changes, not comments.
    Settings left at their default are not hashed, so a new optional profile field does not
    change the hash (and re-annotate every deployed object) of profiles that do not use it."""
    document = profile.model_dump(mode="json", exclude_defaults=True)
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _variant(inputs: ManifestInputs, launch: EngineLaunch, variant: Variant) -> VariantContext:
    profile = inputs.profile
    name = object_name(profile, variant)
    labels = _labels(profile, launch, name, variant)
    audit = _audit(profile, launch, variant)
    metadata = _metadata(
        profile, name, labels, {**audit, "specdeploy.io/profile-hash": profile_hash(profile)}
    )
    selector = {"app.kubernetes.io/instance": name, PROFILE_LABEL: profile.metadata.name}
    topology = commands.topology(profile)
    config_map = _config_map(profile, launch, name, labels)
    volumes, mounts = _volumes(inputs, launch, variant, config_map)
    init_containers, download_volumes, download_mounts = model_downloads(profile, launch)
    gpus = _gpu_placement(profile, topology.gpus_per_pod)
    leader_command = commands.leader_command(launch, topology)
    pod = ServingPodContext(
        labels=labels,
        annotations=audit,
        image=launch.image,
        command=leader_command,
        env=_env(profile, launch),
        port=launch.port,
        probes=_probes(inputs, launch, variant),
        volumes=volumes + download_volumes,
        volume_mounts=mounts + download_mounts,
        init_containers=init_containers,
        **gpus,
    )
    worker = None
    if topology.group_size > 1:
        shared = {f.name: getattr(pod, f.name) for f in fields(PodContext) if f.name != "command"}
        worker = PodContext(**shared, command=commands.worker_command(launch, topology))
    service_name = f"{name}-leader" if worker is not None else name
    service_selector = {**selector, **(commands.LEADER_POD_LABELS if worker is not None else {})}
    return VariantContext(
        variant=variant,
        workload_kind="LeaderWorkerSet" if worker is not None else "Deployment",
        metadata=metadata,
        selector=selector,
        replicas=profile.deploy.replicas,
        group_size=topology.group_size,
        pod=pod,
        worker=worker,
        service=ServiceContext(
            metadata=_metadata(profile, service_name, labels, {}),
            selector=service_selector,
            port=launch.port,
        ),
        config_map=config_map,
    )


def _labels(profile: Profile, launch: EngineLaunch, name: str, variant: Variant) -> dict[str, str]:
    # Recommended labels (kubernetes.io/docs/concepts/overview/working-with-objects/common-labels).
    # Every value is label-safe: names are DNS-1123 labels, versions match EngineSpec's pattern.
    return {
        "app.kubernetes.io/name": launch.engine,
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/version": launch.version,
        "app.kubernetes.io/component": "inference-server",
        "app.kubernetes.io/part-of": profile.metadata.name,
        **profile_selector(profile),
        VARIANT_LABEL: variant,
    }


def _audit(profile: Profile, launch: EngineLaunch, variant: Variant) -> dict[str, str]:
    """The pairing, for anyone auditing what runs (DESIGN §6); absent values are left out."""
    speculative = variant == "speculative"
    proposer = profile.proposer
    values = {
        "specdeploy.io/target-model": profile.target.model,
        "specdeploy.io/target-revision": profile.target.revision,
        "specdeploy.io/proposer-method": proposer.method if speculative else "none",
        "specdeploy.io/proposer-model": proposer.model if speculative else None,
        "specdeploy.io/proposer-revision": proposer.revision if speculative else None,
        "specdeploy.io/engine": launch.engine,
        "specdeploy.io/engine-version": launch.version,
        "specdeploy.io/image": launch.image,
    }
    return {key: value for key, value in values.items() if value is not None}


def _metadata(
    profile: Profile, name: str, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    if profile.metadata.namespace is not None:
        metadata["namespace"] = profile.metadata.namespace
    return metadata


def _env(profile: Profile, launch: EngineLaunch) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": key, "value": value} for key, value in sorted(launch.env.items())
    ]
    return env + _hf_token_env(profile)


def _hf_token_env(profile: Profile) -> list[dict[str, Any]]:
    secret = profile.deploy.hf_token_secret
    if secret is None:
        return []
    # A reference only: the token never appears in a rendered file.
    ref = {"name": secret, "key": HF_TOKEN_KEY}
    return [{"name": HF_TOKEN_KEY, "valueFrom": {"secretKeyRef": ref}}]


def model_downloads(
    profile: Profile, launch: EngineLaunch
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(init containers, pod volumes, engine mounts) that fetch `launch.downloads`: one
    emptyDir per model, filled by an init container with the engine image, mounted at the
    directory the launch names."""
    containers: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for index, download in enumerate(launch.downloads):
        name = f"download-{index}"
        mount = {"name": name, "mountPath": download.target_dir}
        volumes.append({"name": name, "emptyDir": {}})
        mounts.append(mount)
        args = [download.repo_id, download.revision or "", download.target_dir]
        containers.append(
            {
                "name": name,
                "image": launch.image,
                "command": ["sh", "-c", DOWNLOAD_SCRIPT, "download", *args],
                "env": _hf_token_env(profile),
                "volumeMounts": [mount],
            }
        )
    return containers, volumes, mounts


def _gpu_placement(profile: Profile, gpus_per_pod: int) -> dict[str, Any]:
    """GPU limits, node selector and tolerations; nothing at all on device: cpu."""
    hardware = profile.hardware
    if hardware.device == "cpu" or hardware.gpu is None:
        return {"resources": {}, "node_selector": {}, "tolerations": []}
    gpu = find_gpu(hardware.gpu)
    resource = GPU_RESOURCE_BY_LABEL.get(gpu.label_key, "nvidia.com/gpu")
    return {
        "resources": {"limits": {resource: str(gpus_per_pod)}},
        "node_selector": {gpu.label_key: gpu.label_value},
        # GPU node pools are commonly tainted with the device plugin's resource name (GKE, AKS).
        "tolerations": [{"key": resource, "operator": "Exists", "effect": "NoSchedule"}],
    }


def _config_map(
    profile: Profile, launch: EngineLaunch, name: str, labels: dict[str, str]
) -> ConfigMapContext | None:
    if not launch.config_files:
        return None
    return ConfigMapContext(
        metadata=_metadata(profile, f"{name}-config", labels, {}),
        data=dict(sorted(launch.config_files.items())),
    )


def _volumes(
    inputs: ManifestInputs,
    launch: EngineLaunch,
    variant: Variant,
    config_map: ConfigMapContext | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    profile = inputs.profile
    shm = {"medium": "Memory", "sizeLimit": ENGINES[launch.engine].shm_size}
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": shm}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    hf_cache: dict[str, Any] = {"emptyDir": {}}
    if profile.deploy.model_cache is not None:
        hf_cache = {"persistentVolumeClaim": {"claimName": _cache_name(profile)}}
    volumes.append({"name": "hf-cache", **hf_cache})
    mounts.append({"name": "hf-cache", "mountPath": HF_CACHE_DIR})
    if config_map is not None:
        volumes.append(
            {"name": "engine-config", "configMap": {"name": config_map.metadata["name"]}}
        )
        mounts.append({"name": "engine-config", "mountPath": launch.config_dir, "readOnly": True})
    # A local checkpoint directory is mounted from the node (hostPath): the profile names a path on
    # this machine, which a single-node cluster (kind, minikube, k3s) or nodes sharing that path
    # (NFS) can see. Hub models need no mount; they download into the HF cache.
    local: list[tuple[str, ModelLocation | None, str]] = [
        ("target-model", inputs.target_location, CONTAINER_TARGET_DIR)
    ]
    if variant == "speculative":
        local.append(("draft-model", inputs.draft_location, CONTAINER_DRAFT_DIR))
    for volume, location, mount_path in local:
        if location is not None and location.local_dir is not None:
            host = {"path": str(location.local_dir), "type": "Directory"}
            volumes.append({"name": volume, "hostPath": host})
            mounts.append({"name": volume, "mountPath": mount_path, "readOnly": True})
    return volumes, mounts


def _probes(inputs: ManifestInputs, launch: EngineLaunch, variant: Variant) -> Probes:
    budget = _startup_budget_seconds(inputs, variant)
    threshold = math.ceil(budget / STARTUP_PERIOD_SECONDS)
    return Probes(
        startup=Probe(
            path=launch.health_path,
            period_seconds=STARTUP_PERIOD_SECONDS,
            timeout_seconds=5,
            failure_threshold=threshold,
        ),
        # The ready path may run a one-token generation (SGLang, TensorRT-LLM): allow 10 s.
        readiness=Probe(
            path=launch.ready_path,
            period_seconds=READINESS_PERIOD_SECONDS,
            timeout_seconds=10,
            failure_threshold=3,
        ),
        liveness=Probe(
            path=launch.health_path,
            period_seconds=LIVENESS_PERIOD_SECONDS,
            timeout_seconds=5,
            failure_threshold=3,
        ),
    )


def _startup_budget_seconds(inputs: ManifestInputs, variant: Variant) -> int:
    needed = [inputs.target]
    if variant == "speculative" and inputs.draft_location is not None:
        needed.append(inputs.draft)
    sizes = [c.weight_bytes for c in needed if c is not None and c.weight_bytes is not None]
    if len(sizes) != len(needed):
        return STARTUP_UNKNOWN_WEIGHTS_SECONDS
    return STARTUP_BASE_SECONDS + math.ceil(sum(sizes) / 1024**3 * STARTUP_SECONDS_PER_GIB)


def _model_cache(profile: Profile, cache: ModelCacheSpec) -> ModelCacheContext:
    spec: dict[str, Any] = {
        "accessModes": [cache.access_mode],
        "resources": {"requests": {"storage": cache.size}},
    }
    if cache.storage_class is not None:
        spec["storageClassName"] = cache.storage_class
    labels = {
        "app.kubernetes.io/name": profile.engine.name,
        "app.kubernetes.io/instance": profile.metadata.name,
        "app.kubernetes.io/component": "model-cache",
        "app.kubernetes.io/part-of": profile.metadata.name,
        **profile_selector(profile),
    }
    return ModelCacheContext(
        metadata=_metadata(profile, _cache_name(profile), labels, {}), spec=spec
    )


def _cache_name(profile: Profile) -> str:
    return f"{profile.metadata.name}-hf-cache"
