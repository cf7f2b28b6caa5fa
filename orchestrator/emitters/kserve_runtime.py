"""The `kserve-runtime` platform: one KServe `InferenceService` (serving.kserve.io/v1beta1) per
twin, served by KServe's vLLM ClusterServingRuntime `kserve-vllmserver`.

That runtime (https://github.com/kserve/kserve/blob/v0.20.0/config/runtimes/kserve-vllmserver.yaml)
runs `python -m vllm.entrypoints.openai.api_server --port=8080 --served-model-name={{.Name}}
--model=/mnt/models` and appends the predictor's `args` as further argv tokens (no shell), so the
speculative config passes as the one JSON token it is. Our flags come after the runtime's, so our
--served-model-name wins (both twins answer to the same model name). The storage initializer
downloads `storageUri` (the target) into /mnt/models; the draft or head is downloaded by vLLM.

KServe merges our predictor container into the runtime's with a strategic merge patch, then
concatenates the args (`MergeRuntimeContainers`, kserve/kserve v0.20.0 commit 1fb7810,
pkg/controller/v1beta1/inferenceservice/utils/utils.go). `resources.requests` and `.limits` are
maps, so they merge per key: a key we leave out keeps the runtime's `cpu: 1, memory: 2Gi`, which
OOM-kills an 8B model with a draft. We set cpu and memory requests and limits from the plan
(orchestrator/memory/host.py has the formula and its reasons) beside the GPU limit. The image
is pinned the same way: ours (the profile's engine release) replaces the runtime's `latest`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

from orchestrator.emitters.base import Manifest, ResourceKind
from orchestrator.emitters.kserve import GROUP
from orchestrator.emitters.platform import (
    PlatformEmitter,
    Twin,
    container,
    drop_options,
    metadata,
    twins,
)
from orchestrator.engines import ENGINES
from orchestrator.manifests.commands import container_command, topology
from orchestrator.memory.host import host_resources

if TYPE_CHECKING:
    from orchestrator.plan.types import DeploymentPlan

RUNTIME: Final = "kserve-vllmserver"
#: The runtime's model format (`supportedModelFormats` of kserve-vllmserver).
MODEL_FORMAT: Final = "vLLM"
#: The runtime fixes the port (8080, where KServe routes) and the model path; the storage
#: initializer fetched the pinned revision already.
RUNTIME_FLAGS: Final = ("--port", "--revision")


class KserveRuntimeEmitter(PlatformEmitter):
    """KServe InferenceServices on the vLLM ClusterServingRuntime."""

    name: ClassVar[str] = "kserve-runtime"
    kinds: ClassVar[tuple[ResourceKind, ...]] = (
        ResourceKind(
            f"{GROUP}/v1beta1",
            "InferenceService",
            workload=True,
            ready_condition="Ready",
            ready_means="KServe's Ready needs PredictorReady (the vLLM predictor pods pass the "
            "runtime's /v1/models readiness probe) and, in Serverless mode, the route",
        ),
    )
    engines = frozenset({"vllm"})
    engine_gap = "the kserve-vllmserver ClusterServingRuntime starts vLLM's OpenAI server"

    def check(self, plan: DeploymentPlan) -> None:
        super().check(plan)
        self.require_hub_models(plan, "from storageUri")
        hardware = plan.profile.hardware
        if topology(plan.profile).group_size > 1:
            raise self.refusal(
                f"hardware.tensor_parallel_size x pipeline_parallel_size = "
                f"{hardware.gpus_per_replica} GPUs spans {hardware.nodes_per_replica} nodes",
                why="the kserve-vllmserver runtime runs one pod per replica",
                fix="fit one node (hardware.gpus_per_node), or render --platform kserve "
                "(LLMInferenceService with a multi-node worker)",
                field="hardware.tensor_parallel_size",
            )

    def build(self, plan: DeploymentPlan) -> list[Manifest]:
        return [self._service(plan, twin) for twin in twins(plan)]

    def _service(self, plan: DeploymentPlan, twin: Twin) -> Manifest:
        target = plan.profile.target
        uri = f"hf://{target.model}" + (f":{target.revision}" if target.revision else "")
        model = container(
            twin.ctx,
            name="kserve-container",
            modelFormat={"name": MODEL_FORMAT},
            runtime=RUNTIME,
            storageUri=uri,
            args=runtime_args(twin),
            volumeMounts=[{"name": "dshm", "mountPath": "/dev/shm"}],
        )
        model["resources"] = pod_resources(plan, twin)
        # `image` stays: the predictor's model is a core/v1 Container and the merge takes our
        # image over the runtime's, which resolves to vllm/vllm-openai:latest (the runtime's
        # `vllmserver:replace`, set by KServe's kustomization). Pinned, the pod runs the release
        # the plan was checked against and the audit annotations name.
        model.pop("name")
        predictor: dict[str, Any] = {
            "minReplicas": twin.ctx.replicas,
            "maxReplicas": max(twin.ctx.replicas, 1),
            "model": model,
            "volumes": [v for v in twin.ctx.pod.volumes if v["name"] == "dshm"],
        }
        if twin.ctx.pod.node_selector:
            predictor["nodeSelector"] = dict(twin.ctx.pod.node_selector)
        if twin.ctx.pod.tolerations:
            predictor["tolerations"] = [dict(t) for t in twin.ctx.pod.tolerations]
        meta = metadata(twin.ctx)
        body = {"apiVersion": f"{GROUP}/v1beta1", "kind": "InferenceService", "metadata": meta}
        body["spec"] = {"predictor": predictor}
        return Manifest.parse(body, source="orchestrator/emitters/kserve_runtime.py")


def pod_resources(plan: DeploymentPlan, twin: Twin) -> dict[str, dict[str, str]]:
    """The GPU limit of the plan plus cpu and memory requests and limits for every key the
    runtime sets, so none of the runtime's survives KServe's per-key merge."""
    gpus = topology(plan.profile).gpus_per_pod
    draft = None
    if not twin.baseline and plan.draft_location is not None:
        draft = plan.draft
    host = host_resources(
        gpus_per_pod=gpus,
        shm_size=ENGINES[twin.launch.engine].shm_size,
        target=plan.target,
        draft=draft,
    ).resources()
    for key, values in twin.ctx.pod.resources.items():
        host.setdefault(key, {}).update(values)
    return host


def runtime_args(twin: Twin) -> list[str]:
    """The launch's flags after `vllm serve MODEL`, without those the runtime sets; exec
    arguments (no shell), so only the kubelet's `$` needs escaping."""
    return container_command(drop_options(twin.launch.argv[3:], RUNTIME_FLAGS))
