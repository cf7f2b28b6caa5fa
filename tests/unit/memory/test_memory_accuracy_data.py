"""benchmarks/data/memory_observations.json stays usable: every observation cites its log and
model, and the memory model still reproduces the logs its constants were fitted on."""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support import REPO_ROOT

BENCHMARK = REPO_ROOT / "benchmarks" / "memory_accuracy.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """The benchmark script, imported from its file (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("memory_accuracy", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data(bench: ModuleType) -> dict[str, Any]:
    path: Path = bench.DATA
    return dict(json.loads(path.read_text()))


class TestObservations:
    def test_each_cites_its_log_and_a_known_model(self, data: dict[str, Any]) -> None:
        for obs in data["observations"]:
            assert obs["source"].startswith("https://github.com/"), obs["id"]
            assert obs["logged"], obs["id"]
            assert obs["model"] in data["models"], obs["id"]
            assert obs["split"] in ("fit", "held-out"), obs["id"]

    def test_raw_configs_name_their_source(self, data: dict[str, Any]) -> None:
        for ref, model in data["models"].items():
            if "config" in model:
                assert model["config_source"].startswith("https://"), ref

    def test_both_sets_and_tp_above_one_are_covered(self, data: dict[str, Any]) -> None:
        counted = [o for o in data["observations"] if "pending" not in o]
        held_out_tp = [
            o
            for o in counted
            if o["split"] == "held-out" and o["flags"]["tensor_parallel_size"] > 1 and o["knob"]
        ]
        assert len(held_out_tp) >= 5
        assert any(o["split"] == "fit" for o in counted)


class TestFitSet:
    def test_memory_model_reproduces_the_logs_it_was_fitted_on(
        self, bench: ModuleType, data: dict[str, Any]
    ) -> None:
        rows = [
            bench._evaluate(obs, bench._checkpoint(obs, data["models"][obs["model"]]))
            for obs in data["observations"]
            if obs["split"] == "fit" and "consistency" not in obs and "pending" not in obs
        ]
        errors = [r.e2e_err for r in rows if r.e2e_err is not None]
        assert len(errors) >= 8
        assert statistics.median(errors) <= bench.TARGET_MEDIAN
        assert max(errors) <= bench.TARGET_MAX
