"""The `kserve` platform: one KServe `LLMInferenceService` per twin (serving.kserve.io/v1alpha2,
or v1alpha1 with `--platform-option api-version=v1alpha1`; KServe v0.20.0 serves both).

KServe's default template (config/llmisvcconfig/config-llm-template.yaml, `main` container) starts
vLLM as `bash -c '... eval "exec vllm serve /mnt/models --served-model-name NAME ... --port 8000
--tensor-parallel-size TP ${VLLM_ADDITIONAL_ARGS} $@"' --`, so the container `args` become `$@`
and are word-split and unquoted again by `eval`. Each flag is therefore passed shell-quoted:
`eval` turns `'{"method": "eagle3", ...}'` back into the single token vLLM expects
(tests/unit/emitters/test_kserve_template.py runs the real template under bash to show it).
KServe's storage initializer downloads only `spec.model.uri` (the target) into /mnt/models; the
draft or EAGLE head stays a hub id in the speculative config, which vLLM downloads itself (with
HF_TOKEN from deploy.hf_token_secret) into the template's HF_HUB_CACHE.

With deploy.baseline_traffic_percent the twins join one KServe route group (`router.route.group`)
with proportional `router.route.weight`s, which KServe turns into one weighted HTTPRoute
(https://github.com/kserve/kserve/blob/v0.20.0/pkg/apis/serving/v1alpha2/llm_inference_service_types.go
GatewayRoutesSpec).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, ClassVar, Final

from orchestrator.emitters.base import Manifest, ResourceKind
from orchestrator.emitters.platform import (
    PlatformEmitter,
    Twin,
    container,
    drop_options,
    metadata,
    pod_spec,
    probe,
    twins,
)
from orchestrator.emitters.traffic import gateway_ref
from orchestrator.manifests.commands import container_command, topology

if TYPE_CHECKING:
    from orchestrator.plan.types import DeploymentPlan

GROUP: Final = "serving.kserve.io"
#: The port KServe's template serves on and probes (`--port 8000` in the template).
KSERVE_PORT: Final = 8000
#: Flags the template renders itself
#: (https://github.com/kserve/kserve/blob/v0.20.0/config/llmisvcconfig/config-llm-template.yaml:
#: `--served-model-name NAME publishers/NS/models/NAME`, its port, the tensor size from
#: spec.parallelism, access-log, shutdown and TLS flags); passing one again makes the last copy
#: win: a second `--served-model-name` would drop the `publishers/...` name KServe advertises in
#: status.addresses[].models and routes on. `--revision` is dropped because the storage initializer already fetched
#: the pinned revision (`hf://owner/model:revision`,
#: https://github.com/kserve/kserve/blob/6f9057dd0934900d1b226ea3b9b8ff2d15dc23f2/python/storage/kserve_storage/kserve_storage.py)
#: and vLLM reads the local copy in /mnt/models.
TEMPLATE_FLAGS: Final = (
    "--served-model-name",
    "--port",
    "--tensor-parallel-size",
    "--revision",
    "--disable-access-log-for-endpoints",
    "--shutdown-timeout",
    "--ssl-certfile",
    "--ssl-keyfile",
)


class KserveEmitter(PlatformEmitter):
    """KServe LLMInferenceServices (one per twin), split by route-group weights."""

    name: ClassVar[str] = "kserve"
    kinds: ClassVar[tuple[ResourceKind, ...]] = (
        ResourceKind(
            f"{GROUP}/v1alpha2",
            "LLMInferenceService",
            workload=True,
            ready_condition="Ready",
            ready_means="KServe's Ready aggregates WorkloadsReady (the vLLM pods, and the worker "
            "LeaderWorkerSet when multi-node) and RouterReady (HTTPRoute, Gateway, InferencePool "
            "and scheduler)",
        ),
    )
    engines = frozenset({"vllm"})
    engine_gap = "KServe's LLMInferenceService template starts `vllm serve`"
    options: ClassVar[dict[str, tuple[str, ...]]] = {"api-version": ("v1alpha2", "v1alpha1")}
    splits_traffic: ClassVar[bool] = True

    def check(self, plan: DeploymentPlan) -> None:
        super().check(plan)
        self.require_hub_models(plan, "from spec.model.uri (hf://, s3://, pvc://)")
        hardware = plan.profile.hardware
        if topology(plan.profile).group_size > 1 and hardware.pipeline_parallel_size == 1:
            raise self.refusal(
                f"hardware.tensor_parallel_size={hardware.tensor_parallel_size} spans "
                f"{hardware.nodes_per_replica} nodes with pipeline_parallel_size=1",
                why="KServe starts a multi-node worker only with pipeline or data parallelism "
                "(its webhook refuses spec.worker otherwise: "
                "pkg/apis/serving/v1alpha2/llm_inference_service_validation.go)",
                fix="fit tensor_parallel_size on one node (hardware.gpus_per_node) and spread "
                "nodes with hardware.pipeline_parallel_size",
                field="hardware.pipeline_parallel_size",
            )

    def build(self, plan: DeploymentPlan) -> list[Manifest]:
        api_version = f"{GROUP}/{self.chosen['api-version']}"
        return [self._service(plan, twin, api_version) for twin in twins(plan)]

    def _service(self, plan: DeploymentPlan, twin: Twin, api_version: str) -> Manifest:
        profile = plan.profile
        hardware = profile.hardware
        target = profile.target
        uri = f"hf://{target.model}" + (f":{target.revision}" if target.revision else "")
        parallelism: dict[str, int] = {"tensor": hardware.tensor_parallel_size}
        if hardware.pipeline_parallel_size > 1:
            parallelism["pipeline"] = hardware.pipeline_parallel_size
        spec: dict[str, Any] = {
            "model": {"uri": uri, "name": _served_name(twin)},
            "replicas": twin.ctx.replicas,
            "parallelism": parallelism,
            "labels": dict(twin.ctx.pod.labels),
            "annotations": dict(twin.ctx.pod.annotations),
            "template": pod_spec(twin.ctx.pod, [self._main(twin)]),
            "router": self._router(plan, twin),
        }
        spec["template"]["volumes"] = [_dshm(twin)]
        if twin.ctx.worker is not None:
            worker = container(
                twin.ctx,
                name="main",
                worker=True,
                command=list(twin.ctx.worker.command),
                volumeMounts=[{"name": "dshm", "mountPath": "/dev/shm"}],
            )
            spec["worker"] = {**pod_spec(twin.ctx.pod, [worker]), "volumes": [_dshm(twin)]}
        body: dict[str, Any] = {"apiVersion": api_version, "kind": "LLMInferenceService"}
        body |= {"metadata": metadata(twin.ctx), "spec": spec}
        return Manifest.parse(body, source="orchestrator/emitters/kserve.py")

    def _main(self, twin: Twin) -> dict[str, Any]:
        probes = twin.ctx.pod.probes
        fields: dict[str, Any] = {
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
            # The template's 10-minute startup allowance is too short for a large download.
            "startupProbe": probe(
                probes.startup.path,
                KSERVE_PORT,
                probes.startup.period_seconds,
                probes.startup.timeout_seconds,
                probes.startup.failure_threshold,
            ),
            # The template runs as non-root for llm-d's images; the official vLLM image (the
            # release the profile pins) runs as root.
            "securityContext": {"runAsNonRoot": False},
        }
        if twin.ctx.worker is not None:  # multi-node: the leader runs our Ray leader command
            fields["command"] = list(twin.ctx.pod.command)
        else:
            fields["args"] = kserve_args(twin)
        return container(twin.ctx, name="main", **fields)

    def _router(self, plan: DeploymentPlan, twin: Twin) -> dict[str, Any]:
        route: dict[str, Any] = {}
        if twin.weight is not None:
            route = {"group": plan.profile.metadata.name, "weight": twin.weight}
        gateway: dict[str, Any] = {}
        if plan.profile.deploy.gateway is not None:
            ref = gateway_ref(plan.profile.deploy.gateway)
            gateway = {"refs": [{k: v for k, v in ref.items() if k in ("name", "namespace")}]}
        return {"route": route, "gateway": gateway, "scheduler": {}}


def kserve_args(twin: Twin) -> list[str]:
    """The launch's flags as `args` of KServe's template: without the model (the template serves
    /mnt/models) and the flags it sets, each shell-quoted for its `eval`, and each `$` doubled
    for the kubelet."""
    # `vllm serve MODEL --flag ...`: the flags start at the fourth token of every vLLM launch.
    flags = drop_options(twin.launch.argv[3:], TEMPLATE_FLAGS)
    return container_command([shlex.quote(token) for token in flags])


def _served_name(twin: Twin) -> str:
    argv = list(twin.launch.argv)
    return argv[argv.index("--served-model-name") + 1]


def _dshm(twin: Twin) -> dict[str, Any]:
    volume = next(v for v in twin.ctx.pod.volumes if v["name"] == "dshm")
    return dict(volume)
