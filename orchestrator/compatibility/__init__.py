"""Compatibility stage: every rule, run at once, all findings reported (errors first)."""

from __future__ import annotations

from types import ModuleType
from typing import Final

from orchestrator.compatibility import (
    engine_rules,
    loading_rules,
    memory_rules,
    pairing_rules,
    secret_rules,
    shape_rules,
)
from orchestrator.compatibility.rule import CompatContext, Finding, Rule, run_rules

#: Modules that define rules; each ends with an explicit RULES tuple.
RULE_MODULES: Final[tuple[ModuleType, ...]] = (
    loading_rules,
    pairing_rules,
    shape_rules,
    engine_rules,
    memory_rules,
    secret_rules,
)
ALL_RULES: Final[tuple[Rule, ...]] = tuple(r for m in RULE_MODULES for r in m.RULES)
RULES_BY_ID: Final[dict[str, list[Rule]]] = {}
for _rule in ALL_RULES:
    RULES_BY_ID.setdefault(_rule.id, []).append(_rule)


def check_compatibility(ctx: CompatContext, ignore: frozenset[str] = frozenset()) -> list[Finding]:
    """Run every rule (except the ignored ids) and return all findings, errors first."""
    return run_rules(ALL_RULES, ctx, ignore)


__all__ = [
    "ALL_RULES",
    "RULES_BY_ID",
    "RULE_MODULES",
    "CompatContext",
    "Finding",
    "check_compatibility",
]
