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

Kaito places the pods by `resource`, and its webhook decides which shape it takes from one
feature gate (`validateCreate`, https://github.com/kaito-project/kaito/blob/v0.12.0/api/v1beta1/workspace_validation.go):
with node auto-provisioning on (the default: `disableNodeAutoProvisioning` is off) it refuses a
Workspace without `instanceType`; with it off it refuses one with it. `--platform-option nodes=`
says which: `provisioned` (the default, as Kaito's) sets the Azure `instanceType` from Kaito's SKU
table (pkg/sku/azure_sku_handler.go) that has exactly the GPUs a pod needs, and refuses a GPU
count no SKU has; `existing` leaves it out and selects existing nodes by the GPU's node label.
`count` is the nodes one replica spans.

Kaito's vLLM runtime turns on LMCache CPU KV-cache offload unless the inference config's
top-level `kv_cache_cpu_memory_utilization` is 0 (default 0.5: `KaitoConfig.from_yaml` and
`set_kv_cache_offloading_if_appliable` in presets/workspace/inference/vllm/inference_api.py;
read at commit 0170b84 of the stored copy). The plan models no KV offload, and LMCache#3388
reports that it breaks EAGLE-3 output, so every twin's config sets it to 0: the speculative
twin to serve what the plan checked, the baseline so the A/B compares speculation alone.

Kaito runs its own vLLM image for presets, and a Workspace preset has no image field: at
v0.12.0 that image installs vllm==0.25.1 (presets/workspace/dependencies/requirements.txt, tag
v0.12.0, commit 0894eb2b567d48cd2d66afe579acb1542b226af4). A profile for another vLLM release
is refused, so the plan's rules are always checked against the release that runs, and the
audit annotations name Kaito's runtime rather than an image the pod never pulls.
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
#: Kaito's release, and the vLLM release its preset image carries (module docstring).
KAITO_VERSION: Final = "0.12.0"
KAITO_VLLM_VERSION: Final = "0.25.1"
#: What the audit annotation says runs, in place of the launch's image.
RUNTIME_ANNOTATION: Final = (
    f"Kaito v{KAITO_VERSION} vLLM preset image (vllm=={KAITO_VLLM_VERSION}, "
    "presets/workspace/dependencies/requirements.txt)"
)
IMAGE_ANNOTATION: Final = "specdeploy.io/image"
#: Top-level key of Kaito's inference config that sizes its LMCache CPU KV offload; 0 turns it off.
KV_OFFLOAD_KEY: Final = "kv_cache_cpu_memory_utilization"
#: `--platform-option nodes=`: Kaito's node auto-provisioning on (instanceType) or off (BYO).
NODES_PROVISIONED: Final = "provisioned"
NODES_EXISTING: Final = "existing"
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
    options: ClassVar[dict[str, tuple[str, ...]]] = {"nodes": (NODES_PROVISIONED, NODES_EXISTING)}
    engine_gap = "Kaito's inference runtimes are vLLM and transformers; only vLLM speculates"

    def check(self, plan: DeploymentPlan) -> None:
        super().check(plan)
        self.require_hub_models(plan, "by Hugging Face id (inference.preset.name)")
        version = plan.profile.engine.version
        if version != KAITO_VLLM_VERSION:
            raise self.refusal(
                f"engine.version={version}: Kaito v{KAITO_VERSION} runs vLLM "
                f"{KAITO_VLLM_VERSION} (its preset image), not {version}",
                why="a Workspace preset cannot choose its image, so the plan's rules, flags and "
                f"memory would be checked against {version} while {KAITO_VLLM_VERSION} serves",
                fix=f'set engine.version: "{KAITO_VLLM_VERSION}" to plan for the release Kaito '
                "runs, or render --platform kserve-runtime or kubernetes (they pin the image)",
                field="engine.version",
            )
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
        self._instance_type(plan)

    def build(self, plan: DeploymentPlan) -> list[Manifest]:
        out: list[Manifest] = []
        for twin in twins(plan):
            config_name = f"{twin.name}-inference-config"
            inference = {KV_OFFLOAD_KEY: 0, "vllm": vllm_config(twin.launch.argv, self)}
            text = yaml.safe_dump(inference, sort_keys=False, width=1_000_000)
            config_map = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": kaito_metadata(twin, config_name),
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
            "metadata": kaito_metadata(twin),
            "resource": self._resource(plan, twin),
            "inference": {"preset": preset, "config": config_name},
        }
        return Manifest.parse(body, source="orchestrator/emitters/kaito.py")

    def _resource(self, plan: DeploymentPlan, twin: Twin) -> dict[str, Any]:
        resource: dict[str, Any] = {"count": topology(plan.profile).group_size}
        sku = self._instance_type(plan)
        if sku is not None:  # Kaito provisions the nodes and labels them with matchLabels
            resource["instanceType"] = sku
            resource["labelSelector"] = {"matchLabels": {"apps": twin.name}}
        else:  # bring-your-own GPU nodes, found by the GPU's node label
            resource["labelSelector"] = {"matchLabels": dict(twin.ctx.pod.node_selector)}
        return resource

    def _instance_type(self, plan: DeploymentPlan) -> str | None:
        """The SKU with nodes=provisioned (refused when Kaito's table has none), else None."""
        if self.chosen["nodes"] == NODES_EXISTING:
            if plan.profile.hardware.gpu is None:
                raise self.refusal(
                    "--platform-option nodes=existing needs hardware.gpu",
                    why="existing nodes are selected by the GPU's node label",
                    fix="set hardware.gpu to a catalog GPU",
                    field="hardware.gpu",
                )
            return None
        hardware = plan.profile.hardware
        gpus = topology(plan.profile).gpus_per_pod
        sku = AZURE_SKUS.get((hardware.gpu or "", gpus))
        if sku is None:
            have = ", ".join(f"{g} x{n}" for g, n in sorted(AZURE_SKUS))
            raise self.refusal(
                f"hardware.gpu={hardware.gpu} x{gpus} per node has no Azure SKU in Kaito's "
                "table, and --platform-option nodes=provisioned needs one",
                why="with node auto-provisioning on (Kaito's default) the webhook refuses a "
                "Workspace without resource.instanceType (workspace_validation.go, v0.12.0)",
                fix=f"pass --platform-option nodes=existing for GPU nodes you run yourself "
                f"(with Kaito's disableNodeAutoProvisioning feature gate on), or use a GPU "
                f"and count Kaito provisions ({have})",
                field="hardware.gpu",
            )
        return sku


def kaito_metadata(twin: Twin, name: str | None = None) -> dict[str, Any]:
    """The twin's metadata with the audit annotation of what runs: Kaito's preset image."""
    meta = metadata(twin.ctx, name)
    annotations = dict(meta.get("annotations", {}))
    annotations[IMAGE_ANNOTATION] = RUNTIME_ANNOTATION
    meta["annotations"] = annotations
    return meta


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
