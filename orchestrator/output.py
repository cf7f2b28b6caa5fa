"""How results look to users: the validate/plan JSON document (docs/cli.md) and the text report."""

from __future__ import annotations

from typing import Any

from orchestrator.compatibility.rule import Finding
from orchestrator.plan.types import PlanResult


def plan_document(plan: PlanResult, *, strict: bool = False) -> dict[str, Any]:
    """The JSON document `validate --format json` prints for one profile."""
    return {
        "profile": str(plan.profile_path),
        "ok": plan.ok(strict=strict),
        "exit_code": plan.exit_code(strict=strict),
        "engine": _engine(plan),
        "findings": [f.as_json() for f in plan.findings],
        "memory": plan.memory.as_json() if plan.memory is not None else None,
    }


def _engine(plan: PlanResult) -> dict[str, Any] | None:
    if plan.release is None:
        return None
    return {
        "name": plan.release.engine,
        "version": plan.release.version,
        "rules_version": plan.release.rules_version,
        "image": plan.profile.engine.image
        if plan.profile and plan.profile.engine.image
        else plan.release.image,
    }


def text_report(plan: PlanResult, *, strict: bool = False) -> str:
    """A readable report: a status line, then each finding with what / why / fix."""
    counts = {
        s: sum(1 for f in plan.findings if f.severity == s) for s in ("error", "warning", "info")
    }
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n)
    status = "ok" if plan.ok(strict=strict) else "not deployable"
    lines = [f"{plan.profile_path}: {status}" + (f" ({summary})" if summary else "")]
    lines += [_finding_text(f) for f in plan.findings]
    return "\n".join(lines)


def _finding_text(finding: Finding) -> str:
    return "\n".join(
        [
            f"  {finding.severity} {finding.rule}",
            f"    what: {finding.what}",
            f"    why:  {finding.why}",
            f"    fix:  {finding.fix}",
        ]
    )
