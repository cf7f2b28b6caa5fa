"""The `kserve-runtime` platform: one KServe `InferenceService` (serving.kserve.io/v1beta1) per
twin, served by KServe's vLLM ClusterServingRuntime `kserve-vllmserver`.

That runtime (https://github.com/kserve/kserve/blob/v0.20.0/config/runtimes/kserve-vllmserver.yaml)
runs `python -m vllm.entrypoints.openai.api_server --port=8080 --served-model-name={{.Name}}
--model=/mnt/models` and appends the predictor's `args` as further argv tokens (no shell), so the
speculative config passes as the one JSON token it is. Our flags come after the runtime's, so our
--served-model-name wins (both twins answer to the same model name). The storage initializer
downloads `storageUri` (the target) into /mnt/models; the draft or head is downloaded by vLLM.
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
from orchestrator.manifests.commands import container_command, topology

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
        model.pop("image")  # the runtime's image (vLLM official, GPU or CPU build)
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


def runtime_args(twin: Twin) -> list[str]:
    """The launch's flags after `vllm serve MODEL`, without those the runtime sets; exec
    arguments (no shell), so only the kubelet's `$` needs escaping."""
    return container_command(drop_options(twin.launch.argv[3:], RUNTIME_FLAGS))
