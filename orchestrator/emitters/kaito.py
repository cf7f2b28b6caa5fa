"""The `kaito` platform: one Kaito `Workspace` (kaito.sh/v1beta1) per twin, with the ConfigMap its
vLLM runtime reads (`inference.config`, key `inference_config.yaml`).

Kaito v0.12.0 starts vLLM through presets/workspace/inference/vllm/inference_api.py, which loads
that file with `yaml.safe_load` and appends `--KEY`, `str(VALUE)` for every entry of its `vllm:`
mapping after the arguments Kaito chose itself, so ours come last and win; the webhook reads the
mapping as `map[string]string` (api/v1beta1/inference_config_validation.go). Every value is
therefore written as a YAML string: the speculative config is the JSON text vLLM parses, never a
YAML mapping (whose `str()` is a Python repr). A flag without a value cannot be expressed that way:
`--trust-remote-code` is left out because Kaito already passes it for Hugging Face models
(presets/workspace/models/vllm_model.go), any other is refused.

Kaito places the pods by `resource`: an Azure `instanceType` Kaito provisions (its SKU table,
pkg/sku/azure_sku_handler.go) when one has exactly the GPUs a pod needs, else existing nodes that
carry the GPU's node label; `count` is the nodes one replica spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

import yaml

from orchestrator.emitters.base import Manifest, ResourceKind
from orchestrator.emitters.platform import PlatformEmitter, Twin, metadata, twins
from orchestrator.manifests.commands import topology

if TYPE_CHECKING:
    from orchestrator.plan.types import DeploymentPlan

API_VERSION: Final = "kaito.sh/v1beta1"
#: The ConfigMap key Kaito's webhook and runtime read.
CONFIG_KEY: Final = "inference_config.yaml"
#: Flags Kaito sets itself and ours must not repeat: its port (5000 + local rank, where its
#: Service points) and host, and trust-remote-code, which it passes without a value.
KAITO_FLAGS: Final = frozenset({"--host", "--port"})
KAITO_VALUELESS: Final = frozenset({"--trust-remote-code"})
#: (GPU catalog name, GPUs per node) -> the Azure SKU in Kaito's table with exactly those GPUs
#: (https://github.com/kaito-project/kaito/blob/v0.12.0/pkg/sku/azure_sku_handler.go).
AZURE_SKUS: Final[dict[tuple[str, int], str]] = {
    ("A100-80GB", 1): "Standard_NC24ads_A100_v4",
    ("A100-80GB", 2): "Standard_NC48ads_A100_v4",
    ("A100-80GB", 4): "Standard_NC96ads_A100_v4",
    ("A100-80GB", 8): "Standard_ND96amsr_A100_v4",
    ("A100-40GB", 8): "Standard_ND96asr_A100_v4",
    ("H100-NVL", 1): "Standard_NC40ads_H100_v5",
    ("H100-NVL", 2): "Standard_NC80adis_H100_v5",
    ("H100-80GB", 8): "Standard_ND96isr_H100_v5",
    ("H200", 8): "Standard_ND96isr_H200_v5",
}


class KaitoEmitter(PlatformEmitter):
    """Kaito Workspaces with their vLLM inference ConfigMaps."""

    name: ClassVar[str] = "kaito"
    kinds: ClassVar[tuple[ResourceKind, ...]] = (
        ResourceKind("v1", "ConfigMap"),
        ResourceKind(
            API_VERSION,
            "Workspace",
            workload=True,
            ready_condition="WorkspaceSucceeded",
            ready_means="Kaito's WorkspaceSucceeded follows ResourceReady (GPU nodes provisioned "
            "or found by labelSelector) and InferenceReady (the vLLM pods serve)",
        ),
    )
    engines = frozenset({"vllm"})
    engine_gap = "Kaito's inference runtimes are vLLM and transformers; only vLLM speculates"

    def check(self, plan: DeploymentPlan) -> None:
        super().check(plan)
        self.require_hub_models(plan, "by Hugging Face id (inference.preset.name)")
        if plan.profile.deploy.replicas != 1:
            raise self.refusal(
                f"deploy.replicas={plan.profile.deploy.replicas}: a Kaito Workspace serves one "
                "replica",
                why="Workspace has no replica count (resource.count is the nodes of one replica)",
                fix="set deploy.replicas: 1 (scale with a Kaito InferenceSet), or render "
                "another --platform",
                field="deploy.replicas",
            )
        for twin in twins(plan):
            vllm_config(twin.launch.argv, self)

    def build(self, plan: DeploymentPlan) -> list[Manifest]:
        out: list[Manifest] = []
        for twin in twins(plan):
            config_name = f"{twin.name}-inference-config"
            text = yaml.safe_dump(
                {"vllm": vllm_config(twin.launch.argv, self)}, sort_keys=False, width=1_000_000
            )
            config_map = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(twin.ctx, config_name),
                "data": {CONFIG_KEY: text},
            }
            out.append(Manifest.parse(config_map, source="orchestrator/emitters/kaito.py"))
            out.append(self._workspace(plan, twin, config_name))
        return out

    def _workspace(self, plan: DeploymentPlan, twin: Twin, config_name: str) -> Manifest:
        profile = plan.profile
        preset: dict[str, Any] = {"name": profile.target.model}
        if profile.deploy.hf_token_secret is not None:
            preset["presetOptions"] = {"modelAccessSecret": profile.deploy.hf_token_secret}
        body = {
            "apiVersion": API_VERSION,
            "kind": "Workspace",
            "metadata": metadata(twin.ctx),
            "resource": self._resource(plan, twin),
            "inference": {"preset": preset, "config": config_name},
        }
        return Manifest.parse(body, source="orchestrator/emitters/kaito.py")

    def _resource(self, plan: DeploymentPlan, twin: Twin) -> dict[str, Any]:
        hardware = plan.profile.hardware
        topo = topology(plan.profile)
        resource: dict[str, Any] = {"count": topo.group_size}
        sku = AZURE_SKUS.get((hardware.gpu or "", topo.gpus_per_pod))
        if sku is not None:  # Kaito provisions the nodes and labels them with matchLabels
            resource["instanceType"] = sku
            resource["labelSelector"] = {"matchLabels": {"apps": twin.name}}
        else:  # bring-your-own GPU nodes, found by the GPU's node label
            resource["labelSelector"] = {"matchLabels": dict(twin.ctx.pod.node_selector)}
        return resource


def vllm_config(argv: tuple[str, ...], emitter: KaitoEmitter) -> dict[str, str]:
    """The launch's flags after `vllm serve MODEL` as Kaito's `vllm:` mapping: flag name without
    dashes -> the value as a string. Refuses what Kaito's `--KEY VALUE` expansion cannot say."""
    tokens = list(argv[3:])
    config: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        flag = tokens[i]
        if "=" in flag and flag.startswith("--"):
            flag, value = flag.split("=", 1)
            i += 1
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
            i += 2
        else:
            i += 1
            if flag in KAITO_VALUELESS:
                continue
            raise emitter.refusal(
                f"vLLM flag {flag} takes no value, and Kaito passes each `vllm:` entry of its "
                "inference config as --KEY VALUE",
                why=f"vLLM would read the value as an unexpected argument and refuse to start "
                f"({flag} from the profile)",
                fix=f"drop {flag} (vllm.enforce_eager, or serving.extra_args), or render another "
                "--platform",
            )
        if flag in KAITO_FLAGS:
            continue
        key = flag.removeprefix("--")
        if key in config:
            raise emitter.refusal(
                f"vLLM flag {flag} appears twice; Kaito's inference config is a mapping",
                why="a YAML mapping holds each key once, so one value would be lost",
                fix=f"pass {flag} once (check serving.extra_args)",
                field="serving.extra_args",
            )
        config[key] = value
    return config
