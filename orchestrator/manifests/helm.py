"""Helm values for charts/specdeploy: the same ManifestSet the Jinja templates render.

`specdeploy render PROFILE --helm-values FILE` writes `helm_values(plan)`; the chart renders the
same objects from it, and `values_schema()` is the chart's values.schema.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from orchestrator.manifests.context import ManifestSet
from orchestrator.plan.types import DeploymentPlan


def helm_values(plan: DeploymentPlan) -> dict[str, Any]:
    """Values for charts/specdeploy that render exactly the objects `render` writes: the
    manifest set, and the A/B HTTPRoute (`trafficSplit`, null without
    deploy.baseline_traffic_percent), which the chart writes out as it is."""
    from orchestrator.emitters.kubernetes import traffic_split_route

    route = traffic_split_route(plan)
    return {**plan.manifests.values(), "trafficSplit": None if route is None else route.body}


def helm_values_yaml(plan: DeploymentPlan) -> str:
    """`helm_values` as the YAML file `render --helm-values FILE` writes."""
    header = "# Values for charts/specdeploy, written by `specdeploy render --helm-values`.\n"
    values = helm_values(plan)
    return header + yaml.safe_dump(values, sort_keys=True, width=1_000_000, allow_unicode=True)


def values_schema() -> dict[str, Any]:
    """The JSON Schema of the chart's values (charts/specdeploy/values.schema.json)."""
    from pydantic import TypeAdapter

    schema: dict[str, Any] = TypeAdapter(ManifestSet).json_schema(
        by_alias=True, mode="serialization"
    )
    schema["properties"]["trafficSplit"] = {
        "anyOf": [{"type": "object"}, {"type": "null"}],
        "default": None,
        "description": "The A/B HTTPRoute between the twins (deploy.baseline_traffic_percent), "
        "as `render` writes it; null for none.",
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "specdeploy chart values (written by `specdeploy render --helm-values`)"
    return schema


def chart_dir() -> Path:
    """charts/specdeploy in the repo checkout."""
    return Path(__file__).resolve().parents[2] / "charts" / "specdeploy"
