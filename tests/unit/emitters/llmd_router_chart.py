"""What llm-d's router chart (oci://ghcr.io/llm-d/charts/llm-d-router-gateway) makes of the values
the llm-d emitter writes, encoded from the chart's templates so tests need no download:

- llm-d/llm-d-router config/charts/routerlib/templates/_inferencepool.yaml
  58b18bacdcfdad45cd7449f9697b756257726e3e: an `inference.networking.k8s.io/v1` InferencePool
  named `.Release.Name` in `.Release.Namespace`, `targetPorts` from
  `router.modelServers.targetPorts`, `appProtocol: http` for protocol http, `selector.matchLabels`
  from `router.modelServers.matchLabels`, `endpointPickerRef` `{name: <release>-epp, port:
  {number: router.epp.extProcPort | default 9002}, failureMode: router.inferencePool.failureMode |
  default "FailOpen"}`;
- _helpers.tpl 1acafb46856b1ea1403481f3dbe24356d1e949d3: `llm-d-router.name` is the release
  name, lower-cased and cut to 40 characters, plus `-epp` (the EPP Deployment and Service);
  `validations.deprecations` fails on top-level `inferenceExtension`, `inferencePool`,
  `experimentalHttpRoute` and `inferenceObjectives`; `validations.gateway.common` fails without
  `router.modelServers.matchLabels`.
"""

from __future__ import annotations

from typing import Any

import yaml

#: Top-level keys the chart refuses as deprecated (validations.deprecations).
DEPRECATED_KEYS = (
    "inferenceExtension",
    "inferencePool",
    "experimentalHttpRoute",
    "inferenceObjectives",
)
EXT_PROC_PORT = 9002


def chart_refusals(values: dict[str, Any]) -> list[str]:
    """The chart's `fail` messages for these values (empty when `helm install` renders)."""
    refusals = [f"top-level {key!r} is deprecated" for key in DEPRECATED_KEYS if key in values]
    servers = values.get("router", {}).get("modelServers") or {}
    if not servers.get("matchLabels"):
        refusals.append(".Values.router.modelServers.matchLabels is required")
    return refusals


def epp_name(release: str) -> str:
    return f"{release.lower().strip()[:40]}-epp"


def chart_pool(values: dict[str, Any], *, release: str, namespace: str) -> dict[str, Any]:
    """The InferencePool the chart renders for release `release` with `values`."""
    router = values["router"]
    servers = router["modelServers"]
    epp = router.get("epp", {})
    spec: dict[str, Any] = {
        "targetPorts": [
            {"number": p["number"]} for p in servers.get("targetPorts", [{"number": 8000}])
        ],
        "selector": {"matchLabels": {k: str(v) for k, v in servers["matchLabels"].items()}},
        "endpointPickerRef": {
            "name": epp_name(release),
            "port": {"number": epp.get("extProcPort", EXT_PROC_PORT)},
            "failureMode": router.get("inferencePool", {}).get("failureMode", "FailOpen"),
        },
    }
    protocol = servers.get("protocol", "http")
    spec["appProtocol"] = "kubernetes.io/h2c" if protocol == "grpc" else "http"
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {
            "name": release,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": epp_name(release)},
        },
        "spec": spec,
    }


def chart_pools(files: dict[str, str], *, namespace: str) -> dict[str, dict[str, Any]]:
    """Release name -> the InferencePool `helm install <release> ... -f llm-d/router-<release>
    .values.yaml` makes, for every values file `render --platform llm-d` wrote."""
    pools = {}
    for path, text in files.items():
        name = path.removeprefix("llm-d/router-").removesuffix(".values.yaml")
        if path.startswith("llm-d/router-") and name != path:
            values = yaml.safe_load(text)
            assert chart_refusals(values) == [], path
            pools[name] = chart_pool(values, release=name, namespace=namespace)
    return pools
