"""`specdeploy bench` against real vLLM 0.32.0 (CPU) servers with tiny random-weight models.

Self-draft (draft = target, greedy) must accept every drafted token: acceptance rate 1.0 and mean
acceptance length k + 1. A random draft accepts almost nothing and must trigger the mispairing
warning. Kept small: two load levels (concurrency for self-draft, open-loop request rates for the
random draft, so both sweep modes meet a real server), a few short requests; one baseline server
is shared so at most two servers (~3 GB RAM each) run at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from tests.e2e.servers import vllm_server

pytestmark = pytest.mark.e2e

K = 3
PLAIN = ["--enforce-eager", "--max-model-len", "512"]


def speculative(draft: Path) -> list[str]:
    config = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": K}
    return ["--speculative-config", json.dumps(config), *PLAIN]


def run_bench(
    candidate: str, baseline: str, out: Path, load: tuple[str, str] = ("--concurrency", "1,2")
) -> tuple[int, str, dict[str, Any]]:
    result = CliRunner().invoke(
        cli,
        [
            "bench", "--candidate", candidate, "--baseline", baseline,
            *load, "--requests", "4", "--max-tokens", "16", "--ignore-eos",
            "--workload", "chat", "--timeout", "180", "--stall-timeout", "60", "--out", str(out),
        ],
    )  # fmt: skip
    document = json.loads((out / "bench.json").read_text()) if (out / "bench.json").exists() else {}
    return result.exit_code, result.output, document


def test_self_draft_accepts_everything_and_random_draft_is_flagged(
    tiny_models: Any, tmp_path: Path
) -> None:
    target = str(tiny_models.target)
    for name in ("baseline", "self", "random"):
        (tmp_path / name).mkdir()
    with vllm_server([target, *PLAIN], tmp_path=tmp_path / "baseline") as baseline:
        with vllm_server(
            [target, *speculative(tiny_models.target)], tmp_path=tmp_path / "self"
        ) as candidate:
            code, output, document = run_bench(candidate, baseline, tmp_path / "self-out")
        assert code == 0, output
        assert [lv["concurrency"] for lv in document["levels"]] == [1, 2]
        for level in document["levels"]:
            cand, base = level["candidate"], level["baseline"]
            assert cand["ok"] == 4 and base["ok"] == 4
            assert cand["acceptance_rate"] == pytest.approx(1.0)
            assert cand["mean_acceptance_length"] == pytest.approx(K + 1)
            assert base["acceptance_rate"] is None and base["mean_acceptance_length"] is None
            assert set(level["speedup"]) == {"value", "low", "high", "confidence"}
        # speculation is lossless: greedy text is the baseline's
        assert document["levels"][0]["output_agreement"] == 1.0
        codes = {w["code"] for w in document["warnings"]}
        assert not {"mispairing", "baseline-speculates", "failed-requests"} & codes
        assert (tmp_path / "self-out" / "bench.png").stat().st_size > 0

        with vllm_server(
            [target, *speculative(tiny_models.draft)], tmp_path=tmp_path / "random"
        ) as candidate:
            code, output, document = run_bench(
                candidate, baseline, tmp_path / "random-out", ("--request-rate", "2,8")
            )
        assert code == 0, output
        assert [lv["request_rate"] for lv in document["levels"]] == [2.0, 8.0]
        assert all(lv["candidate"]["ok"] == 4 for lv in document["levels"])
        assert "warning (mispairing): LIKELY MISPAIRING" in output
        lengths = [lv["candidate"]["mean_acceptance_length"] for lv in document["levels"]]
        assert all(length is not None and length <= 1.1 for length in lengths)
        assert "mispairing" in {w["code"] for w in document["warnings"]}
