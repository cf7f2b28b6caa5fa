"""engine.policy-cannot-act (`policy_can_act`): an operator policy the engine's /metrics cannot feed is a warning at
validate (issue 21: TensorRT-LLM `switch` and non-vLLM `retune` never act, yet validate said
nothing). The real CLI on the example profiles, with a policy added."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import cli
from tests.support import REPO_ROOT

EXAMPLES = {
    "vllm": "vllm-qwen3-4b-draft.yaml",
    "sglang": "sglang-qwen25-7b-standalone.yaml",
    "trtllm": "trtllm-llama31-8b-eagle3.yaml",
}


def _findings(tmp_path: Path, engine: str, mode: str) -> list[dict[str, object]]:
    document = yaml.safe_load((REPO_ROOT / "profiles" / EXAMPLES[engine]).read_text())
    document["deploy"] = {**(document.get("deploy") or {}), "baseline": True}
    document["policy"] = {"mode": mode}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = CliRunner().invoke(cli, ["validate", str(path), "--offline", "--format", "json"])
    return [
        f for f in json.loads(result.output)["findings"] if f["rule"] == "engine.policy-cannot-act"
    ]


@pytest.mark.parametrize(
    ("engine", "mode", "warned"),
    [
        ("vllm", "switch", False),
        ("vllm", "retune", False),
        ("sglang", "switch", False),
        ("sglang", "retune", True),
        ("trtllm", "switch", True),
        ("trtllm", "retune", True),
        ("trtllm", "static", False),
    ],
)
def test_a_policy_the_engine_cannot_feed_is_a_warning(
    tmp_path: Path, engine: str, mode: str, warned: bool
) -> None:
    found = _findings(tmp_path, engine, mode)
    assert bool(found) == warned, found
    if warned:
        (finding,) = found
        assert finding["severity"] == "warning" and finding["field"] == "policy.mode"
        assert f"policy.mode={mode} on engine {engine}" in str(finding["what"])
        assert "vllm" in str(finding["fix"])


@pytest.mark.parametrize(
    ("policy", "warned"),
    [
        ({"mode": "switch", "explore_percent": 10, "gateway": {"name": "gw"}}, None),
        ({"mode": "switch", "explore_percent": 50}, None),
        ({"mode": "switch", "explore_percent": 10}, "without policy.gateway"),
        ({"mode": "retune", "explore_percent": 10}, "with policy.mode=retune"),
    ],
)
def test_an_explore_share_the_operator_cannot_use_is_a_warning(
    tmp_path: Path, policy: dict[str, object], warned: str | None
) -> None:
    """engine.policy-explore (`policy_explore_can_act`): the front Service splits by pod, and
    only switch explores."""
    document = yaml.safe_load((REPO_ROOT / "profiles" / EXAMPLES["vllm"]).read_text())
    document["deploy"] = {**(document.get("deploy") or {}), "baseline": True}
    document["policy"] = policy
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = CliRunner().invoke(cli, ["validate", str(path), "--offline", "--format", "json"])
    found = [
        f for f in json.loads(result.output)["findings"] if f["rule"] == "engine.policy-explore"
    ]
    assert [str(f["what"]) for f in found if warned and warned in str(f["what"])] == [
        str(f["what"]) for f in found
    ]
    assert len(found) == (1 if warned else 0), found
    if warned:
        assert found[0]["severity"] == "warning" and found[0]["field"] == "policy.explore_percent"
