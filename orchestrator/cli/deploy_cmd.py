"""apply, status, delete: a profile's objects on a Kubernetes cluster (exit 6 when it refuses)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from orchestrator.cli.options import ignore_option, offline_option, profile_argument
from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from orchestrator.manifests.context import profile_model_cache
from orchestrator.manifests.rendering import manifests_for
from orchestrator.output import text_report
from orchestrator.pipeline import build_plan
from orchestrator.profile.loading import load_profile

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(fn: F) -> F:
    fn = click.option("--context", help="Kube context (default: the current one).")(fn)
    return click.option(
        "--namespace", help="Namespace when the profile has none (default: the context's)."
    )(fn)


@click.command()
@click.argument("profile", type=profile_argument)
@cluster_options
@click.option("--server-dry-run", is_flag=True, help="Let the API server validate; change nothing.")
@click.option("--wait", is_flag=True, help="Wait until every workload is ready.")
@click.option("--timeout", default=1800.0, show_default=True, help="Seconds --wait waits.")
@offline_option
@ignore_option
def apply(
    profile: Path,
    context: str | None,
    namespace: str | None,
    server_dry_run: bool,
    wait: bool,
    timeout: float,
    offline: bool,
    ignore: tuple[str, ...],
) -> None:
    """Validate, then server-side apply the manifests (field manager `specdeploy`)."""
    plan = build_plan(profile, offline=offline, ignore=frozenset(ignore))
    if not plan.ok() or plan.profile is None:
        click.echo(text_report(plan), err=True)
        click.get_current_context().exit(plan.exit_code())
    assert plan.profile is not None
    manifests = manifests_for(plan, cache=profile_model_cache(plan.profile))
    cluster = KubernetesCluster(context=context, namespace=namespace)
    suffix = " (server dry run)" if server_dry_run else ""
    for result in cluster.apply(manifests, server_dry_run=server_dry_run):
        click.echo(f"{result.kind.lower()}/{result.name} {result.action}{suffix}")
        if result.diff and result.action != "created":
            click.echo(result.diff.rstrip("\n"))
    if wait and not server_dry_run:
        cluster.wait(plan.profile, timeout=timeout, echo=click.echo, namespace=namespace)
        click.echo(f"{plan.profile.metadata.name} is ready")


@click.command()
@click.argument("profile", type=profile_argument)
@cluster_options
def status(profile: Path, context: str | None, namespace: str | None) -> None:
    """Rollout state, and why pods are not ready (scheduling, image pull, OOM, crash logs)."""
    loaded = load_profile(profile)
    report = KubernetesCluster(context=context, namespace=namespace).status(loaded, namespace)
    for line in report.lines():
        click.echo(line)


@click.command()
@click.argument("profile", type=profile_argument)
@cluster_options
def delete(profile: Path, context: str | None, namespace: str | None) -> None:
    """Delete the objects labelled for this profile (nothing else)."""
    loaded = load_profile(profile)
    deleted = KubernetesCluster(context=context, namespace=namespace).delete(loaded, namespace)
    for kind, name in deleted:
        click.echo(f"{kind.lower()}/{name} deleted")
    if not deleted:
        click.echo(f"nothing labelled for {loaded.metadata.name} was found")


COMMANDS: tuple[click.Command, ...] = (apply, status, delete)
