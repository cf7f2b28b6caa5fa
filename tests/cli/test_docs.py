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


def test_every_exit_code_is_documented() -> None:
    from orchestrator import errors

    table = DOC.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for name in dir(errors):
        if name.startswith("EXIT_"):
            assert f"| {getattr(errors, name)} |" in table, f"docs/cli.md lacks exit code {name}"


def test_the_documented_input_limits_are_the_code_s() -> None:
    from orchestrator.profile.loading import MAX_DEPTH, MAX_VALUES

    assert f"at most {MAX_DEPTH} levels of" in DOC
    assert f"at most {MAX_VALUES:,} values" in DOC


def test_the_user_docs_point_only_inside_the_repository() -> None:
    """A user has the repository, not the workspace around it: no path above it, and every
    relative link in README and docs/ opens a file of the repository."""
    import re

    for doc in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        assert "../shared" not in text, f"{doc.name} points at ../shared"
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (doc.parent / target).resolve()
            assert resolved.is_relative_to(REPO_ROOT.resolve()), f"{doc.name} links {target}"
            assert resolved.exists(), f"{doc.name} links {target}, which does not exist"


def test_the_readme_lists_the_same_exit_codes() -> None:
    from orchestrator import errors

    readme = (REPO_ROOT / "README.md").read_text()
    table = readme.split("### Exit codes", 1)[1].split("\n### ", 1)[0]
    for name in dir(errors):
        if name.startswith("EXIT_"):
            assert f"| {getattr(errors, name)} |" in table, f"README lacks exit code {name}"
