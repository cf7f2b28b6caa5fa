"""Deploy-target seam: where a validated plan goes. A Kubernetes cluster (server-side apply of a
platform's objects), the local Docker daemon, or a process on this host; each raises DeployError
(exit 6) when the cluster, the daemon or the engine refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from orchestrator.plan.types import DeploymentPlan

Echo = Callable[[str], None]


class DeployTarget(Protocol):
    """Puts one plan somewhere; what and how is set when the target is made."""

    def deploy(self, plan: DeploymentPlan, *, echo: Echo) -> None:
        """Deploy the plan, reporting progress through `echo`; DeployError when refused."""
        ...
