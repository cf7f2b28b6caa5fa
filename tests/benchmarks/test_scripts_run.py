"""Every script in benchmarks/ runs with tiny settings and prints its ratios, so a performance
claim can always be rerun. These check that the scripts work, never what they measure (timings
belong in the scripts' output, not in assertions)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT

NUMBER = r"-?\d+(?:\.\d+)?"


def run(script: str, *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_every_script_has_a_smoke_test() -> None:
    scripts = {p.name for p in (REPO_ROOT / "benchmarks").glob("*.py")}
    assert scripts == {
        "bench_client.py",
        "cli_startup.py",
        "layered_testbed.py",
        "memory_accuracy.py",
        "null_operator.py",  # not a script: the kopf operator operator_scale.py compares with
        "operator_scale.py",
        "tune_cost.py",
    }, "a new benchmark script needs its smoke test here"


def test_bench_client_prints_its_throughput_ratio_and_timing_error() -> None:
    out = run(
        "bench_client.py", "--levels", "4", "--min-requests", "8", "--rounds", "1",
        "--timing-requests", "4", "--no-guidellm",
    )  # fmt: skip
    # streams | ours chunk/s | aiohttp chunk/s | guidellm chunk/s | ours/aiohttp | ours/guidellm
    row = re.search(rf"^\s+4 \| +\d+ \| +\d+ \| +n/a \| +({NUMBER}) \| +n/a$", out, re.M)
    assert row is not None, out
    assert float(row.group(1)) > 0
    # client | TTFT | TTFT - injected | ITL | ITL - injected | server gap | ITL error
    timing = re.search(rf"^\s+ours \|(?: +{NUMBER} \|){{5}} +{NUMBER}$", out, re.M)
    assert timing is not None, out


@pytest.mark.parametrize(
    ("script", "args", "pattern"),
    [
        ("cli_startup.py", ("--runs", "1"), rf"^ratio to the pydantic floor: +{NUMBER}x"),
        ("memory_accuracy.py", (), rf"^kv-formula: n=\d+ median {NUMBER}% max {NUMBER}%"),
        (
            "tune_cost.py",
            ("--k", "1,8", "--concurrency", "1,8", "--requests", "4"),
            rf"^time to a schedule, pruned / exhaustive: {NUMBER}x",
        ),
        (
            "operator_scale.py",
            ("--resources", "3", "--window", "2", "--deadline", "90"),
            rf"^time to all handled, specdeploy / plain kopf: {NUMBER}x",
        ),
    ],
)
def test_script_prints_its_ratio(script: str, args: tuple[str, ...], pattern: str) -> None:
    out = run(script, *args)
    assert re.search(pattern, out, re.M), out


def test_layered_testbed_parses_its_options() -> None:
    # Its measurement starts three vLLM servers (minutes): that run is the scenario below; here
    # the script must at least import and read its options.
    assert "--concurrency" in run("layered_testbed.py", "--help")


@pytest.mark.e2e
@pytest.mark.scenario
def test_layered_testbed_prints_speedups_against_its_baseline() -> None:
    out = run(
        "layered_testbed.py", "--concurrency", "1", "--requests", "4", "--max-tokens", "16",
        timeout=1200,
    )  # fmt: skip
    for draft in ("exact draft", "noisy draft"):  # each against the baseline measured with it
        line = rf"^{draft}: acceptance length {NUMBER} of \d+; speedup c=1: {NUMBER}x "
        assert re.search(line + rf"\(tpot {NUMBER}x\)", out, re.M), out
