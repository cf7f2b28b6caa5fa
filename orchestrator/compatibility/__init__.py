"""Compatibility stage: every rule, run at once, all findings reported (errors first).

The rules here hold for every engine; each engine adds the rules that only concern it
(`Engine.rules()`, in `orchestrator/engines/<engine>_rules.py`), and only that engine's modules
are loaded to check a profile.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Final

from orchestrator.compatibility import (
    engine_rules,
    loading_rules,
    memory_rules,
    pairing_rules,
    policy_rules,
    schedule_rules,
    secret_rules,
    shape_rules,
)
from orchestrator.compatibility.rule import CompatContext, Finding, Rule, run_rules
from orchestrator.engines import ENGINES
from orchestrator.engines.names import EngineName

#: Modules of the rules that hold for every engine; each ends with an explicit RULES tuple.
GENERIC_RULE_MODULES: Final[tuple[ModuleType, ...]] = (
    loading_rules,
    pairing_rules,
    shape_rules,
    engine_rules,
    schedule_rules,
    memory_rules,
    secret_rules,
    policy_rules,
)
GENERIC_RULES: Final[tuple[Rule, ...]] = tuple(r for m in GENERIC_RULE_MODULES for r in m.RULES)


def rules_for(engine: EngineName) -> tuple[Rule, ...]:
    """The rules that check a profile served by `engine`."""
    return GENERIC_RULES + ENGINES[engine].rules()


def check_compatibility(ctx: CompatContext, ignore: frozenset[str] = frozenset()) -> list[Finding]:
    """Run every rule for the profile's engine (except the ignored ids); all findings, errors
    first."""
    return run_rules(rules_for(ctx.profile.engine.name), ctx, ignore)


@functools.cache
def all_rules() -> tuple[Rule, ...]:
    """Every rule of every engine (for `explain`, the docs and the rule catalogue)."""
    engine_specific = tuple(r for engine in ENGINES.values() for r in engine.rules())
    return GENERIC_RULES + engine_specific


def rules_by_id() -> dict[str, list[Rule]]:
    """Rule id -> the rules with that id (several engines may share one)."""
    by_id: dict[str, list[Rule]] = {}
    for rule in all_rules():
        by_id.setdefault(rule.id, []).append(rule)
    return by_id


__all__ = [
    "GENERIC_RULES",
    "GENERIC_RULE_MODULES",
    "CompatContext",
    "Finding",
    "all_rules",
    "check_compatibility",
    "rules_by_id",
    "rules_for",
]
