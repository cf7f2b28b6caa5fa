"""The `production-stack` platform: Helm values for vLLM production-stack's `vllm-stack` chart
(https://github.com/vllm-project/production-stack, chart vllm-stack-0.1.12), one release per twin.

The chart's engine Deployment (helm/templates/deployment-vllm-multi.yaml) runs `vllm serve
modelURL --host 0.0.0.0 --port PORT`, then the `vllmConfig` flags, then each `vllmConfig.extraArgs`
item as `- {{ . | quote }}`: one container argument per item, no shell. The launch's flags after
the model go there verbatim (Helm's `quote` yields a YAML string that reads back as the same
token; tests/unit/emitters/test_production_stack.py runs the real `helm template` to show it).
`vllmConfig` is kept to `enablePrefixCaching: true` because the chart renders
`--no-enable-prefix-caching` whenever `vllmConfig` lacks it, which would change vLLM's default.

The stack's router sends a model name's requests to every engine serving it, with no weights, so
the baseline twin is a second release (values under baseline/) with its own router.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

import yaml

from orchestrator.emitters.base import Manifest, ResourceKind
from orchestrator.emitters.platform import PlatformEmitter, Twin, drop_options, twins
from orchestrator.manifests.commands import container_command, topology
from orchestrator.manifests.context import HF_TOKEN_KEY, VARIANT_LABEL

if TYPE_CHECKING:
    from orchestrator.plan.types import DeploymentPlan

#: The chart renders these itself: `--host 0.0.0.0 --port {{ containerPort }}` after the model.
CHART_FLAGS: Final = ("--host", "--port")
#: Labels the chart writes on the engine Deployment, its selector and its pods itself
#: (`model`, `helm-release-name` and `chart.engineStandardLabels`,
#: https://github.com/vllm-project/production-stack/blob/66b60661aa3052810859a417559e9e830772a091/helm/templates/_helpers.tpl#L261-L275
#: and https://github.com/vllm-project/production-stack/blob/66b60661aa3052810859a417559e9e830772a091/helm/templates/deployment-vllm-multi.yaml#L24-L56). Passing them again through the values
#: would print each key twice in one mapping, which YAML decoders refuse (Helm's and kubectl's).
CHART_LABELS: Final = frozenset(
    {
        "model",
        "helm-release-name",
        "app.kubernetes.io/name",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/component",
        "app.kubernetes.io/part-of",
        "app.kubernetes.io/managed-by",
    }
)
#: CPU and memory requests the chart requires (`chart.resources` fails without them); these are
#: the values of the chart's minimal example as vLLM's production-stack guide shows it
#: (https://github.com/vllm-project/vllm/blob/d5c95556302c4f4fdae9e2aef9d03548e1b1f678/docs/deployment/integrations/production-stack.md),
#: as specdeploy's profile has no CPU or memory setting.
REQUEST_CPU: Final = 6
REQUEST_MEMORY: Final = "16Gi"
VALUES_FILE: Final = "production-stack/values.yaml"


class ProductionStackEmitter(PlatformEmitter):
    """Helm values for vllm-stack: one `servingEngineSpec.modelSpec` per release."""

    name: ClassVar[str] = "production-stack"
    kinds: ClassVar[tuple[ResourceKind, ...]] = ()
    engines = frozenset({"vllm"})
    engine_gap = "the vllm-stack chart's engine container runs `vllm serve`"

    def check(self, plan: DeploymentPlan) -> None:
        super().check(plan)
        self.require_hub_models(plan, "by Hugging Face id (modelSpec.modelURL)")
        hardware = plan.profile.hardware
        if topology(plan.profile).group_size > 1:
            raise self.refusal(
                f"hardware.tensor_parallel_size x pipeline_parallel_size = "
                f"{hardware.gpus_per_replica} GPUs spans {hardware.nodes_per_replica} nodes",
                why="specdeploy renders the stack's single-pod engines; its Ray multi-node "
                "engines (modelSpec.raySpec) are not rendered",
                fix="fit one node (hardware.gpus_per_node), or render --platform kubernetes",
                field="hardware.tensor_parallel_size",
            )

    def emit(self, plan: DeploymentPlan) -> list[Manifest]:
        raise self.refusal(
            "platform production-stack is installed with Helm, not applied object by object",
            why="specdeploy renders the chart's values; the chart makes the objects",
            fix="`specdeploy render PROFILE --platform production-stack --out DIR`, then "
            f"`helm install NAME vllm/vllm-stack -f DIR/{VALUES_FILE}` (and DIR/production-stack"
            "/baseline/values.yaml for the twin)",
        )

    def files(self, plan: DeploymentPlan) -> dict[str, str]:
        self.check(plan)
        out = {}
        for twin in twins(plan):
            path = "production-stack/baseline/values.yaml" if twin.baseline else VALUES_FILE
            if len(plan.manifests.variants) == 1:
                path = VALUES_FILE
            out[path] = yaml.safe_dump(values(plan, twin), sort_keys=False, width=1_000_000)
        return out


def values(plan: DeploymentPlan, twin: Twin) -> dict[str, Any]:
    """The chart values that run this twin's launch."""
    launch = twin.launch
    image, _, tag = launch.image.rpartition(":")
    pod = twin.ctx.pod
    gpus = next(iter(pod.resources.get("limits", {}).values()), None)
    # On the engine Deployment, its selector and pods (the chart's engineLabels): what `status`
    # and `delete` select this profile's objects by. The chart prints them before the model's
    # own labels, so those leave out every key already printed.
    engine_labels = _own(twin.ctx.selector) | {VARIANT_LABEL: twin.ctx.variant}
    spec: dict[str, Any] = {
        "name": twin.name,
        "repository": image,
        "tag": tag,
        "modelURL": launch.argv[2],
        "replicaCount": twin.ctx.replicas,
        "requestCPU": REQUEST_CPU,
        "requestMemory": REQUEST_MEMORY,
        "requestGPU": int(gpus) if gpus is not None else 0,
        "vllmConfig": {
            "enablePrefixCaching": True,
            "extraArgs": container_command(drop_options(launch.argv[3:], CHART_FLAGS)),
        },
        "labels": _own(twin.ctx.metadata["labels"], engine_labels),
        "annotations": dict(twin.ctx.metadata.get("annotations", {})),
        "podLabels": _own(pod.labels, engine_labels),
        "podAnnotations": dict(pod.annotations),
    }
    secret = plan.profile.deploy.hf_token_secret
    if secret is not None:
        spec["hf_token"] = {"secretName": secret, "secretKey": HF_TOKEN_KEY}
    if pod.node_selector:
        spec["nodeSelectorTerms"] = [
            {
                "matchExpressions": [
                    {"key": key, "operator": "In", "values": [value]}
                    for key, value in sorted(pod.node_selector.items())
                ]
            }
        ]
    env = [dict(e) for e in pod.env if e["name"] != HF_TOKEN_KEY]
    if env:
        spec["env"] = env
    engine: dict[str, Any] = {
        "enableEngine": True,
        "containerPort": launch.port,
        "labels": engine_labels,
        "modelSpec": [spec],
    }
    if pod.tolerations:  # one model per release, so the release-wide tolerations are its own
        engine["tolerations"] = [dict(t) for t in pod.tolerations]
    return {"servingEngineSpec": engine, "routerSpec": {"enableRouter": True}}


def _own(labels: dict[str, str], printed: dict[str, str] | None = None) -> dict[str, str]:
    """`labels` without the keys the chart sets itself or has already `printed`."""
    skip = CHART_LABELS | set(printed or {})
    return {key: value for key, value in labels.items() if key not in skip}
