"""The count from config.json against the count its publisher states, for every built-in target
(issue 23 §1): within 2 % wherever the catalog records a published count; a target whose config
is too trimmed to count is estimated from the published count instead, and one without a
published count says so in its plan."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.checkpoint.catalog import catalog_info
from orchestrator.memory.budget import estimate_memory
from orchestrator.memory.formulas import param_breakdown
from orchestrator.memory.weights import target_weight_bytes
from tests.support import REPO_ROOT
from tests.unit.memory.conftest import make_profile

MODELS_DIR = REPO_ROOT / "orchestrator" / "checkpoint" / "catalog" / "models"
TOLERANCE = 0.02


def _targets() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(MODELS_DIR.glob("*.json")):
        for model, entry in json.loads(path.read_text("utf-8"))["models"].items():
            if "target" in entry["roles"]:
                found.append((model, entry))
    return found


TARGETS = _targets()
PUBLISHED = [(m, e) for m, e in TARGETS if e.get("published_param_count") is not None]


@pytest.mark.parametrize(("model", "entry"), PUBLISHED, ids=[m for m, _ in PUBLISHED])
def test_the_computed_count_is_within_2_percent_of_the_published_one(
    model: str, entry: dict[str, Any]
) -> None:
    info = catalog_info(model)
    assert info is not None and info.published_param_count == entry["published_param_count"]
    assert "published_param_count" in entry["fact_sources"], model
    params = param_breakdown(info)
    if params is None:
        # Too trimmed to count: allowed only for a partial config, whose size then comes from
        # the published count.
        assert entry.get("config_complete", True) is False, model
        assert target_weight_bytes(make_profile(target={"model": model}), info), model
        return
    error = params.total / info.published_param_count - 1
    assert abs(error) <= TOLERANCE, f"{model}: computed {params.total:,} is {error:+.2%} off"


def test_most_targets_have_a_published_count() -> None:
    assert len(PUBLISHED) >= 60


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("moonshotai/Kimi-K2-Instruct", "no verifiable published parameter count"),
        ("meta-llama/Llama-3.1-8B", None),
    ],
)
def test_the_plan_says_when_no_published_count_checks_the_computed_one(
    model: str, says: str | None
) -> None:
    info = catalog_info(model)
    assert info is not None
    profile = make_profile(
        target={"model": model},
        proposer={"method": "none"},
        hardware={"gpu": "H200", "tensor_parallel_size": 8},
        serving={"max_model_len": 4096, "max_concurrency": 1},
    )
    estimate = estimate_memory(profile, info, None)
    assert estimate is not None
    flagged = [n for n in estimate.notes if "published parameter count" in n]
    assert (says in flagged[0]) if says else not flagged
