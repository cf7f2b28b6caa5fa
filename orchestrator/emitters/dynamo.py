"""The `dynamo` platform: one NVIDIA Dynamo `DynamoGraphDeployment` (nvidia.com/v1beta1) per twin:
a Frontend component (Dynamo's OpenAI server) and a worker component running the engine.

Components are v1beta1's `spec.components` list; the operator merges its defaults into the
container named `main` of each `podTemplate` (deploy/operator/api/v1beta1/
dynamocomponentdeployment_types.go). A replica spread over nodes is `multinode.nodeCount`; the
operator wires the engine's own multi-node launch. The worker runs `python3 -m dynamo.<engine>`:
vLLM and SGLang take the launch's flags as they are (their own argument parsers, exec arguments,
no shell), without --host/--port, which belong to the Frontend. TensorRT-LLM's settings go through
`--extra-engine-args` with the launch's LLM-API YAML, mounted from a ConfigMap, as Dynamo's
TensorRT-LLM worker reads it (components/src/dynamo/trtllm/backend_args.py); the YAML overrides
the worker's own defaults, so the speculative config arrives as rendered.

The runtime image carries Dynamo and its own engine release: specdeploy uses engine.image when
the profile sets one, else Dynamo's runtime image for the engine, and cannot check that image's
engine release against engine.version. With the default image the audit annotation
`specdeploy.io/engine-version` therefore says that the release is the image's and unverified,
rather than naming engine.version as if it ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

from orchestrator.emitters.base import Manifest, ResourceKind
from orchestrator.emitters.platform import (
    PlatformEmitter,
    Twin,
    container,
    drop_options,
    metadata,
    pod_spec,
    twins,
)
from orchestrator.engines import ENGINES
from orchestrator.manifests.commands import container_command
from orchestrator.plan.build import served_model_name

if TYPE_CHECKING:
    from orchestrator.plan.types import DeploymentPlan

API_VERSION: Final = "nvidia.com/v1beta1"
#: Dynamo release whose runtime images are the default (the image tag of the "Minimal example" in
#: the DynamoGraphDeployment reference of Dynamo's v1.5.0 documentation; not verified upstream at
#: a pinned URL).
DYNAMO_VERSION: Final = "1.4.0"
SOURCE: Final = "orchestrator/emitters/dynamo.py"
SHM_VOLUME: Final = "dshm"
#: The audit annotation of the image that runs (Dynamo's runtime image, not the engine's own).
IMAGE_ANNOTATION: Final = "specdeploy.io/image"
VERSION_ANNOTATION: Final = "specdeploy.io/engine-version"


@dataclass(frozen=True)
class Worker:
    """How Dynamo runs one engine: its worker module, runtime image and model flag, and where
    the model sits in specdeploy's launch of that engine (the flags follow it)."""

    module: str
    image: str
    model_flag: str
    model_index: int


#: Engine -> Dynamo worker
#: (https://github.com/ai-dynamo/dynamo/tree/4a78ada1d9a0d6f9e884f135ae609ee41b6eb9d7/components/src/dynamo);
#: launches are
#: `vllm serve MODEL ...`, `python3 -m sglang.launch_server --model-path MODEL ...` and
#: `trtllm-serve MODEL ...`.
WORKERS: Final[dict[str, Worker]] = {
    "vllm": Worker("dynamo.vllm", "nvcr.io/nvidia/ai-dynamo/vllm-runtime", "--model", 2),
    "sglang": Worker("dynamo.sglang", "nvcr.io/nvidia/ai-dynamo/sglang-runtime", "--model-path", 4),
    "trtllm": Worker("dynamo.trtllm", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime", "--model", 1),
}
#: Serving flags the Frontend owns (the worker serves no HTTP itself).
FRONTEND_FLAGS: Final = ("--host", "--port")


class DynamoEmitter(PlatformEmitter):
    """Dynamo graphs (Frontend + engine worker), with the TensorRT-LLM config as a ConfigMap."""

    name: ClassVar[str] = "dynamo"
    kinds: ClassVar[tuple[ResourceKind, ...]] = (
        ResourceKind("v1", "ConfigMap"),
        ResourceKind(
            API_VERSION,
            "DynamoGraphDeployment",
            workload=True,
            ready_condition="Ready",
            ready_means="Dynamo's Ready is True once every component (Frontend and worker, all "
            "nodes of a multinode worker) has its replicas ready; its reason says which blocks "
            "(insufficient_capacity, pods_not_ready, updating)",
        ),
    )

    def check(self, plan: DeploymentPlan) -> None:
        super().check(plan)
        self.require_hub_models(plan, "by Hugging Face id in each worker")

    def build(self, plan: DeploymentPlan) -> list[Manifest]:
        out: list[Manifest] = []
        for twin in twins(plan):
            if twin.ctx.config_map is not None:
                config = twin.ctx.config_map.dump()
                body = {"apiVersion": "v1", "kind": "ConfigMap", **config}
                out.append(Manifest.parse(body, source=SOURCE))
            out.append(Manifest.parse(graph(plan, twin), source=SOURCE))
        return out


def runtime_annotations(plan: DeploymentPlan, image: str) -> dict[str, str]:
    """The audit annotations of what runs: the image, and the engine release only where the
    profile pinned the image (engine.image); Dynamo's default runtime image carries its own."""
    engine = plan.profile.engine
    out = {IMAGE_ANNOTATION: image}
    if engine.image is None:
        out[VERSION_ANNOTATION] = (
            f"the release {image} carries (unverified; planned for {engine.version})"
        )
    return out


def graph(plan: DeploymentPlan, twin: Twin) -> dict[str, Any]:
    """The DynamoGraphDeployment of one twin."""
    engine = plan.profile.engine
    worker_def = WORKERS[engine.name]
    image = engine.image or f"{worker_def.image}:{DYNAMO_VERSION}"
    ctx = twin.ctx
    main = container(
        ctx,
        name="main",
        image=image,
        command=["python3", "-m", worker_def.module],
        args=container_command(worker_args(plan, twin)),
    )
    main.pop("env", None)  # spec.env below carries the env of every component
    # The operator mounts /dev/shm itself, sized by sharedMemorySize.
    main["volumeMounts"] = [m for m in main["volumeMounts"] if m["name"] != SHM_VOLUME]
    pod = pod_spec(ctx.pod, [main])
    pod["volumes"] = [v for v in pod["volumes"] if v["name"] != SHM_VOLUME]
    annotations = {**ctx.pod.annotations, **runtime_annotations(plan, image)}
    worker: dict[str, Any] = {
        "name": "worker",
        "type": "worker",
        "replicas": ctx.replicas,
        "sharedMemorySize": ENGINES[engine.name].shm_size,
        "podTemplate": {
            "metadata": {"labels": dict(ctx.pod.labels), "annotations": annotations},
            "spec": pod,
        },
    }
    if ctx.group_size > 1:
        worker["multinode"] = {"nodeCount": ctx.group_size}
    frontend = {
        "name": "frontend",
        "type": "frontend",
        "replicas": 1,
        "podTemplate": {"spec": {"containers": [{"name": "main", "image": image}]}},
    }
    spec: dict[str, Any] = {
        "backendFramework": engine.name,
        "annotations": annotations,
        "labels": dict(ctx.pod.labels),
        "components": [frontend, worker],
    }
    if ctx.pod.env:
        spec["env"] = [dict(e) for e in ctx.pod.env]
    meta = metadata(ctx)
    return {
        "apiVersion": API_VERSION,
        "kind": "DynamoGraphDeployment",
        "metadata": {
            **meta,
            "annotations": {**meta["annotations"], **runtime_annotations(plan, image)},
        },
        "spec": spec,
    }


def worker_args(plan: DeploymentPlan, twin: Twin) -> list[str]:
    """The worker's arguments: the launch's model and flags, or, for TensorRT-LLM, the model,
    its served name and parallelism, and the LLM-API YAML as --extra-engine-args."""
    launch = twin.launch
    worker_def = WORKERS[launch.engine]
    model = launch.argv[worker_def.model_index]
    if launch.config_files:
        hardware = plan.profile.hardware
        (config_file,) = launch.config_files
        return [
            worker_def.model_flag,
            model,
            "--served-model-name",
            served_model_name(plan.profile, plan.target_location),
            "--tensor-parallel-size",
            str(hardware.tensor_parallel_size),
            "--pipeline-parallel-size",
            str(hardware.pipeline_parallel_size),
            "--extra-engine-args",
            f"{launch.config_dir}/{config_file}",
        ]
    flags = launch.argv[worker_def.model_index + 1 :]
    return [worker_def.model_flag, model, *drop_options(flags, FRONTEND_FLAGS)]
