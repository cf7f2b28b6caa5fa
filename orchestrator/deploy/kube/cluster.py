"""`KubernetesCluster`: apply, status and delete of one profile's objects on one connection."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from orchestrator.deploy.kube import apply as applying
from orchestrator.deploy.kube import delete as deleting
from orchestrator.deploy.kube import status as statuses
from orchestrator.deploy.kube.apply import ApplyResult
from orchestrator.deploy.kube.client import KubeClient
from orchestrator.deploy.kube.status import StatusReport
from orchestrator.emitters.base import Manifest
from orchestrator.profile.schema import Metadata, Profile


class KubernetesCluster(KubeClient):
    """A cluster target: server-side apply, status with causes, delete by profile labels."""

    def apply(
        self,
        manifests: list[Manifest],
        *,
        server_dry_run: bool = False,
        force_conflicts: bool = False,
    ) -> list[ApplyResult]:
        """Server-side apply in apply order; with server_dry_run the server validates only."""
        return list(
            self.apply_each(
                manifests, server_dry_run=server_dry_run, force_conflicts=force_conflicts
            )
        )

    def apply_each(
        self,
        manifests: list[Manifest],
        *,
        server_dry_run: bool = False,
        force_conflicts: bool = False,
    ) -> Iterator[ApplyResult]:
        """Apply one object at a time, yielding each result as it lands."""
        return applying.apply_each(
            self, manifests, server_dry_run=server_dry_run, force_conflicts=force_conflicts
        )

    def status(self, profile: Profile, namespace: str | None = None) -> StatusReport:
        """Workload readiness and, for each pod that is not ready, why."""
        return statuses.status(self, profile, namespace)

    def wait(
        self,
        profile: Profile,
        *,
        timeout: float,
        echo: Callable[[str], None],
        interval: float = 5.0,
        namespace: str | None = None,
    ) -> StatusReport:
        """Poll until every workload is ready, echoing progress; DeployError on timeout."""
        return statuses.wait(
            self, profile, timeout=timeout, echo=echo, interval=interval, namespace=namespace
        )

    def delete(
        self, profile: Profile | Metadata, namespace: str | None = None
    ) -> list[tuple[str, str]]:
        """Delete only objects labelled for this profile, in reverse apply order."""
        return deleting.delete(self, profile, namespace)
