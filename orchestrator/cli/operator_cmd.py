"""operator: run the SpeculativeDeployment operator (kopf) against the current kube context."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Final

import click
import yaml

from orchestrator.output_dirs import OwnedDirectory

ROUTER_VALUES: Final = OwnedDirectory(
    command="operator --router-values",
    option="--out",
    marker=".specdeploy-router-values",
    marker_text="Written by `specdeploy operator --router-values`; replaced whole by the next\n"
    "run, files added here included.\n",
    output="the router values",
    why_write="without them llm-d's router chart has no values selecting the twins' pods",
    fix="pass --out a directory you can write to, on a filesystem with free space",
)


def _host_port(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> tuple[str, int] | None:
    """HOST:PORT ([HOST]:PORT for IPv6) -> (host, port); a usage error otherwise."""
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(
            f"{value!r} is not HOST:PORT; give an address and a port 1-65535, e.g. "
            "0.0.0.0:8081 (every address) or 127.0.0.1:8081 (this machine only)"
        )
    return host, int(port)


@click.command("operator")
@click.option(
    "-n",
    "--namespace",
    "namespaces",
    multiple=True,
    help="Namespace to serve (repeatable); default: the kube context's namespace.",
)
@click.option("-A", "--all-namespaces", is_flag=True, help="Serve every namespace.")
@click.option(
    "--offline", is_flag=True, help="Resolve models from the catalogs only, never the hub."
)
@click.option(
    "--liveness", metavar="URL", help="kopf liveness endpoint, e.g. http://0.0.0.0:8080/healthz."
)
@click.option(
    "--metrics-bind",
    metavar="HOST:PORT",
    callback=_host_port,
    help="Serve the operator's own Prometheus metrics at http://HOST:PORT/metrics, e.g. "
    "0.0.0.0:8081 (decisions, scrape failures, interval durations, reconciles, leader); off "
    "when unset.",
)
@click.option(
    "--allow-image",
    "allow_images",
    multiple=True,
    metavar="GLOB",
    help="An engine.image resources may name (repeatable; a shell glob, e.g. "
    "'registry.example.com/*'); the engines' official images are always allowed. Adds to "
    "$SPECDEPLOY_ALLOWED_IMAGES.",
)
@click.option(
    "--allow-secret",
    "allow_secrets",
    multiple=True,
    metavar="NAME",
    help="A Secret deploy.hf_token_secret may name (repeatable); none when unset. Adds to "
    "$SPECDEPLOY_ALLOWED_SECRETS.",
)
@click.option(
    "--leader-elect", is_flag=True, help="Act only while holding the Lease specdeploy-operator "
    "(several replicas: exactly one acts; the chart turns this on).",
)  # fmt: skip
@click.option(
    "--lease-namespace", metavar="NS", help="Where the Lease is; default: $POD_NAMESPACE, else "
    "the kube context's namespace.",
)  # fmt: skip
@click.option(
    "--lease-seconds", default=15.0, show_default=True, type=click.FloatRange(3.0, 600.0),
    help="How long a Lease lasts unrenewed (renewed every 2/15 of it, given up at 2/3).",
)  # fmt: skip
@click.option("--print-crd", is_flag=True, help="Print the CustomResourceDefinition and exit.")
@click.option(
    "--router-values",
    "router_values_of",
    metavar="RESOURCE",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Write, for a SpeculativeDeployment with policy.gateway.backend: InferencePool, the "
    "values of llm-d's router chart for each twin's InferencePool (into --out), print the "
    "helm install lines, and exit.",
)
@click.option(
    "--out",
    "out_dir",
    default=Path("out/router"),
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="--router-values: the directory to write (replaced whole).",
)
def operator(
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    offline: bool,
    liveness: str | None,
    metrics_bind: tuple[str, int] | None,
    allow_images: tuple[str, ...],
    allow_secrets: tuple[str, ...],
    leader_elect: bool,
    lease_namespace: str | None,
    lease_seconds: float,
    print_crd: bool,
    router_values_of: Path | None,
    out_dir: Path,
) -> None:
    """Keep SpeculativeDeployment resources (specdeploy.io/v1) deployed, and on the winning
    side of the crossover: plan each resource as `validate` does, apply its twins and traffic
    split, then every policy.interval_seconds read both twins' /metrics and act on
    policy.mode (static, switch, retune). Exit 6 when the cluster cannot be used."""
    from orchestrator.operator.crd import custom_resource_definition

    if print_crd:
        click.echo(yaml.safe_dump(custom_resource_definition(), sort_keys=False), nl=False)
        return
    if router_values_of is not None:
        _write_router_values(router_values_of, out_dir)
        return
    from orchestrator.operator.admission import Admission
    from orchestrator.operator.leader import Timing
    from orchestrator.operator.run import Election, run_operator

    _log_what_it_does()
    given = Admission.from_env()
    admission = Admission(given.images + allow_images, given.secrets + allow_secrets)
    os.environ.update(admission.env())  # read by every plan the handlers make
    click.echo(
        "admission: images "
        + (", ".join(admission.images) or "official only")
        + "; secrets "
        + (", ".join(admission.secrets) or "none")
    )
    election = None
    if leader_elect:
        identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
        election = Election(lease_namespace, identity, Timing.for_lease(lease_seconds))
    run_operator(
        namespaces,
        all_namespaces=all_namespaces,
        offline=offline,
        liveness=liveness,
        echo=click.echo,
        election=election,
        metrics_bind=metrics_bind,
    )


def _write_router_values(resource: Path, out_dir: Path) -> None:
    """Plan the resource as `validate` does; with an error, its report and exit code."""
    from orchestrator.errors import UsageError
    from orchestrator.operator.router import router_files, router_installs
    from orchestrator.output import text_report
    from orchestrator.output_dirs import write_files
    from orchestrator.plan.build import load_and_plan
    from orchestrator.plan.types import DeploymentPlan

    plan = load_and_plan(resource, offline=True)
    code = plan.exit_code(strict=False)
    if code != 0 or not isinstance(plan, DeploymentPlan):
        click.echo(text_report(plan, strict=False), err=True)
        click.get_current_context().exit(code or 1)
    assert isinstance(plan, DeploymentPlan)
    policy = plan.profile.policy
    gateway = policy.gateway if policy is not None else None
    if gateway is None or gateway.backend != "InferencePool":
        backend = "no policy.gateway" if gateway is None else f"backend {gateway.backend}"
        raise UsageError(
            f"{resource}: policy.gateway.backend is not InferencePool ({backend})",
            why="the operator then splits traffic between the twins' Services ("
            + ("the front Service" if gateway is None else "an HTTPRoute to them")
            + "), so no InferencePool is routed to and the values would select pods for a pool "
            "no request reaches",
            fix="set policy.gateway: {name: GATEWAY, backend: InferencePool} to split over "
            "llm-d's InferencePools, or leave out --router-values",
        )
    written = write_files(router_files(plan), out_dir, ROUTER_VALUES)
    click.echo(f"wrote {len(written)} files to {out_dir}:")
    for path in written:
        click.echo(f"  {path}")
    namespace = plan.profile.metadata.namespace or "default"
    installs = router_installs(plan, values_dir=str(out_dir), namespace=namespace)
    click.echo(f"then install {installs.what}:")
    for command in installs.commands:
        click.echo(f"  {command}")


def _log_what_it_does() -> None:
    """The operator's own log at INFO (each Event it posts, Normal ones too) and kopf's at
    WARNING, unless --debug already logs everything: a long-running process whose log is
    silent tells an SRE nothing (issue 21)."""
    import logging
    import sys

    root = logging.getLogger()
    if root.handlers:  # --debug
        return
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("kopf").setLevel(logging.WARNING)


COMMANDS: tuple[click.Command, ...] = (operator,)
