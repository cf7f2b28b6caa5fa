"""`specdeploy tune --local`: tune starts each engine itself, one at a time, through the same
runner as `run --local` (a process group, readiness polled, stopped on the way out).

The engine is a fake: `--engine-bin` points at a script that reads the rendered vLLM argv
(`--port`, `--speculative-config`'s num_speculative_tokens) and serves the loopback server of the
bench tests with that k's step costs, so the runner, the per-k variant launches and the
one-at-a-time measurement are real and fast. The real-vLLM run of the same flow is the scenario
in tests/e2e/test_tune_vllm.py.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import cli
from tests.support import REPO_ROOT

pytestmark = pytest.mark.e2e

FAKE_VLLM = """#!{python}
import json, os, signal, sys, time
sys.path.insert(0, {repo!r})
from tests.unit.bench.loopback import Behaviour, LoopbackServer

argv = sys.argv
port = int(argv[argv.index("--port") + 1])
k = 0
if "--speculative-config" in argv:
    k = json.loads(argv[argv.index("--speculative-config") + 1])["num_speculative_tokens"]
with open(os.environ["FAKE_ENGINE_LOG"], "a") as log:
    print(json.dumps({{"k": k, "pid": os.getpid(), "started": time.time()}}), file=log)
# k=1: 1.7x at concurrency 1; k=3: 2.5x alone, a full verifier from 2 requests on (0.6x at 4)
low, up_to, high = {{0: (0.020, 99, 0.020), 1: (0.024, 99, 0.024), 3: (0.032, 1, 0.140)}}[k]
behaviour = Behaviour(
    step_delay=lambda active: low if active <= up_to else high,
    tokens_per_step=k + 1,
    draft_tokens_per_step=k,
)
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGTERM}})
with LoopbackServer(behaviour, host="127.0.0.1", port=port):
    signal.sigwait({{signal.SIGTERM}})
with open(os.environ["FAKE_ENGINE_LOG"], "a") as log:
    print(json.dumps({{"k": k, "pid": os.getpid(), "stopped": time.time()}}), file=log)
"""


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(the fake engine executable, the log where each start and stop is written)."""
    script = tmp_path / "vllm"
    script.write_text(FAKE_VLLM.format(python=sys.executable, repo=str(REPO_ROOT)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "engines.jsonl"
    monkeypatch.setenv("FAKE_ENGINE_LOG", str(log))
    return script, log


def tune_local(profile: Path, engine: Path, out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli,
        [
            "tune", str(profile), "--local", "--engine-bin", str(engine), "--engine-timeout", "30",
            "--k", "1,3", "--concurrency", "1,4", "--requests", "8", "--max-tokens", "13",
            "--out", str(out), "--offline", *extra,
        ],
    )  # fmt: skip
    return result.exit_code, result.output


def events(log: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_tune_local_serves_each_engine_alone_and_writes_the_schedule(
    profile: Path, fake_vllm: tuple[Path, Path], tmp_path: Path
) -> None:
    engine, log = fake_vllm
    out = tmp_path / "tune"
    code, output = tune_local(profile, engine, out)
    assert code == 0, output
    document = json.loads((out / "tune.json").read_text())
    assert [(c["concurrency"], c["k"]) for c in document["choices"]] == [(1, 3), (4, 1)]
    assert document["config"]["endpoint_per_k"].startswith("local")
    # the report says how the baseline was measured: once, alone, not beside each candidate
    assert "measured once before the candidates" in (out / "tune.md").read_text()
    cells = {(c["k"], c["concurrency"]): c for c in document["cells"]}
    assert cells[(3, 4)]["outcome"] == "loses" and cells[(1, 4)]["outcome"] == "pays"
    assert cells[(1, 1)]["acceptance_length"] == pytest.approx(2.0)
    # baseline, k=1, k=3: each started once, each stopped before the next started
    seen = events(log)
    starts = [e for e in seen if "started" in e]
    assert [e["k"] for e in starts] == [0, 1, 3]
    for earlier, later in itertools.pairwise(starts):
        stopped = next(e for e in seen if e.get("pid") == earlier["pid"] and "stopped" in e)
        assert stopped["stopped"] <= later["started"]
    assert len([e for e in seen if "stopped" in e]) == 3  # nothing left running
    tuned = yaml.safe_load((out / "profile.yaml").read_text())
    assert tuned["proposer"]["num_speculative_tokens_per_batch_size"] == document["schedule"]


def test_a_k_whose_every_cell_is_pruned_is_not_started_and_a_rerun_starts_nothing(
    profile: Path, fake_vllm: tuple[Path, Path], tmp_path: Path
) -> None:
    engine, log = fake_vllm
    out = tmp_path / "tune"
    code, output = tune_local(profile, engine, out, "--k", "3,5", "--concurrency", "4,8")
    assert code == 0, output
    # k=3 loses at 4 (and so at 8: pruned); k=5 is then pruned at both loads and never starts
    assert [e["k"] for e in events(log) if "started" in e] == [0, 3]
    assert "k=5: every cell left is skipped" in output
    log.unlink()
    again, output = tune_local(profile, engine, out, "--k", "3,5", "--concurrency", "4,8")
    assert again == 0, output
    assert "reusing" in output and not log.exists()  # every cell measured: no engine started


def test_a_k_the_profile_refuses_is_reported_before_any_engine_starts(
    profile: Path, fake_vllm: tuple[Path, Path], tmp_path: Path
) -> None:
    engine, log = fake_vllm
    code, output = tune_local(profile, engine, tmp_path / "tune", "--k", "1,99")
    assert code == 3, output
    assert "proposer.num_speculative_tokens 99" in output and "leave that k out of --k" in output
    assert "Traceback" not in output and not log.exists()


def test_an_engine_that_dies_is_reported_with_its_log_and_the_finished_cells_are_kept(
    profile: Path, fake_vllm: tuple[Path, Path], tmp_path: Path
) -> None:
    engine, _ = fake_vllm
    script = engine.read_text().replace(
        "signal.pthread_sigmask",
        "sys.exit('ValueError: k=3 is not supported') if k == 3 else None\nsignal.pthread_sigmask",
    )
    engine.write_text(script)
    out = tmp_path / "tune"
    code, output = tune_local(profile, engine, out)
    assert code == 6, output
    assert "k=3 is not supported" in output and "Traceback" not in output
    kept = json.loads((out / "tune.json").read_text())["cells"]
    assert {(c["k"], c["concurrency"]) for c in kept} == {(1, 1), (1, 4)}


def test_local_and_urls_together_or_neither_are_usage_errors(profile: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    both = runner.invoke(
        cli, ["tune", str(profile), "--local", "--baseline", "http://b:1", "--offline"]
    )
    assert both.exit_code == 2 and "takes no --endpoint-per-k or --baseline" in both.output
    neither = runner.invoke(cli, ["tune", str(profile), "--offline"])
    assert neither.exit_code == 2 and "--local to start each one on this host" in neither.output
    assert "--cluster to apply each one" in neither.output
    local_and_cluster = runner.invoke(cli, ["tune", str(profile), "--local", "--cluster"])
    assert local_and_cluster.exit_code == 2 and "give one" in local_and_cluster.output
    context_alone = runner.invoke(cli, ["tune", str(profile), "--local", "--context", "x"])
    assert context_alone.exit_code == 2 and "choose where --cluster applies" in context_alone.output
    assert os.environ.get("FAKE_ENGINE_LOG") is None
