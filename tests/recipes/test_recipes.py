"""Real deployments, validated as a user would: `specdeploy validate --offline --format json`.

Each entry of recipes.yaml is a published recipe or a real mistake with the verdict the pinned
engine release gives it and the public source that says so (see the file's header).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import cli

HERE = Path(__file__).parent
PROFILES = HERE / "profiles"
RECIPES: list[dict[str, Any]] = yaml.safe_load((HERE / "recipes.yaml").read_text())
KEYS = {"profile", "exit", "errors", "warnings", "absent", "sources", "xfail"}


def _param(recipe: dict[str, Any]) -> Any:
    marks = [pytest.mark.xfail(reason=recipe["xfail"], strict=True)] if "xfail" in recipe else []
    return pytest.param(recipe, id=Path(recipe["profile"]).stem, marks=marks)


@pytest.fixture(autouse=True)
def _no_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the built-in catalog answers: a developer's Hugging Face cache must not."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


@pytest.mark.parametrize("recipe", [_param(r) for r in RECIPES])
def test_verdict_follows_the_engine(recipe: dict[str, Any]) -> None:
    path = PROFILES / recipe["profile"]
    result = CliRunner().invoke(cli, ["validate", str(path), "--offline", "--format", "json"])
    assert "Traceback" not in result.output
    findings = json.loads(result.stdout)["findings"]
    found = {(f["rule"], f["severity"]) for f in findings}
    summary = "\n".join(f"  {f['severity']} {f['rule']}: {f['what']}" for f in findings)
    assert result.exit_code == recipe["exit"], f"exit {result.exit_code}, findings:\n{summary}"
    if recipe["exit"] == 0:
        assert not any(severity == "error" for _, severity in found), summary
    for severity in ("error", "warning"):
        for rule in recipe.get(f"{severity}s", []):
            assert (rule, severity) in found, f"expected {severity} {rule}, got:\n{summary}"
    # "absent": no error or warning of the rule; an info ("not checked") is allowed
    flagged = {rule for rule, severity in found if severity != "info"}
    assert not flagged & set(recipe.get("absent", [])), summary


def test_every_profile_has_one_recipe_with_a_source() -> None:
    listed = [r["profile"] for r in RECIPES]
    assert sorted(listed) == sorted(p.name for p in PROFILES.glob("*.yaml"))
    assert len(listed) == len(set(listed)) >= 30
    for recipe in RECIPES:
        assert set(recipe) <= KEYS, recipe["profile"]
        assert recipe["sources"], recipe["profile"]
        assert any(s.startswith("https://") for s in recipe["sources"]), recipe["profile"]
        if recipe["profile"].startswith("mistake-"):
            flagged = recipe.get("errors") if recipe["exit"] else recipe.get("warnings")
            assert flagged or "xfail" in recipe, recipe["profile"]
        else:
            assert recipe["exit"] == 0, recipe["profile"]
