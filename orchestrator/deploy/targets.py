"""The deploy targets: a cluster (`apply`), the local Docker daemon (`run --docker`) and a process
on this host (`run --local`), each behind `DeployTarget`."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.deploy.base import Echo
from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from orchestrator.emitters.base import Emitter
from orchestrator.plan.types import DeploymentPlan
from orchestrator.runner.base import RunOptions
from orchestrator.shell_text import shell_line


@dataclass(frozen=True)
class ClusterTarget:
    """Server-side apply of a platform's objects, each reported as it lands; optionally wait
    until every workload is ready."""

    cluster: KubernetesCluster
    emitter: Emitter
    server_dry_run: bool = False
    force_conflicts: bool = False
    wait_timeout: float | None = None
    """Seconds to wait for readiness; None does not wait."""
    namespace: str | None = None

    def deploy(self, plan: DeploymentPlan, *, echo: Echo) -> None:
        suffix = " (server dry run)" if self.server_dry_run else ""
        applied = self.cluster.apply_each(
            self.emitter.emit(plan),
            server_dry_run=self.server_dry_run,
            force_conflicts=self.force_conflicts,
        )
        for result in applied:
            echo(f"{result.kind.lower()}/{result.name} {result.action}{suffix}")
            if result.diff and result.action != "created":
                echo(result.diff.rstrip("\n"))
        self._echo_chart_installs(plan, echo)
        if self.wait_timeout is not None and not self.server_dry_run:
            self.cluster.wait(
                plan.profile, timeout=self.wait_timeout, echo=echo, namespace=self.namespace
            )
            echo(f"{plan.profile.metadata.name} is ready")

    def _echo_chart_installs(self, plan: DeploymentPlan, echo: Echo) -> None:
        installs = self.emitter.chart_installs(plan, values_dir="DIR", namespace=self.namespace)
        if installs is None:
            return
        platform = self.emitter.name
        echo(f"not applied: {installs.what}")
        echo(f"  why: {installs.why}")
        render = shell_line(
            ("specdeploy", "render", str(plan.profile_path), "--platform", platform, "--out", "DIR")
        )
        echo(f"  fix: `{render}`, then:")
        for command in installs.commands:
            echo(f"         {command}")


@dataclass(frozen=True)
class DockerTarget:
    """One variant's in-container launch in the local Docker daemon, in the foreground."""

    baseline: bool = False
    host_port: int | None = None
    health_timeout: float = 1800.0

    def deploy(self, plan: DeploymentPlan, *, echo: Echo) -> None:
        from orchestrator.deploy.local_docker import run_docker

        run_docker(
            plan,
            echo=echo,
            host_port=self.host_port,
            health_timeout=self.health_timeout,
            baseline=self.baseline,
        )


@dataclass(frozen=True)
class LocalProcessTarget:
    """One variant's local launch as a process on this host, in the foreground until Ctrl-C."""

    options: RunOptions = field(default_factory=RunOptions)
    baseline: bool = False
    progress: Echo | None = None
    """Where the waiting line goes (rewritten on a terminal); `echo` when None."""

    def deploy(self, plan: DeploymentPlan, *, echo: Echo) -> None:
        from orchestrator.runner.local import LocalProcess

        launch = plan.launch_for(container=False, baseline=self.baseline)
        LocalProcess().run(launch, self.options, echo=echo, progress=self.progress or echo)
