"""Compare specdeploy's predicted KV-cache size with what engines logged in public issue threads
and public benchmark logs.

Offline and fast: reads benchmarks/data/memory_observations.json (vLLM, SGLang and TensorRT-LLM
logs, each with its source URL and the logged lines). Two relative errors per observation:

  kv-formula  tokens predicted from the *logged* KV memory with specdeploy's KV bytes/token
              (heads per TP rank, dtype, whole 16-token blocks)
  end-to-end  KV predicted from the GPU catalog, the engine's own knob as set in the thread,
              weights and the overhead model (orchestrator/memory/overheads.py), through the
              inverse of the knob translation (`engine_kv_gib`); only where the thread names a
              catalog GPU and the knob. Compared in tokens, or in GiB (marked *) where the
              thread logged only memory.

Observations whose log does not add up carry a `consistency` note with the arithmetic; the
summary reports the statistics with and without them. Each observation is `fit` (it set a constant
of the memory model) or `held-out` (kept out to test on); the summary reports both sets apart.
Observations marked `pending` (a KV layout the KV model does not follow yet) are shown, not
counted.
Run: python benchmarks/memory_accuracy.py   (always exits 0; the verdict is printed)
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.checkpoint.reading import info_from_config
from orchestrator.engines import ENGINES
from orchestrator.memory.budget import engine_kv_gib, estimate_memory
from orchestrator.memory.estimate import MemoryEstimate
from orchestrator.memory.gpus import find_gpu
from orchestrator.memory.kv import capacity, pool, target_layout
from orchestrator.profile.schema import Profile

DATA = Path(__file__).parent / "data" / "memory_observations.json"
TARGET_MEDIAN, TARGET_MAX = 0.02, 0.10


@dataclass(frozen=True)
class Row:
    id: str
    engine: str
    logged: str
    kv: int | None
    kv_err: float | None
    e2e: str
    e2e_err: float | None
    consistent: bool
    split: str
    pending: bool
    estimate: MemoryEstimate | None
    knob: float | None


def main() -> int:
    data = json.loads(DATA.read_text())
    rows = [
        _evaluate(obs, _checkpoint(obs, data["models"][obs["model"]]))
        for obs in data["observations"]
    ]
    _table(rows)
    print()
    _breakdown([r for r in rows if r.estimate is not None])
    print()
    counted = [r for r in rows if not r.pending]
    consistent = [r for r in counted if r.consistent]
    _summary("kv-formula", [r.kv_err for r in counted])
    _summary("kv-formula, consistent logs only", [r.kv_err for r in consistent])
    _summary("end-to-end", [r.e2e_err for r in counted])
    _summary("end-to-end, consistent logs only", [r.e2e_err for r in consistent])
    for split in ("fit", "held-out"):
        chosen = [r for r in consistent if r.split == split]
        _summary(f"kv-formula, {split}", [r.kv_err for r in chosen])
        _summary(f"end-to-end, {split}", [r.e2e_err for r in chosen])
    engines = {r.engine for r in rows}
    print(f"observations: {len(rows)} ({', '.join(sorted(engines))}; target: at least 10)")
    for r in rows:
        if not r.consistent:
            print(f"  ! {r.id}: {_field(data, r.id, 'consistency')}")
    for r in rows:
        if r.pending:
            print(f"  p {r.id} (not counted): {_field(data, r.id, 'pending')}")
    return 0


def _checkpoint(obs: dict[str, Any], model: dict[str, Any]) -> CheckpointInfo:
    """The model as CheckpointInfo fields, or as a raw config.json read like a checkpoint's."""
    if "config" not in model:
        return CheckpointInfo(ref=obs["model"], source="catalog", location=obs["source"], **model)
    info = info_from_config(
        model["config"], ref=obs["model"], source="catalog", location=obs["source"], revision=None
    )
    return replace(info, weight_bytes=model.get("weight_bytes"))


def _logged_tokens(profile: Profile, info: CheckpointInfo, kv_gib: float) -> int:
    """The KV size in tokens the engine would log for `kv_gib` of cache (its own count, which for
    hybrid layouts in some releases is not the capacity)."""
    memory = ENGINES[profile.engine.name].memory
    in_flight = memory.in_flight_tokens(profile, find_gpu(profile.hardware.gpu or "H100-80GB"))
    layout = target_layout(profile, info, in_flight=in_flight)
    cap = capacity(kv_gib, layout.bytes_per_token, layout.fixed, profile.serving.max_model_len)
    return memory.logged_kv_tokens(profile, pool(kv_gib, layout, 0, cap))


def _evaluate(obs: dict[str, Any], info: CheckpointInfo) -> Row:
    logged_tokens = obs["kv_tokens"]
    profile = _profile(obs, 0.9)
    kv_tokens: int | None = None
    kv_err: float | None = None
    if logged_tokens:
        kv_tokens = _logged_tokens(profile, info, obs["available_kv_gib"])
        kv_err = abs(kv_tokens - logged_tokens) / logged_tokens
    logged = f"{logged_tokens:,}" if logged_tokens else f"{obs['available_kv_gib']:.2f} GiB"
    e2e, e2e_err, estimate = "-", None, None
    if obs["gpu"] and obs["knob"]:
        estimate = estimate_memory(_profile(obs, obs["knob"]), info, None)
    if estimate is not None:
        kv_gib = engine_kv_gib(estimate, obs["knob"])
        if logged_tokens:
            predicted = _logged_tokens(profile, info, kv_gib)
            e2e, e2e_err = f"{predicted:,}", abs(predicted - logged_tokens) / logged_tokens
        else:
            e2e = f"{kv_gib:.2f} GiB*"
            e2e_err = abs(kv_gib - obs["available_kv_gib"]) / obs["available_kv_gib"]
    return Row(
        id=obs["id"],
        engine=f"{obs['engine']} {obs['version']}",
        logged=logged,
        kv=kv_tokens,
        kv_err=kv_err,
        e2e=e2e,
        e2e_err=e2e_err,
        consistent="consistency" not in obs,
        split=obs["split"],
        pending="pending" in obs,
        estimate=estimate,
        knob=obs["knob"],
    )


def _profile(obs: dict[str, Any], fraction: float) -> Profile:
    flags = obs["flags"]
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
                "pipeline_parallel_size": flags.get("pipeline_parallel_size", 1),
            },
            "serving": {
                "max_model_len": flags["max_model_len"],
                "max_concurrency": flags["max_num_seqs"] or 256,
                "gpu_memory_fraction": min(1.0, fraction),
                "kv_cache_dtype": flags["kv_cache_dtype"],
            },
        }
    )


def _table(rows: list[Row]) -> None:
    head = f"{'observation':<42} {'set':<3} {'engine':<13} {'logged':>12} {'kv-formula':>11} {'err':>7}"
    print(f"{head} {'end-to-end':>14} {'err':>7}")
    for r in rows:
        kv = f"{r.kv:>11,}" if r.kv is not None else f"{'-':>11}"
        mark = ("" if r.consistent else " !") + (" p" if r.pending else "")
        print(
            f"{r.id:<42} {r.split[0]:<3} {r.engine:<13} {r.logged:>12} {kv} {_pct(r.kv_err)} "
            f"{r.e2e:>14} {_pct(r.e2e_err)}{mark}"
        )
    print("  (set: f = fit, h = held-out; ! = log does not add up; p = pending, not counted)")


def _breakdown(rows: list[Row]) -> None:
    """Per-GPU components of each end-to-end prediction (GiB), so misses can be read off."""
    print(
        f"{'end-to-end breakdown (GiB/GPU)':<42} {'usable':>7} {'weights':>8} {'forward':>8} "
        f"{'sampler':>8} {'graphs':>7} {'nontorch':>8} {'outside':>7} {'KV':>7}"
    )
    for r in rows:
        e = r.estimate
        assert e is not None and r.knob is not None
        o = e.overheads
        graphs = f"{o.cuda_graph_gib:.2f}" + ("" if o.graphs_in_budget else "o")
        groups = 0.0 if o.nccl_in_budget else o.nccl_gib
        print(
            f"{r.id:<42} {e.gpu_usable_gib:>7.2f} {e.target_weights_gib:>8.2f} "
            f"{o.forward_gib:>8.2f} {o.sampler_gib:>8.2f} {graphs:>7} "
            f"{o.outside_torch_gib:>8.2f} {groups:>7.2f} {engine_kv_gib(e, r.knob):>7.2f}"
        )
    print(
        "  (activation = max(forward, sampler); 'o' = graphs outside the engine's knob; nontorch ="
        " non-torch + collective buffers, of which 'outside' is held outside the engine's knob)"
    )


def _field(data: dict[str, Any], obs_id: str, key: str) -> str:
    return str(next(o[key] for o in data["observations"] if o["id"] == obs_id))


def _pct(value: float | None) -> str:
    return f"{value:>7.1%}" if value is not None else f"{'-':>7}"


def _summary(name: str, values: list[float | None]) -> None:
    errors = [v for v in values if v is not None]
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
    sys.exit(main())
