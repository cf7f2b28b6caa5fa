"""`specdeploy tune --local` on real vLLM 0.32.0 (CPU) servers of the layered test bed.

tune starts the engines itself, one at a time, as it would on a one-GPU host: the layered target
alone (the baseline), then the target with the noisy draft at k=2, each through `run --local`'s
runner from the profile's own rendered launch. Whether the draft pays depends on the CPU: about
2x at concurrency 1 on an AMX Xeon, 1.12x [1.05, 1.20] at k=2 and 0.90x at k=4 on a 2-core EPYC
(README). So the test asserts that tune's verdict follows what it measured, on either side: a
cell that pays at concurrency 1 is scheduled from batch size 1 and the tuned profile validates;
a cell that does not leaves the baseline, skips the higher load when it lost, and writes no
tuned profile.
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

K = 2  # the draft length tried: the one that paid on every CPU measured so far, at low load


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
        "--python", str(VLLM_PYTHON), "--engine-timeout", "300", "--k", str(K),
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
    assert done.stderr.count("starting vllm 0.32.0") == 2  # the baseline, then k=K
    cell = next(c for c in result["cells"] if c["k"] == K and c["concurrency"] == 1)
    assert cell["acceptance_length"] is not None and 1.0 < cell["acceptance_length"] <= K + 1
    at_one = next(c for c in result["choices"] if c["concurrency"] == 1)
    tuned_path = out / "profile.yaml"
    if cell["outcome"] != "pays":  # this CPU: the draft does not pay even alone
        assert at_one["k"] == 0, (cell, result["choices"])
        assert not tuned_path.exists(), "no k paid, yet a tuned profile was written"
        assert "Speculation stops paying at concurrency 1" in (out / "tune.md").read_text()
        if cell["outcome"] == "loses":
            higher = next(c for c in result["cells"] if c["k"] == K and c["concurrency"] == 4)
            assert higher["outcome"] == "skipped", higher  # lost alone: not tried under load
        return
    assert cell["speedup"]["low"] > 1.0, cell
    assert at_one["k"] == K, result["choices"]
    tuned = yaml.safe_load(tuned_path.read_text())
    schedule = tuned["proposer"]["num_speculative_tokens_per_batch_size"]
    assert schedule[0][0] == 1 and schedule[0][2] == K, schedule  # k=K from batch size 1
    checked = subprocess.run(
        [sys.executable, "-m", "orchestrator", "validate", str(tuned_path), "--offline"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
