"""The baseline of benchmarks/operator_scale.py: a plain kopf operator that watches
SpeculativeDeployments and does nothing (no plan, no apply, no status), so what the real
operator costs above kopf itself shows as a ratio. Run by that script as
`kopf run --standalone --namespace NS benchmarks/null_operator.py`."""

from __future__ import annotations

from typing import Any

import kopf

RESOURCE = ("specdeploy.io", "v1", "speculativedeployments")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # as the real operator (orchestrator/operator/handlers.py): its namespaces are given, so no
    # cluster-wide scanning (which the chart's Role may not do: kopf retries it for a minute)
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.posting.enabled = False  # no Events: the real operator's are its own cost


@kopf.on.resume(*RESOURCE)
@kopf.on.create(*RESOURCE)
def seen(**_: Any) -> None:
    """Each resource is handled once, as the real operator's first reconcile is."""
