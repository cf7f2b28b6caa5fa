"""validate, schema, engines, explain: the commands that never render manifests."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.cli.options import (
    format_option,
    ignore_option,
    offline_option,
    profile_argument,
    strict_option,
)
from orchestrator.compatibility import rules_by_id
from orchestrator.compatibility.stage_findings import STAGE_FINDINGS
from orchestrator.engines.capabilities import matrix
from orchestrator.errors import OrchestratorError
from orchestrator.output import plan_document, text_report
from orchestrator.plan.build import load_and_plan
from orchestrator.profile.docs import documented_json_schema
from orchestrator.profile.schema import Profile


@click.command()
@click.argument("profiles", nargs=-1, required=True, type=profile_argument)
@format_option
@strict_option
@offline_option
@ignore_option
def validate(
    profiles: tuple[Path, ...], output: str, strict: bool, offline: bool, ignore: tuple[str, ...]
) -> None:
    """Check profiles: checkpoint pairing, engine rules and the memory budget.

    Exit 0 when deployable (warnings allowed unless --strict), 3 profile invalid, 4 incompatible,
    5 over the memory budget.
    """
    plans = [load_and_plan(p, offline=offline, ignore=frozenset(ignore)) for p in profiles]
    if output == "json":
        documents = [plan_document(p, strict=strict) for p in plans]
        click.echo(json.dumps(documents[0] if len(documents) == 1 else documents, indent=2))
    else:
        for plan in plans:
            click.echo(text_report(plan, strict=strict), err=not plan.ok(strict=strict))
    codes = [p.exit_code(strict=strict) for p in plans if p.exit_code(strict=strict)]
    click.get_current_context().exit(min(codes) if codes else 0)


@click.command()
def schema() -> None:
    """Print the profile's JSON Schema (for editor completion and validation)."""
    document = documented_json_schema(Profile)
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "specdeploy profile (specdeploy/v1 SpeculativeDeployment)"
    click.echo(json.dumps(document, indent=2, sort_keys=True))


@click.command()
@format_option
def engines(output: str) -> None:
    """Print the capability matrix: per engine release, methods, features and removed flags."""
    data = matrix()
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
        return
    for engine, table in data.items():
        click.echo(f"{engine}  (image {table['image']})")
        for entry in table["releases"]:
            changes = [
                f"{'+' if kind.startswith('adds_') else '-'}"
                f"{kind.removeprefix('adds_').removeprefix('drops_')}: {', '.join(map(str, entry[kind]))}"
                for kind in sorted(entry)
                if kind.startswith(("adds_", "drops_")) and entry[kind]
            ]
            checked = "verified" if entry.get("verified") else "from docs"
            click.echo(
                f"  {entry['version']:<10} {'; '.join(changes) or '(no changes)'}  [{checked}]"
            )
            click.echo(f"             source: {entry.get('source', '?')}")
        for removed in table.get("removed_flags", ()):
            click.echo(
                f"  removed {removed['flag']} in {removed['removed_in']}: use {removed['replacement']}"
            )


@click.command()
@click.argument("rule_id")
def explain(rule_id: str) -> None:
    """Explain what a rule checks, why, and where the fact comes from."""
    stage = STAGE_FINDINGS.get(rule_id)
    if stage is not None:
        click.echo(f"{rule_id}\n  {stage.doc}\n  source: {stage.source}")
        return
    rules = rules_by_id().get(rule_id)
    if not rules:
        known = sorted([*rules_by_id(), *STAGE_FINDINGS])
        import difflib  # only an unknown rule id needs it

        close = difflib.get_close_matches(rule_id, known, n=1)
        raise OrchestratorError(
            f"no rule {rule_id!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
            fix=f"use one of: {', '.join(known)}",
        )
    for rule in rules:
        click.echo(rule.id)
        for line in rule.doc.splitlines():
            click.echo(f"  {line}")
        click.echo(f"  source: {rule.source}")
        click.echo(f"  checked by: {rule.check.__module__}.{getattr(rule.check, '__name__', '?')}")


COMMANDS: tuple[click.Command, ...] = (validate, schema, engines, explain)
