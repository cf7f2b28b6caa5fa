"""Does speculation pay on the layered CPU test bed, and where is the crossover?

Builds the layered models (`specdeploy dev make-tiny-models`, `.cache/tiny-models/layered`),
starts the baseline (the layered target alone) and one speculative server at a time (the exact
first-layer draft, then the noisy draft; k = 8, `DRAFT_LENGTH`) with the real vLLM of
`.venv-vllm`, and runs `specdeploy bench` against each pair: both arms at each concurrency in the
same run, so the speedups are ratios against a baseline measured alongside.

Run: python benchmarks/layered_testbed.py [--concurrency 1,4,12] [--requests 24] [--max-tokens 24]
Prints, per draft: mean acceptance length, per level the speedup (output throughput) and the
time-per-output-token ratio (baseline / speculative: what the operator's `switch` policy
compares), and the crossover bench reports.
Absolute tokens/s depend on the machine (and on whatever else runs on it); the ratios are the
result.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from orchestrator.dev.layered import DRAFT_LENGTH, make_layered_models  # noqa: E402
from orchestrator.dev.tiny_models import DEFAULT_DIR  # noqa: E402
from orchestrator.runner.local import stop  # noqa: E402
from tests.e2e.servers import VLLM_BIN, VLLM_PYTHON, free_port, server_env, wait_healthy  # noqa: E402

K = DRAFT_LENGTH
PLAIN = ["--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "16"]


def serve(args: list[str], scratch: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = (scratch / f"vllm-{port}.log").open("wb")
    process = subprocess.Popen(
        [str(VLLM_BIN), "serve", *args, "--host", "127.0.0.1", "--port", str(port)],
        env=server_env(scratch), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_healthy(process, url, scratch / f"vllm-{port}.log", 600)
    return process, url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,4,12")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=24)
    options = parser.parse_args()
    models = make_layered_models(REPO / DEFAULT_DIR, python=str(VLLM_PYTHON))
    scratch = Path(tempfile.mkdtemp(prefix="layered-bench-"))
    baseline, base_url = serve([str(models.target), *PLAIN], scratch)
    try:
        for label, draft in (("exact draft", models.draft), ("noisy draft", models.noisy_draft)):
            config = json.dumps(
                {"method": "draft_model", "model": str(draft), "num_speculative_tokens": K}
            )
            candidate, url = serve(
                [str(models.target), *PLAIN, "--speculative-config", config], scratch
            )
            out = scratch / label.replace(" ", "-")
            try:
                subprocess.run(
                    [sys.executable, "-m", "orchestrator", "bench", "--candidate", url, "--baseline", base_url,
                     "--concurrency", options.concurrency, "--requests", str(options.requests),
                     "--max-tokens", str(options.max_tokens), "--ignore-eos", "--workload", "chat",
                     "--out", str(out)],
                    check=True, cwd=REPO, capture_output=True,
                )  # fmt: skip
            finally:
                stop(candidate, 30)
            report(label, json.loads((out / "bench.json").read_text()))
    finally:
        stop(baseline, 30)
    return 0


def report(label: str, document: dict[str, object]) -> None:
    levels = document["levels"]
    assert isinstance(levels, list)
    length = levels[0]["candidate"]["mean_acceptance_length"]
    speedups = ", ".join(
        f"c={lv['concurrency']}: {lv['speedup']['value']:.2f}x (tpot {tpot_ratio(lv)})"
        for lv in levels
    )
    crossover = document.get("crossover") or {}
    said = crossover.get("summary", crossover) if isinstance(crossover, dict) else crossover
    print(
        f"{label}: acceptance length {length:.2f} of {K + 1}; speedup {speedups}; crossover: {said}"
    )


def tpot_ratio(level: dict[str, Any]) -> str:
    """Baseline over speculative mean time per output token (> 1: speculation is faster)."""
    try:
        ratio = level["baseline"]["tpot_ms"]["mean"] / level["candidate"]["tpot_ms"]["mean"]
    except (KeyError, TypeError, ZeroDivisionError):
        return "n/a"
    return f"{ratio:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
