"""`specdeploy bench` end to end on loopback servers: exit codes, messages, JSON contract,
Markdown and PNG; plus the confounded-profile refusal."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orchestrator.cli import cli
from tests.unit.bench.conftest import StartServer

REPO = Path(__file__).resolve().parents[3]


def bench(*args: str) -> Result:
    return CliRunner().invoke(cli, ["bench", *args])


@pytest.fixture
def pair(start_server: StartServer) -> tuple[str, str]:
    # 20 ms steps keep a request's time the server's: with 4 ms ones a loaded CI machine measured
    # 1.26x for this 3x pair, a request's fixed costs in this one process weighing as its steps
    cand = start_server(step_delay=lambda a: 0.02, tokens_per_step=3, draft_tokens_per_step=3)
    base = start_server(step_delay=lambda a: 0.02)
    return cand.url, base.url


def test_request_rates_sweep_open_loop_and_say_so(pair: tuple[str, str], tmp_path: Path) -> None:
    result = bench(
        "--candidate", pair[0], "--baseline", pair[1], "--request-rate", "50,5",
        "--requests", "4", "--max-tokens", "10", "--out", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "rate       5 req/s candidate" in result.stderr
    document = json.loads((tmp_path / "bench.json").read_text())
    assert document["config"]["request_rates"] == [5.0, 50.0]
    assert [lv["request_rate"] for lv in document["levels"]] == [5.0, 50.0]
    assert document["crossover"]["axis"] == "request_rate"
    markdown = (tmp_path / "bench.md").read_text()
    assert "| request rate (req/s) | speedup" in markdown and "open loop, Poisson" in markdown
    # the load is listed with the other settings, not glued to a warning's blockquote
    lines = markdown.splitlines()
    load = next(i for i, line in enumerate(lines) if "open loop, Poisson" in line)
    assert lines[load].startswith("- load:") and lines[load - 1].startswith("- sampling:")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--request-rate", "2,x"], "give positive request rates"),
        (["--request-rate", "0"], "give positive request rates"),
        (["--request-rate", "2", "--concurrency", "4"], "give one of them"),
    ],
)
def test_bad_load_options_are_usage_errors(
    pair: tuple[str, str], args: list[str], message: str
) -> None:
    result = bench("--candidate", pair[0], "--baseline", pair[1], *args)
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_measures_and_writes_json_markdown_png(pair: tuple[str, str], tmp_path: Path) -> None:
    result = bench(
        "--candidate",
        pair[0],
        "--baseline",
        pair[1],
        "--concurrency",
        "2,1",
        "--requests",
        "4",
        "--max-tokens",
        "10",
        "--out",
        str(tmp_path),
        "--workload",
        "chat",
        "--chat",
        "--slo-ttft-ms",
        "1000",
        "--slo-tpot-ms",
        "1000",
    )
    assert result.exit_code == 0, result.output
    assert "speculation pays at every measured load (up to concurrency 2)" in result.output
    document = json.loads((tmp_path / "bench.json").read_text())
    assert document["schema"] == "specdeploy.bench/v1"
    assert [lv["concurrency"] for lv in document["levels"]] == [1, 2]
    for lv in document["levels"]:
        assert set(lv["speedup"]) == {"value", "low", "high", "confidence"}
        assert lv["speedup"]["low"] <= lv["speedup"]["value"] <= lv["speedup"]["high"]
        assert lv["speedup"]["value"] > 1.5
        assert lv["candidate"]["acceptance_rate"] == pytest.approx(2 / 3)
        assert lv["candidate"]["mean_acceptance_length"] == pytest.approx(3.0)
        assert lv["baseline"]["acceptance_rate"] is None
        assert lv["baseline"]["mean_acceptance_length"] is None
        assert lv["candidate"]["goodput_requests_per_s"] > 0
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "decode_ms"):
            assert set(lv["candidate"][key]) == {"mean", "p50", "p90", "p99"}
    assert document["candidate"]["model"] == "tiny-target"
    markdown = (tmp_path / "bench.md").read_text()
    assert "| 1 | " in markdown and "**Crossover:**" in markdown
    assert "## Server-side phases" in markdown
    phases = document["levels"][0]["candidate"]["server_phases_s"]
    assert phases["queue_s"] is None and 0 < phases["prefill_s"] < phases["decode_s"]
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unreachable_endpoint_exits_7_with_a_fix(
    start_server: StartServer, closed_port_url: str, tmp_path: Path
) -> None:
    result = bench(
        "--candidate", closed_port_url, "--baseline", start_server().url, "--out", str(tmp_path)
    )
    assert result.exit_code == 7
    assert "Error: --candidate" in result.output and "fix:" in result.output
    assert "Traceback" not in result.output


def test_not_openai_endpoint_exits_7(start_server: StartServer, tmp_path: Path) -> None:
    result = bench(
        "--candidate",
        start_server().url,
        "--baseline",
        start_server(not_openai=True).url,
        "--model",
        "m",
        "--out",
        str(tmp_path),
    )
    assert result.exit_code == 7
    assert "not an OpenAI event stream" in result.output and "Traceback" not in result.output


def test_missing_api_key_variable(
    pair: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPECDEPLOY_TEST_KEY", raising=False)
    result = bench(
        "--candidate", pair[0], "--baseline", pair[1], "--api-key-env", "SPECDEPLOY_TEST_KEY"
    )
    assert result.exit_code == 7 and "export SPECDEPLOY_TEST_KEY" in result.output


def test_api_key_is_sent(
    start_server: StartServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start_server()
    monkeypatch.setenv("SPECDEPLOY_TEST_KEY", "sk-test")
    result = bench(
        "--candidate",
        server.url,
        "--baseline",
        server.url,
        "--requests",
        "1",
        "--concurrency",
        "1",
        "--max-tokens",
        "3",
        "--api-key-env",
        "SPECDEPLOY_TEST_KEY",
        "--out",
        str(tmp_path),
    )
    assert result.exit_code == 0, result.output
    assert server.counters.requests == 4


@pytest.mark.parametrize("levels", ["", "0,4", "a,b"])
def test_bad_concurrency_is_a_usage_error(levels: str) -> None:
    result = bench("--candidate", "http://x", "--baseline", "http://y", "--concurrency", levels)
    assert result.exit_code == 2


def test_urls_are_required() -> None:
    assert bench("--candidate", "http://x").exit_code == 2


def test_confounded_profiles_are_refused_before_any_request(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.yaml"
    text = (REPO / "profiles" / "vllm-qwen3-8b-baseline.yaml").read_text()
    baseline.write_text(
        text.replace(
            "  max_concurrency: 8",
            "  max_concurrency: 8\n  extra_args: [--no-enable-prefix-caching]",
        )
    )
    result = bench(
        "--candidate-profile",
        str(REPO / "profiles" / "vllm-qwen3-8b-ngram.yaml"),
        "--baseline-profile",
        str(baseline),
        "--offline",
        "--candidate",
        "http://127.0.0.1:9",
        "--baseline",
        "http://127.0.0.1:9",
    )
    assert result.exit_code == 7, result.output
    assert "differ in more than the proposer" in result.output
    assert "--no-enable-prefix-caching" in result.output and "Traceback" not in result.output


def test_same_target_profiles_pass_the_check(pair: tuple[str, str], tmp_path: Path) -> None:
    result = bench(
        "--candidate-profile",
        str(REPO / "profiles" / "vllm-qwen3-8b-ngram.yaml"),
        "--baseline-profile",
        str(REPO / "profiles" / "vllm-qwen3-8b-baseline.yaml"),
        "--offline",
        "--candidate",
        pair[0],
        "--baseline",
        pair[1],
        "--requests",
        "1",
        "--concurrency",
        "1",
        "--max-tokens",
        "3",
        "--out",
        str(tmp_path),
    )
    assert result.exit_code == 0, result.output


def test_ctrl_c_exits_130_and_keeps_the_report(start_server: StartServer, tmp_path: Path) -> None:
    cand = start_server(step_delay=lambda a: 0.01)
    base = start_server(step_delay=lambda a: 0.01)
    timer = threading.Timer(1.0, signal.raise_signal, (signal.SIGINT,))
    # raise_signal from another thread still delivers SIGINT to the main thread's handler
    timer.start()
    try:
        result = bench(
            "--candidate",
            cand.url,
            "--baseline",
            base.url,
            "--concurrency",
            "1,2",
            "--requests",
            "200",
            "--max-tokens",
            "10",
            "--out",
            str(tmp_path),
        )
    finally:
        timer.cancel()
    assert result.exit_code == 130, result.output
    document = json.loads((tmp_path / "bench.json").read_text())
    assert document["interrupted"] is True
    assert document["levels"][0]["candidate"]["ok"] > 0
    assert document["levels"][0]["candidate"]["complete"] is False
    assert "interrupted" in {w["code"] for w in document["warnings"]}


def test_profile_against_its_baseline_twin(pair: tuple[str, str], tmp_path: Path) -> None:
    result = bench(
        str(REPO / "profiles" / "vllm-qwen3-8b-ngram.yaml"),
        "--offline",
        "--candidate",
        pair[0],
        "--baseline",
        pair[1],
        "--requests",
        "1",
        "--concurrency",
        "1",
        "--max-tokens",
        "3",
        "--out",
        str(tmp_path),
    )
    assert result.exit_code == 0, result.output


def test_a_profile_without_proposer_cannot_be_the_candidate(tmp_path: Path) -> None:
    result = bench(
        str(REPO / "profiles" / "vllm-qwen3-8b-baseline.yaml"),
        "--offline",
        "--candidate",
        "http://127.0.0.1:9",
        "--baseline",
        "http://127.0.0.1:9",
    )
    assert result.exit_code == 7
    assert "no speculative flags" in result.output and "fix: give the candidate" in result.output


class TestPredictionOn:
    """`--prediction-on candidate`: one endpoint as both arms, the prediction only on one."""

    def workload(self, tmp_path: Path) -> Path:
        path = tmp_path / "predicted.jsonl"
        prediction = "".join(f"tok{i} " for i in range(12))
        row = {"prompt": "copy this", "max_tokens": 12, "prediction": prediction}
        path.write_text(json.dumps(row) + "\n")
        return path

    def run(self, url: str, tmp_path: Path, *extra: str) -> Result:
        return bench(
            "--candidate", url, "--baseline", url, "--workload", str(self.workload(tmp_path)),
            "--chat", "--concurrency", "1", "--requests", "4", "--out", str(tmp_path), *extra,
        )  # fmt: skip

    def test_only_the_candidate_gets_it_and_the_report_says_so(
        self, start_server: StartServer, tmp_path: Path
    ) -> None:
        # a matching prediction lets the server commit 4 tokens per step instead of 1; 20 ms
        # steps keep each request's time the server's (4 ms ones measured 1.08x on a loaded
        # machine, where a request's fixed costs in this one process weighed as much as its steps)
        server = start_server(step_delay=lambda a: 0.02, prediction_tokens_per_step=4)
        result = self.run(server.url, tmp_path, "--prediction-on", "candidate")
        assert result.exit_code == 0, result.output
        predicted = [b for b in server.counters.bodies if "prediction" in b]
        assert len(predicted) == 5 and len(server.counters.bodies) == 10  # probe + 4 per arm
        document = json.loads((tmp_path / "bench.json").read_text())
        assert document["config"]["prediction_on"] == "candidate"
        assert document["levels"][0]["speedup"]["low"] > 1.5
        assert "sent to the **candidate only**" in (tmp_path / "bench.md").read_text()

    def test_both_by_default(self, start_server: StartServer, tmp_path: Path) -> None:
        server = start_server(prediction_tokens_per_step=4)
        result = self.run(server.url, tmp_path)
        assert result.exit_code == 0, result.output
        assert all("prediction" in b for b in server.counters.bodies)
        assert (
            json.loads((tmp_path / "bench.json").read_text())["config"]["prediction_on"] == "both"
        )
        assert "sent to both arms" in (tmp_path / "bench.md").read_text()

    def test_candidate_only_needs_the_chat_api(self, tmp_path: Path) -> None:
        result = bench(
            "--candidate", "http://127.0.0.1:9", "--baseline", "http://127.0.0.1:9",
            "--prediction-on", "candidate",
        )  # fmt: skip
        assert result.exit_code == 2 and "add --chat" in result.output


def test_a_server_provided_model_id_is_escaped_in_the_report_and_on_the_terminal(
    start_server: StartServer, tmp_path: Path
) -> None:
    model = "evil\x1b[2J\u202e`|<img src=x>\nmodel"
    server = start_server(model=model)
    result = bench(
        "--candidate", server.url, "--baseline", server.url, "--concurrency", "1",
        "--requests", "1", "--max-tokens", "3", "--out", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert server.counters.bodies[-1]["model"] == model  # sent back exactly as served
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert "evil\\x1b[2J\\u202e`|<img src=x>\\nmodel" in result.stderr
    markdown = (tmp_path / "bench.md").read_text()
    assert "\x1b" not in markdown and "\u202e" not in markdown
    # a literal code span: fenced by more backticks than it holds in a row, no line break
    assert "model ``evil\\x1b[2J\\u202e`|<img src=x>\\nmodel``" in markdown
    assert json.loads((tmp_path / "bench.json").read_text())["candidate"]["model"] == model
