"""The user docs of the CLI contract stay in step with the code."""

from __future__ import annotations

from orchestrator.cli import COMMAND_MODULES
from orchestrator.compatibility import all_rules
from orchestrator.compatibility.stage_findings import STAGE_FINDINGS
from tests.support import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "cli.md").read_text()


def test_every_rule_id_is_documented() -> None:
    for rule_id in {r.id for r in all_rules()} | set(STAGE_FINDINGS):
        assert f"`{rule_id}`" in DOC, f"docs/cli.md does not list {rule_id}"


def test_every_command_is_documented() -> None:
    for name in COMMAND_MODULES:
        assert f"| `{name}" in DOC, f"docs/cli.md does not list the {name} command"
