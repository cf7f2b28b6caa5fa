"""The `llm-d` platform: a Kustomize overlay in the shape of llm-d's model-server recipes, values
for llm-d's router chart per twin (its InferencePool and endpoint picker) and, for an A/B, an
HTTPRoute with weighted backendRefs to the pools.

llm-d (v0.7 on) ships model servers as Kustomize recipes instead of the modelservice Helm chart:
a base workload named `decode` labelled `llm-d.ai/role: decode` (a Deployment on one host, a
LeaderWorkerSet across hosts: guides/recipes/modelserver/base/{single,multi}-host/default) whose
`modelserver` container carries the `REPLACE_MODEL_SERVER_IMAGE` placeholder, and overlays that
patch in the engine. `render --platform llm-d` writes that layout under llm-d/: base/ (the recipe
workload), one overlay per twin (namePrefix `<twin>-`, a strategic-merge patch with the exact
launch, GPUs, node placement and HF token), and a top-level kustomization adding the TensorRT-LLM
ConfigMaps and the split route. `kubectl kustomize llm-d/` yields exactly the objects `apply --platform llm-d`
applies (tests/unit/emitters/test_llmd.py runs the real kubectl to show it).

Each twin's InferencePool and its endpoint picker (EPP) come from llm-d's router chart, as in
llm-d's guides, not from specdeploy: `render` writes `llm-d/router-<twin>.values.yaml` and prints
the `helm install <twin> oci://ghcr.io/llm-d/charts/llm-d-router-gateway --version v0.10.0` line
for each. The guides install the pool and EPP with that chart (guides/optimized-baseline/guide.yaml
0f055806e266f913d910e27922a35afff2e72a0e, `deploy.gateway`: `helm install ${GUIDE_NAME}
${ROUTER_GATEWAY_CHART} -f recipes/router/base.values.yaml -f <guide>/router/<guide>.values.yaml`;
the chart coordinates in guides/env.sh 14ecef089c9f17e7da62a885e7dbb094ef9f9461, and the release
v0.10.0 that llm-d v0.9.0's guides/env.sh pins, "llm-d v0.9.0 ships router component v0.10.0").
Earlier llm-d guides used the Gateway API Inference Extension's own `inferencepool` chart (v1.5.0,
guides/optimized-baseline/README.md bb6cec093b6e85cb6659ae0011748492ff747fec), which likewise
names the pool after the release and its EPP `<release>-epp`
(kubernetes-sigs/gateway-api-inference-extension config/charts/inferencepool/templates/
inferencepool.yaml 13113fb28ac6e975be14d92e069c7d0b6be48e64); rendering our own pool next to
either chart would collide with the chart's by name. In the llm-d-router chart (llm-d/llm-d-router
config/charts/routerlib/templates/_inferencepool.yaml 58b18bacdcfdad45cd7449f9697b756257726e3e,
_helpers.tpl 1acafb46856b1ea1403481f3dbe24356d1e949d3, values.yaml
17a368a5de80fa1f8357229171a7a05ae009628b) the pool is named after the release, selects
`router.modelServers.matchLabels` (required: `validations.gateway.common`), targets
`router.modelServers.targetPorts`, and points at `<release>-epp` on `router.epp.extProcPort`
(9002); the EPP (`ghcr.io/llm-d/llm-d-router-endpoint-picker`, its Service, RBAC and the plugins
ConfigMap `default-plugins.yaml`: queue, kv-cache-utilization and prefix-cache scorers) reads
load with `router.modelServers.type` (vllm, sglang, trtllm-serve) from
`router.epp.metricsDataSource.path`. So the release is named after the twin, and the pool keeps
the name the HTTPRoute's backendRefs give it. `provider.name: none` and `httpRoute.create: false`
leave the Gateway and its route to the user (with a split, to our HTTPRoute).

vLLM, SGLang and TensorRT-LLM are llm-d model servers from v0.8.0 (its optimized-baseline guide:
SGLang by llm-d/llm-d#1712, TensorRT-LLM by #1866, merged 2026-06-18), each patched over the
same single-host base (https://github.com/llm-d/llm-d/tree/main/guides/optimized-baseline/
modelserver/gpu/, read at the commits the file index holds: vllm/base/patch-vllm.yaml
05b03f75739f966c129498ad620aca5f18a30c99, sglang/base/patch-sglang.yaml
83bb7c18c881ab96e54eb5f12a9d7c7813ae3a19, trtllm/base/patch-trtllm.yaml
64e020413cd58ffbe109601c68cd1822f7c80dd5 and trtllm/base/kustomization.yaml
c7b92a6577bcd096055d55285cef1ac0bd6a7c40). Every patch keeps the base's `modelserver`
container, port 8000 and probes, sets `command` to the engine's program (`vllm serve`;
`python3 -m sglang.launch_server`; `trtllm-serve serve`) and `args` to its flags, references
HF_TOKEN from a Secret, and adds no routing sidecar (that is only in the P/D recipes,
base/single-host/pd/). The engine image replaces the placeholder through `images:`
(lmsysorg/sglang, nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc18); llm-d lets an overlay pin
another (components/images/README.md, "Overriding"), so ours is the profile's release. The
TensorRT-LLM recipe mounts its LLM-API options from a ConfigMap and passes the file's path,
as the plan's launch does. Where llm-d's router is concerned (not rendered here): it reads
TensorRT-LLM's load at /prometheus/metrics (router/optimized-baseline-trtllm.values.yaml
2ad7f919965bcbc6e48f7567f89fe8af6ff40899, `modelServers.type: trtllm-serve`), from gauges
TensorRT-LLM has from 1.3.0rc12 (NVIDIA/TensorRT-LLM#12545), newer than the releases specdeploy
renders.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

import yaml

from orchestrator.emitters.base import ChartInstalls, Manifest, ResourceKind, canonical_yaml
from orchestrator.emitters.platform import (
    INFERENCE_API_GROUP,
    PlatformEmitter,
    Twin,
    container,
    pod_spec,
    probe,
    twins,
)
from orchestrator.emitters.traffic import HTTP_ROUTE, Backend, split_route
from orchestrator.shell_text import shell_line

if TYPE_CHECKING:
    from orchestrator.engines.names import EngineName
    from orchestrator.plan.types import DeploymentPlan

ROLE_LABEL: Final = {"llm-d.ai/role": "decode"}
MODEL_LABEL: Final = "llm-d.ai/model"
#: The image placeholder of llm-d's recipe bases, replaced by the patch.
IMAGE_PLACEHOLDER: Final = "REPLACE_MODEL_SERVER_IMAGE"
#: The program each llm-d model-server patch puts in `command` (the rest of the launch is `args`):
#: `vllm serve`, `python3 -m sglang.launch_server`, and `trtllm-serve` (llm-d writes
#: `trtllm-serve serve`; the TensorRT-LLM engine renders the launch without `serve`, a form
#: tests/conformance/trtllm_referee.py also takes). A launch that does not start with its
#: engine's program (vLLM's multi-node leader and workers run a shell script) stays whole in
#: `command`.
PROGRAMS: Final[Mapping[EngineName, tuple[str, ...]]] = {
    "vllm": ("vllm", "serve"),
    "sglang": ("python3", "-m", "sglang.launch_server"),
    "trtllm": ("trtllm-serve",),
}
#: llm-d's router chart in Gateway mode and the release this module's values are written for
#: (ROUTER_GATEWAY_CHART, ROUTER_CHART_VERSION in
#: https://github.com/llm-d/llm-d/blob/14ecef089c9f17e7da62a885e7dbb094ef9f9461/guides/env.sh;
#: the v0.10.0 pin: the module docstring).
ROUTER_CHART: Final = "oci://ghcr.io/llm-d/charts/llm-d-router-gateway"
ROUTER_CHART_VERSION: Final = "v0.10.0"
#: `router.modelServers.type` per engine: the name the EPP's core-metrics-extractor maps load
#: metrics by (vllm, sglang, triton-tensorrt-llm, trtllm-serve, triton:
#: https://github.com/llm-d/llm-d-router/blob/17a368a5de80fa1f8357229171a7a05ae009628b/config/charts/routerlib/values.yaml).
MODEL_SERVER_TYPES: Final[Mapping[EngineName, str]] = {
    "vllm": "vllm",
    "sglang": "sglang",
    "trtllm": "trtllm-serve",
}
#: Where the EPP scrapes an engine's Prometheus metrics when not the chart's `/metrics`:
#: TensorRT-LLM serves JSON there and Prometheus at /prometheus/metrics
#: (https://github.com/llm-d/llm-d/blob/2ad7f919965bcbc6e48f7567f89fe8af6ff40899/guides/optimized-baseline/router/optimized-baseline-trtllm.values.yaml).
METRICS_PATHS: Final[Mapping[EngineName, str]] = {"trtllm": "/prometheus/metrics"}
#: The label on a LeaderWorkerSet's leader pods (ours and llm-d's multi-host base): only the
#: leader serves HTTP, so the pool selects it and not the workers.
LEADER_LABEL: Final = {"role": "leader"}
#: Helm's limit on a release name (Helm 4.1.4 `helm template` refuses 54: "the length must not
#: be longer than 53"); the release, and so the pool, is named after the twin.
MAX_RELEASE_NAME: Final = 53
SOURCE: Final = "orchestrator/emitters/llmd.py"


class LlmdEmitter(PlatformEmitter):
    """llm-d model servers (Kustomize), router chart values per twin, the weighted HTTPRoute."""

    name: ClassVar[str] = "llm-d"
    kinds: ClassVar[tuple[ResourceKind, ...]] = (
        ResourceKind("v1", "ConfigMap"),
        ResourceKind("apps/v1", "Deployment", workload=True),
        ResourceKind("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", workload=True),
        HTTP_ROUTE,
    )
    splits_traffic: ClassVar[bool] = True

    def build(self, plan: DeploymentPlan) -> list[Manifest]:
        out: list[Manifest] = []
        for twin in twins(plan):
            base = _base(twin)
            workload = merge(base, _patch(twin))
            workload["metadata"]["name"] = _prefix(twin) + workload["metadata"]["name"]
            if "namespace" in twin.ctx.metadata:
                workload["metadata"]["namespace"] = twin.ctx.metadata["namespace"]
            out.append(Manifest.parse(workload, source=SOURCE))
            if twin.ctx.config_map is not None:
                config = twin.ctx.config_map.dump()
                body = {"apiVersion": "v1", "kind": "ConfigMap", **config}
                out.append(Manifest.parse(body, source=SOURCE))
        route = self._route(plan)
        return out if route is None else [*out, route]

    def check(self, plan: DeploymentPlan) -> None:
        super().check(plan)
        for twin in twins(plan):
            if len(twin.name) > MAX_RELEASE_NAME:
                raise self.refusal(
                    f"metadata.name={plan.profile.metadata.name}: the {twin.ctx.variant} twin's "
                    f"router release and InferencePool would be named {twin.name!r} "
                    f"({len(twin.name)} characters)",
                    why=f"`helm install` refuses release names over {MAX_RELEASE_NAME} "
                    "characters, so the twin would get no pool or endpoint picker",
                    fix=f"shorten metadata.name to at most {MAX_RELEASE_NAME - len(twin.name) + len(plan.profile.metadata.name)} characters",
                    field="metadata.name",
                )

    def files(self, plan: DeploymentPlan) -> dict[str, str]:
        self.check(plan)
        tw = twins(plan)
        files: dict[str, str] = {}
        resources: list[str] = []
        for twin in tw:
            variant = twin.ctx.variant
            resources.append(variant)
            files[f"llm-d/{variant}/kustomization.yaml"] = _dump(_overlay(twin))
            files[f"llm-d/{variant}/patch-engine.yaml"] = canonical_yaml(_patch(twin))
            files[f"llm-d/{variant}/base/kustomization.yaml"] = _dump(_base_kustomization())
            files[f"llm-d/{variant}/base/decode.yaml"] = canonical_yaml(_base(twin))
            files[router_values_path(twin)] = _dump(router_values(twin))
            if twin.ctx.config_map is not None:
                config = twin.ctx.config_map.dump()
                body = {"apiVersion": "v1", "kind": "ConfigMap", **config}
                files[f"llm-d/configmap-{twin.name}.yaml"] = canonical_yaml(body)
                resources.append(f"configmap-{twin.name}.yaml")
        route = self._route(plan)
        if route is not None:
            files["llm-d/httproute.yaml"] = canonical_yaml(route.body)
            resources.append("httproute.yaml")
        top = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
        files["llm-d/kustomization.yaml"] = _dump({**top, "resources": resources})
        return files

    def chart_installs(
        self, plan: DeploymentPlan, *, values_dir: str, namespace: str | None = None
    ) -> ChartInstalls:
        """llm-d's router chart, one release per twin named after it, from the values `render`
        writes under `values_dir`."""
        namespace = namespace or plan.profile.metadata.namespace
        scope = ("-n", namespace) if namespace else ()
        directory = values_dir.rstrip("/")
        commands = tuple(
            shell_line(
                [
                    *("helm", "install", twin.name, ROUTER_CHART),
                    *("--version", ROUTER_CHART_VERSION, *scope),
                    *("-f", f"{directory}/{router_values_path(twin)}"),
                ]
            )
            for twin in twins(plan)
        )
        return ChartInstalls(
            what="each twin's InferencePool and its endpoint picker (llm-d's router chart)",
            why="llm-d installs a pool with its endpoint picker through its router chart, and a "
            "pool of ours would collide with the chart's by name; until they are installed, a "
            "Gateway has no pool or picker to send requests to",
            commands=commands,
        )

    def _route(self, plan: DeploymentPlan) -> Manifest | None:
        backends = [
            Backend(t, t.name, None, group=INFERENCE_API_GROUP, kind="InferencePool")
            for t in twins(plan)
        ]
        return split_route(plan, backends)


def _prefix(twin: Twin) -> str:
    return f"{twin.name}-"


def _base(twin: Twin) -> dict[str, Any]:
    """The recipe's base workload: `decode`, role label, the image placeholder."""
    port = {"name": "modelserver", "containerPort": twin.launch.port, "protocol": "TCP"}
    server = {"name": "modelserver", "image": IMAGE_PLACEHOLDER, "ports": [port]}
    meta = {"name": "decode", "labels": dict(ROLE_LABEL)}
    if twin.ctx.worker is None:
        template = {"metadata": {"labels": dict(ROLE_LABEL)}, "spec": {"containers": [server]}}
        spec = {"replicas": 1, "selector": {"matchLabels": dict(ROLE_LABEL)}, "template": template}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
    worker = {"name": "modelserver-worker", "image": IMAGE_PLACEHOLDER}
    leader = {**server, "name": "modelserver-leader"}
    group = {
        "size": twin.ctx.group_size,
        "restartPolicy": "None",
        "leaderTemplate": {
            "metadata": {"labels": {"role": "leader"}},
            "spec": {"containers": [leader]},
        },
        "workerTemplate": {"spec": {"containers": [worker]}},
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": {"replicas": 1, "leaderWorkerTemplate": group},
    }


def _labels(twin: Twin) -> dict[str, str]:
    return {**twin.ctx.pod.labels, **ROLE_LABEL, MODEL_LABEL: twin.name}


def _patch(twin: Twin) -> dict[str, Any]:
    """The strategic-merge patch of one twin: everything the plan decided for its pods."""
    ctx = twin.ctx
    labels = _labels(twin)
    meta: dict[str, Any] = {"name": "decode", "labels": labels}
    meta["annotations"] = dict(ctx.metadata.get("annotations", {}))
    pod_meta = {"labels": labels, "annotations": dict(ctx.pod.annotations)}
    engine = twin.launch.engine
    if ctx.worker is None:
        server = container(ctx, name="modelserver") | _launch(engine, ctx.pod.command)
        server |= _probes(twin)
        spec = {"replicas": ctx.replicas, "selector": {"matchLabels": _selector(twin)}}
        spec["template"] = {"metadata": pod_meta, "spec": pod_spec(ctx.pod, [server])}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
    port = {"name": "modelserver", "containerPort": twin.launch.port, "protocol": "TCP"}
    leader = container(ctx, name="modelserver-leader") | _launch(engine, ctx.pod.command)
    leader["ports"] = [port]
    leader |= _probes(twin)
    worker = container(ctx, name="modelserver-worker", worker=True)
    worker |= _launch(engine, ctx.worker.command)
    group = {
        "size": ctx.group_size,
        "restartPolicy": "None",
        "leaderTemplate": {
            "metadata": {**pod_meta, "labels": {**labels, "role": "leader"}},
            "spec": pod_spec(ctx.pod, [leader]),
        },
        "workerTemplate": {"metadata": pod_meta, "spec": pod_spec(ctx.worker, [worker])},
    }
    spec = {"replicas": ctx.replicas, "leaderWorkerTemplate": group}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": spec,
    }


def _launch(engine: EngineName, tokens: list[str]) -> dict[str, list[str]]:
    """`command` and `args` as llm-d's patches split them: the engine's program, then its flags."""
    program = list(PROGRAMS[engine])
    if tokens[: len(program)] != program:
        return {"command": list(tokens)}
    return {"command": program, "args": tokens[len(program) :]}


def _probes(twin: Twin) -> dict[str, Any]:
    probes = twin.ctx.pod.probes
    return {
        f"{kind}Probe": probe(
            p.path, "modelserver", p.period_seconds, p.timeout_seconds, p.failure_threshold
        )
        for kind, p in (
            ("startup", probes.startup),
            ("readiness", probes.readiness),
            ("liveness", probes.liveness),
        )
    }


def _selector(twin: Twin) -> dict[str, str]:
    return {**ROLE_LABEL, MODEL_LABEL: twin.name, **twin.ctx.selector}


def router_values_path(twin: Twin) -> str:
    return f"llm-d/router-{twin.name}.values.yaml"


def router_values(twin: Twin, pods: dict[str, str] | None = None) -> dict[str, Any]:
    """Values of llm-d's router chart for one twin, installed as release `<twin>`: a pool named
    after the twin selecting exactly its serving pods on the engine's port, and its EPP. `pods`
    selects other pods than llm-d's model servers (the operator's twins, by their Service's
    selector)."""
    engine = twin.launch.engine
    servers: dict[str, Any] = {
        "type": MODEL_SERVER_TYPES[engine],
        "protocol": "http",
        "targetPorts": [{"number": twin.launch.port}],
        "matchLabels": pool_selector(twin) if pods is None else dict(pods),
    }
    router: dict[str, Any] = {"modelServers": servers}
    if engine in METRICS_PATHS:
        router["epp"] = {"metricsDataSource": {"path": METRICS_PATHS[engine]}}
    return {"router": router, "provider": {"name": "none"}, "httpRoute": {"create": False}}


def pool_selector(twin: Twin) -> dict[str, str]:
    """The workload's own pod selector; across nodes, its leader pods only."""
    leader = LEADER_LABEL if twin.ctx.worker is not None else {}
    return {**_selector(twin), **leader}


def _overlay(twin: Twin) -> dict[str, Any]:
    overlay: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["base"],
        "namePrefix": _prefix(twin),
        "patches": [{"path": "patch-engine.yaml"}],
    }
    if "namespace" in twin.ctx.metadata:
        overlay["namespace"] = twin.ctx.metadata["namespace"]
    return overlay


def _base_kustomization() -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["decode.yaml"],
    }


def merge(base: Any, patch: Any) -> Any:
    """A strategic merge of the parts these objects use: maps merge key by key, lists of named
    items merge by name (Kubernetes' patchMergeKey for containers, volumes, env), other lists and
    scalars are replaced by the patch's."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for key, value in patch.items():
            out[key] = merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(patch, list) and _named(base) and _named(patch):
        by_name = {item["name"]: item for item in base}
        merged = [merge(by_name[p["name"]], p) if p["name"] in by_name else p for p in patch]
        patched = {p["name"] for p in patch}
        return merged + [copy.deepcopy(b) for b in base if b["name"] not in patched]
    return copy.deepcopy(patch)


def _named(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(i, dict) and "name" in i for i in items)


def _dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False)
