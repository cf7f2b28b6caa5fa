"""Rules framework: a rule checks one fact and returns one `Finding` or none.

A rule body writes `Finding.error(what=..., why=..., fix=...)`; the `@rule` decorator stamps the
rule id onto it, so a rule never repeats its own id. Nothing is registered globally: each rule
module ends with an explicit `RULES = (...)`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.errors import EXIT_INCOMPATIBLE, EXIT_OVER_BUDGET, EXIT_PROFILE_INVALID

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo, Unresolved
    from orchestrator.engines.capabilities import EngineRelease
    from orchestrator.engines.names import EngineName
    from orchestrator.memory.estimate import MemoryEstimate
    from orchestrator.profile.schema import Profile, SpecMethod

Severity = Literal["error", "warning", "info"]
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class Finding:
    """One observed fact about a profile, with the consequence and the smallest fix."""

    rule: str
    severity: Severity
    what: str  # the observed fact, with the values that were compared
    why: str  # what would go wrong at serving time
    fix: str  # the smallest profile change that resolves it
    source: str = ""  # where the rule's fact comes from (engine code, docs, issue)
    field: str = ""  # profile field path the finding is about, when there is one

    @classmethod
    def error(cls, *, what: str, why: str, fix: str) -> Finding:
        return cls("", "error", what, why, fix)

    @classmethod
    def warning(cls, *, what: str, why: str, fix: str) -> Finding:
        return cls("", "warning", what, why, fix)

    @classmethod
    def info(cls, *, what: str, why: str, fix: str) -> Finding:
        return cls("", "info", what, why, fix)

    @property
    def exit_code(self) -> int:
        """The CLI exit code this finding causes when it is an error (docs/cli.md)."""
        if self.rule.startswith("profile."):
            return EXIT_PROFILE_INVALID
        if self.rule == "memory.over-budget":
            return EXIT_OVER_BUDGET
        return EXIT_INCOMPATIBLE

    def sort_key(self) -> tuple[int, str]:
        return (_SEVERITY_ORDER[self.severity], self.rule)

    def as_json(self) -> dict[str, str]:
        out = {
            "rule": self.rule,
            "severity": self.severity,
            "what": self.what,
            "why": self.why,
            "fix": self.fix,
        }
        if self.field:
            out["field"] = self.field
        return out


@dataclass(frozen=True)
class CompatContext:
    """Everything a rule may look at. Built once, up front; rules do no I/O."""

    profile: Profile
    release: EngineRelease
    target: CheckpointInfo | None = None
    draft: CheckpointInfo | None = None
    memory: MemoryEstimate | None = None
    unresolved: tuple[Unresolved, ...] = ()

    @property
    def method(self) -> SpecMethod:
        return self.profile.proposer.method

    @property
    def engine(self) -> EngineName:
        return self.profile.engine.name


Check = Callable[[CompatContext], "Finding | list[Finding] | None"]


@dataclass(frozen=True)
class Rule:
    """A named, documented check. Calling it returns findings stamped with its id."""

    id: str
    check: Callable[[CompatContext], Any]
    applies: Callable[[CompatContext], bool]
    source: str

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.check) or ""

    def __call__(self, ctx: CompatContext) -> list[Finding]:
        if not self.applies(ctx):
            return []
        result = self.check(ctx)
        found = [] if result is None else ([result] if isinstance(result, Finding) else result)
        return [replace(f, rule=self.id, source=f.source or self.source) for f in found]


def rule(
    rule_id: str,
    *,
    source: str,
    applies: Callable[[CompatContext], bool] = lambda ctx: True,
) -> Callable[[Check], Rule]:
    """Wrap a check function into a `Rule`. The function must have a docstring saying why."""

    def wrap(fn: Check) -> Rule:
        if not inspect.getdoc(fn):
            raise TypeError(f"rule {rule_id}: {fn.__name__} needs a docstring saying why it exists")
        return Rule(id=rule_id, check=fn, applies=applies, source=source)

    return wrap


def run_rules(rules: tuple[Rule, ...], ctx: CompatContext, ignore: frozenset[str]) -> list[Finding]:
    """Run every rule not ignored; all findings, errors first."""
    findings = [f for r in rules if r.id not in ignore for f in r(ctx)]
    return sorted(findings, key=Finding.sort_key)
