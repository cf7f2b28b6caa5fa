"""Every rule is listed, documented, sourced and tested; ids match the DESIGN contract."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from orchestrator.compatibility import all_rules
from orchestrator.compatibility.rule import Rule

DESIGN_RULE_IDS = {
    "pairing.draft-tokenizer", "pairing.draft-vocab-size", "pairing.eagle-head-hidden-size",
    "pairing.eagle-head-vocab", "pairing.eagle-generation", "pairing.eagle-aux-layers",
    "pairing.speculators-verifier", "pairing.mtp-layers", "pairing.mtp-weights",
    "pairing.revision-pinned", "checkpoint.unresolved", "engine.method-supported",
    "engine.draft-tensor-parallel", "engine.sglang-overlap-topk", "engine.sglang-draft-tokens",
    "engine.trtllm-eagle-checkpoint", "engine.removed-flag", "engine.managed-flag",
    "engine.tensor-parallel-shape", "serving.max-model-len", "memory.over-budget",
    "memory.speculation-cost", "serving.high-concurrency", "memory.concurrency-at-max-context",
}  # fmt: skip


ALL_RULES = all_rules()


def test_every_rule_is_listed_documented_and_tested() -> None:
    modules = {sys.modules[r.check.__module__] for r in ALL_RULES}
    defined = {o for m in modules for o in vars(m).values() if isinstance(o, Rule)}
    assert defined == set(ALL_RULES), "a rule is defined but missing from its module's RULES"
    for module in modules:
        assert set(module.RULES) == {o for o in vars(module).values() if isinstance(o, Rule)}
    tests = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    for r in ALL_RULES:
        assert inspect.getdoc(r.check), f"{r.id}: docstring must say why the rule exists"
        assert r.source, f"{r.id}: rule needs a source"
        assert r.check.__name__ in tests, f"{r.id}: no test mentions {r.check.__name__}"


def test_rule_ids_are_namespaced_kebab_case() -> None:
    for r in ALL_RULES:
        area, _, name = r.id.partition(".")
        assert area in {"pairing", "checkpoint", "engine", "serving", "memory"}, r.id
        assert name and name == name.lower() and "_" not in name, r.id


def test_every_contract_rule_is_implemented() -> None:
    implemented = {r.id for r in ALL_RULES}
    assert implemented >= DESIGN_RULE_IDS, sorted(DESIGN_RULE_IDS - implemented)
    assert implemented - DESIGN_RULE_IDS == {
        "engine.version-unknown",
        "engine.pipeline-parallel",
        "checkpoint.remote-code",
        "engine.kv-cache-dtype",
        "engine.kv-cache-dtype-gpu",
        "engine.cpu-memory-fraction",
        "pairing.speculators-format",
        "engine.attention-data-parallel",
        "serving.secret-in-args",
        "checkpoint.user-catalog",
        "engine.policy-cannot-act",
        "engine.spec-schedule-supported",
        "engine.spec-schedule-baseline",
        "engine.spec-schedule-valid",
        "engine.spec-schedule-clamped",
        "engine.spec-schedule-data-parallel",
        "engine.spec-schedule-off-budget",
        "engine.sglang-schedule-adapts",
        "engine.sglang-adaptive-config",
        "engine.policy-explore",
    }
