"""`specdeploy tune --local` on real vLLM 0.32.0 (CPU) servers of the layered test bed.

tune starts the engines itself, one at a time, as it would on a one-GPU host: the layered target
alone (the baseline), then the target with the noisy draft at k=4, each through `run --local`'s
runner from the profile's own rendered launch. The layered draft pays about 2x at concurrency 1
on every CPU it was measured on (README), so the schedule must speculate there; what it does at
higher load depends on the CPU (see tests/e2e/test_operator_vllm.py), so it is printed, not
asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.dev.layered import make_layered_models
from orchestrator.dev.tiny_models import DEFAULT_DIR
from tests.e2e.servers import VLLM_PYTHON, require_vllm, server_env
from tests.support import LOCAL_PROFILES_DIR, REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.scenario]


def test_tune_local_serves_each_engine_and_schedules_speculation_where_it_pays(
    tmp_path: Path,
) -> None:
    require_vllm()
    models = make_layered_models(REPO_ROOT / DEFAULT_DIR, python=str(VLLM_PYTHON))
    document = yaml.safe_load((LOCAL_PROFILES_DIR / "layered-tune.yaml").read_text())
    document["target"]["model"] = str(models.target)
    document["proposer"]["model"] = str(models.noisy_draft)
    profile = tmp_path / "layered-tune.yaml"
    profile.write_text(yaml.safe_dump(document, sort_keys=False))
    out = tmp_path / "tune"
    argv = [
        sys.executable, "-m", "orchestrator", "tune", str(profile), "--local",
        "--python", str(VLLM_PYTHON), "--engine-timeout", "300", "--k", "4",
        "--concurrency", "1,4", "--requests", "16", "--max-tokens", "24", "--ignore-eos",
        "--out", str(out), "--offline",
    ]  # fmt: skip
    done = subprocess.run(
        argv, env=server_env(tmp_path), capture_output=True, text=True, timeout=900, check=False
    )
    print(done.stdout)  # the measured table
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr
    result = json.loads((out / "tune.json").read_text())
    assert done.stderr.count("starting vllm 0.32.0") == 2  # the baseline, then k=4
    at_one = next(c for c in result["choices"] if c["concurrency"] == 1)
    assert at_one["k"] == 4, result["choices"]
    cell = next(c for c in result["cells"] if c["k"] == 4 and c["concurrency"] == 1)
    assert cell["outcome"] == "pays" and cell["speedup"]["low"] > 1.0, cell
    assert cell["acceptance_length"] is not None and 1.0 < cell["acceptance_length"] <= 5.0
    tuned = yaml.safe_load((out / "profile.yaml").read_text())
    schedule = tuned["proposer"]["num_speculative_tokens_per_batch_size"]
    assert schedule[0][0] == 1 and schedule[0][2] == 4, schedule  # k=4 from batch size 1
    checked = subprocess.run(
        [sys.executable, "-m", "orchestrator", "validate", str(out / "profile.yaml"), "--offline"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
