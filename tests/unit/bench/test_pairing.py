"""The confounded-A/B check: only the proposer may differ between the two launches."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from orchestrator.bench.pairing import launch_differences, require_same_target
from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import BenchError

SPEC = '{"method":"ngram","num_speculative_tokens":4}'


def launch(
    *extra: str,
    image: str = "vllm/vllm-openai:v0.32.0",
    env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    engine: str = "vllm",
) -> EngineLaunch:
    argv = ("vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "16384", *extra)
    return EngineLaunch(
        engine=engine,  # type: ignore[arg-type]
        version="0.32.0",
        image=image,
        argv=argv,
        port=8000,
        health_path="/health",
        ready_path="/health",
        metrics_path="/metrics",
        env=MappingProxyType(env or {}),
        config_files=MappingProxyType(files or {}),
    )


def test_only_the_proposer_differs() -> None:
    require_same_target(launch("--speculative-config", SPEC), launch())
    require_same_target(launch(f"--speculative-config={SPEC}"), launch())


def test_confounded_flags_are_listed() -> None:
    cand = launch("--speculative-config", SPEC)
    base = launch("--no-enable-prefix-caching", "--max-num-seqs", "64")
    with pytest.raises(BenchError) as info:
        require_same_target(cand, base)
    what = info.value.what
    assert "--no-enable-prefix-caching: candidate absent, baseline '(set)'" in what
    assert "--max-num-seqs: candidate absent, baseline '64'" in what
    assert "proposer" in info.value.fix and info.value.exit_code == 7


def test_other_model_image_and_env_are_differences() -> None:
    cand = launch("--speculative-config", SPEC, image="vllm/vllm-openai:v0.31.0", env={"A": "1"})
    found = launch_differences(cand, launch())
    assert any(d.startswith("image:") for d in found)
    assert any(d.startswith("env A:") for d in found)
    other = launch()
    other = EngineLaunch(
        **{**other.__dict__, "argv": ("vllm", "serve", "Qwen/Qwen3-4B", "--max-model-len", "16384")}
    )
    assert any("<argument 2>" in d for d in launch_differences(launch(), other))


def test_candidate_must_speculate() -> None:
    with pytest.raises(BenchError, match="no speculative flags"):
        require_same_target(launch(), launch())


def test_engine_listed_flags_and_sglang_prefix() -> None:
    cand = launch(
        "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--draft-x", "y"
    )
    require_same_target(cand, launch(), speculative_flags={"--draft-x"})


def test_trtllm_speculative_block_in_a_config_file() -> None:
    spec_yaml = "kv_cache_config:\n  free_gpu_memory_fraction: 0.8\nspeculative_config:\n  decoding_type: Eagle\n"
    base_yaml = "kv_cache_config:\n  free_gpu_memory_fraction: 0.8\n"
    cand = launch(files={"extra.yaml": spec_yaml}, engine="trtllm")
    require_same_target(cand, launch(files={"extra.yaml": base_yaml}, engine="trtllm"))
    other = launch(files={"extra.yaml": base_yaml.replace("0.8", "0.9")}, engine="trtllm")
    with pytest.raises(BenchError, match=r"config file extra\.yaml"):
        require_same_target(cand, other)
