"""operator: run the SpeculativeDeployment operator (kopf) against the current kube context."""

from __future__ import annotations

import os

import click
import yaml


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
@click.option("--print-crd", is_flag=True, help="Print the CustomResourceDefinition and exit.")
def operator(
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    offline: bool,
    liveness: str | None,
    allow_images: tuple[str, ...],
    allow_secrets: tuple[str, ...],
    print_crd: bool,
) -> None:
    """Keep SpeculativeDeployment resources (specdeploy.io/v1) deployed, and on the winning
    side of the crossover: plan each resource as `validate` does, apply its twins and traffic
    split, then every policy.interval_seconds read both twins' /metrics and act on
    policy.mode (static, switch, retune). Exit 6 when the cluster cannot be used."""
    from orchestrator.operator.crd import custom_resource_definition

    if print_crd:
        click.echo(yaml.safe_dump(custom_resource_definition(), sort_keys=False), nl=False)
        return
    from orchestrator.operator.admission import Admission
    from orchestrator.operator.run import run_operator

    given = Admission.from_env()
    admission = Admission(given.images + allow_images, given.secrets + allow_secrets)
    os.environ.update(admission.env())  # read by every plan the handlers make
    click.echo(
        "admission: images "
        + (", ".join(admission.images) or "official only")
        + "; secrets "
        + (", ".join(admission.secrets) or "none")
    )
    run_operator(
        namespaces,
        all_namespaces=all_namespaces,
        offline=offline,
        liveness=liveness,
        echo=click.echo,
    )


COMMANDS: tuple[click.Command, ...] = (operator,)
