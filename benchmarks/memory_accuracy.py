"""Compare specdeploy's predicted KV-cache tokens with what vLLM logged in public issues.

Offline: reads benchmarks/data/memory_observations.json. Two errors per observation:
  kv-formula  tokens predicted from the *logged* available KV memory (KV bytes/token and blocks)
  end-to-end  tokens predicted from the GPU catalog, utilization, weights and the overhead model
              (only where the thread names the GPU and the utilization)
Run: python benchmarks/memory_accuracy.py
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.memory.budget import engine_memory_fraction, estimate_memory
from orchestrator.memory.kv import capacity, target_layout
from orchestrator.profile.schema import Profile

DATA = Path(__file__).parent / "data" / "memory_observations.json"
TARGET_MEDIAN, TARGET_MAX = 0.02, 0.10


def main() -> None:
    data = json.loads(DATA.read_text())
    rows = [_evaluate(obs, data["models"][obs["model"]]) for obs in data["observations"]]
    print(
        f"{'observation':<36} {'logged':>9} {'kv-formula':>11} {'err':>7} {'end-to-end':>11} {'err':>7}"
    )
    for r in rows:
        e2e = f"{r['e2e']:>11,}" if r["e2e"] is not None else f"{'-':>11}"
        e2e_err = f"{r['e2e_err']:>7.1%}" if r["e2e_err"] is not None else f"{'-':>7}"
        print(f"{r['id']:<36} {r['logged']:>9,} {r['kv']:>11,} {r['kv_err']:>7.1%} {e2e} {e2e_err}")
    _summary("kv-formula", [r["kv_err"] for r in rows])
    _summary("end-to-end", [r["e2e_err"] for r in rows if r["e2e_err"] is not None])
    print(f"observations: {len(rows)} (target: at least 10)")


def _evaluate(obs: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    info = CheckpointInfo(ref=obs["model"], source="catalog", location=obs["source"], **config)
    flags = obs["flags"]
    profile = _profile(obs, flags, flags["gpu_memory_utilization"] or 0.9)
    layout = target_layout(profile, info)
    kv = capacity(
        obs["available_kv_gib"], layout.bytes_per_token, layout.fixed, flags["max_model_len"]
    )
    row: dict[str, Any] = {"id": obs["id"], "logged": obs["kv_tokens"], "kv": kv.tokens}
    row["kv_err"] = abs(kv.tokens - obs["kv_tokens"]) / obs["kv_tokens"]
    row["e2e"] = row["e2e_err"] = None
    if obs["gpu"] and flags["gpu_memory_utilization"]:
        estimate = _end_to_end(obs, flags, info)
        if estimate is not None:
            row["e2e"] = estimate
            row["e2e_err"] = abs(estimate - obs["kv_tokens"]) / obs["kv_tokens"]
    return row


def _end_to_end(obs: dict[str, Any], flags: dict[str, Any], info: CheckpointInfo) -> int | None:
    """Choose the profile fraction whose translated vLLM knob equals the logged utilization."""
    util = flags["gpu_memory_utilization"]
    profile = _profile(obs, flags, util)
    first = estimate_memory(profile, info, None)
    if first is None:
        return None
    shift = util - engine_memory_fraction(profile, first)
    estimate = estimate_memory(_profile(obs, flags, min(1.0, util + shift)), info, None)
    return None if estimate is None else estimate.kv_tokens


def _profile(obs: dict[str, Any], flags: dict[str, Any], fraction: float) -> Profile:
    return Profile.model_validate(
        {
            "apiVersion": "specdeploy/v1",
            "kind": "SpeculativeDeployment",
            "metadata": {"name": "bench"},
            "engine": {"name": obs["engine"], "version": obs["version"]},
            "target": {"model": obs["model"]},
            "hardware": {
                "gpu": obs["gpu"] or "H100-80GB",
                "tensor_parallel_size": flags["tensor_parallel_size"],
            },
            "serving": {
                "max_model_len": flags["max_model_len"],
                "max_concurrency": flags["max_num_seqs"] or 256,
                "gpu_memory_fraction": fraction,
                "kv_cache_dtype": flags["kv_cache_dtype"],
            },
        }
    )


def _summary(name: str, errors: list[float]) -> None:
    if not errors:
        print(f"{name}: no observations")
        return
    median, worst = statistics.median(errors), max(errors)
    verdict = "meets" if median <= TARGET_MEDIAN and worst <= TARGET_MAX else "MISSES"
    print(
        f"{name}: n={len(errors)} median {median:.2%} max {worst:.2%} -> {verdict} the target "
        f"(median <= {TARGET_MEDIAN:.0%}, max <= {TARGET_MAX:.0%})"
    )


if __name__ == "__main__":
    main()
