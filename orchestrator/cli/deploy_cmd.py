"""apply, status, delete: a profile's objects on a Kubernetes cluster (exit 6 when it refuses)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from orchestrator.cli.options import (
    ignore_option,
    offline_option,
    platform_options,
    profile_argument,
)
from orchestrator.deploy.kubernetes_cluster import REQUEST_TIMEOUT_S, KubernetesCluster
from orchestrator.deploy.targets import ClusterTarget
from orchestrator.emitters.base import emitter_for
from orchestrator.errors import EXIT_NOT_READY
from orchestrator.output import text_report
from orchestrator.plan.build import load_and_plan
from orchestrator.plan.types import DeploymentPlan
from orchestrator.profile.loading import load_metadata, load_profile

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(fn: F) -> F:
    fn = platform_options(fn)
    fn = click.option("--context", help="Kube context (default: the current one).")(fn)
    fn = click.option(
        "--request-timeout",
        type=click.FloatRange(min=0.1),
        default=REQUEST_TIMEOUT_S,
        show_default=True,
        help="Seconds each API request may take before the command fails (exit 6).",
    )(fn)
    return click.option(
        "--namespace", help="Namespace when the profile has none (default: the context's)."
    )(fn)


@click.command()
@click.argument("profile", type=profile_argument)
@cluster_options
@click.option("--server-dry-run", is_flag=True, help="Let the API server validate; change nothing.")
@click.option("--wait", is_flag=True, help="Wait until every workload is ready.")
@click.option("--timeout", default=1800.0, show_default=True, help="Seconds --wait waits.")
@click.option(
    "--force-conflicts",
    is_flag=True,
    help="Take over fields another field manager owns (server-side apply force).",
)
@offline_option
@ignore_option
def apply(
    profile: Path,
    platform: str,
    platform_option: dict[str, str],
    context: str | None,
    namespace: str | None,
    request_timeout: float,
    server_dry_run: bool,
    wait: bool,
    timeout: float,
    force_conflicts: bool,
    offline: bool,
    ignore: tuple[str, ...],
) -> None:
    """Validate, then server-side apply the manifests (field manager `specdeploy`).

    Each object is reported as it lands. Fields another manager owns are refused (exit 6,
    naming them) unless --force-conflicts.
    """
    plan = load_and_plan(profile, offline=offline, ignore=frozenset(ignore))
    if not isinstance(plan, DeploymentPlan) or not plan.ok():
        click.echo(text_report(plan), err=True)
        click.get_current_context().exit(plan.exit_code())
        return
    emitter = emitter_for(platform, platform_option)
    cluster = KubernetesCluster(
        context=context, namespace=namespace, kinds=emitter.kinds, request_timeout=request_timeout
    )
    target = ClusterTarget(
        cluster,
        emitter,
        server_dry_run=server_dry_run,
        force_conflicts=force_conflicts,
        wait_timeout=timeout if wait else None,
        namespace=namespace,
    )
    target.deploy(plan, echo=click.echo)


@click.command()
@click.argument("profile", type=profile_argument)
@cluster_options
def status(
    profile: Path,
    platform: str,
    platform_option: dict[str, str],
    context: str | None,
    namespace: str | None,
    request_timeout: float,
) -> None:
    """Rollout state, and why pods are not ready (scheduling, image pull, OOM, crash logs);
    for a platform's custom resources, its Ready condition and what it covers. Exit 0 only when
    every workload is ready, 8 when one is not (or none is there)."""
    loaded = load_profile(profile)
    cluster = KubernetesCluster(
        context=context,
        namespace=namespace,
        kinds=emitter_for(platform, platform_option).kinds,
        request_timeout=request_timeout,
    )
    report = cluster.status(loaded, namespace)
    for line in report.lines():
        click.echo(line)
    if not report.ready:
        click.echo(
            f"{loaded.metadata.name} is not ready (exit {EXIT_NOT_READY}); "
            "act on the causes above, then run `specdeploy status` again",
            err=True,
        )
        click.get_current_context().exit(EXIT_NOT_READY)


@click.command()
@click.argument("profile", type=profile_argument)
@cluster_options
def delete(
    profile: Path,
    platform: str,
    platform_option: dict[str, str],
    context: str | None,
    namespace: str | None,
    request_timeout: float,
) -> None:
    """Delete the objects labelled for this profile (nothing else).

    Only the profile's metadata.name (and namespace) is read, so a profile that no longer
    validates still deletes what it applied."""
    loaded = load_metadata(profile)
    cluster = KubernetesCluster(
        context=context,
        namespace=namespace,
        kinds=emitter_for(platform, platform_option).kinds,
        request_timeout=request_timeout,
    )
    deleted = cluster.delete(loaded, namespace)
    for kind, name in deleted:
        click.echo(f"{kind.lower()}/{name} deleted")
    if not deleted:
        click.echo(f"nothing labelled for {loaded.name} was found")


COMMANDS: tuple[click.Command, ...] = (apply, status, delete)
