"""llm-d's split for the operator's twins (`policy.gateway.backend: InferencePool`).

The operator's HTTPRoute then sends each twin's share to that twin's InferencePool instead of
its Service, and the pool's endpoint picker chooses the pod, as in llm-d. The pools and pickers
come from llm-d's router chart, one release per twin named after it (the chart names the pool
after the release: orchestrator/emitters/llmd.py gives the chart's sources), exactly as
`render --platform llm-d` installs them; only the pods they select differ. The operator's twins
are the `kubernetes` emitter's workloads, so each pool selects what the twin's own Service
selects (its serving pods; across nodes, the leaders), on the engine's port.
"""

from __future__ import annotations

import yaml

from orchestrator.emitters.base import ChartInstalls
from orchestrator.emitters.llmd import LlmdEmitter, router_values, router_values_path
from orchestrator.emitters.platform import twins
from orchestrator.plan.types import DeploymentPlan


def router_files(plan: DeploymentPlan) -> dict[str, str]:
    """`llm-d/router-<twin>.values.yaml` for each twin: values of llm-d's router chart whose pool
    selects the operator's pods of that twin. Refuses (IncompatibleError) a twin name helm would
    refuse as a release name."""
    LlmdEmitter().check(plan)
    return {
        router_values_path(twin): yaml.safe_dump(
            router_values(twin, twin.ctx.service.selector), sort_keys=False
        )
        for twin in twins(plan)
    }


def router_installs(plan: DeploymentPlan, values_dir: str, namespace: str) -> ChartInstalls:
    """The `helm install` line of each twin's router release, in the resource's namespace."""
    return LlmdEmitter().chart_installs(plan, values_dir=values_dir, namespace=namespace)
