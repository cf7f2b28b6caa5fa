"""Every TensorRT-LLM launch specdeploy renders, judged by the release it is pinned to.

The referee (tests/conformance/trtllm_referee.py) knows, per release, the option models, the
from_dict keys and the trtllm-serve options as read in that release's own source
(tests/fixtures/trtllm). Each example profile and each variant below (EAGLE-3, MTP, n-gram,
draft/target, a long context, pinned revisions) is rendered for every release with a fixture and
must pass; seeded mistakes must be refused, so the referee itself is tested. Pure Python and fast:
no engine venv, so not marked `referee`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.engines.base import EngineLaunch
from orchestrator.engines.capabilities import matrix, release_for
from orchestrator.engines.trtllm import CONFIG_FILE, DRAFT_DOWNLOAD_DIR, effective_max_num_tokens
from orchestrator.plan.build import load_and_plan
from orchestrator.plan.types import DeploymentPlan
from orchestrator.profile.loading import load_profile
from tests.conformance.trtllm_referee import Referee, Verdict, releases
from tests.support import EXAMPLE_PROFILES, PROFILES_DIR

TRTLLM_PROFILES = [p for p in EXAMPLE_PROFILES if load_profile(p).engine.name == "trtllm"]
BASE = "trtllm-llama31-8b-eagle3.yaml"
RELEASES = releases()
LLAMA_1B = "meta-llama/Llama-3.2-1B-Instruct"
VARIANTS: dict[str, dict[str, Any]] = {
    "eagle3": {},
    "mtp": {
        "target": {"model": "deepseek-ai/DeepSeek-V3"},
        "proposer": {"method": "mtp", "num_speculative_tokens": 1},
        "hardware": {"gpu": "B200", "tensor_parallel_size": 8},
        "serving": {"max_model_len": 8192, "max_concurrency": 8},
    },
    "mtp-attention-dp-ep": {
        "target": {"model": "deepseek-ai/DeepSeek-V3"},
        "proposer": {"method": "mtp", "num_speculative_tokens": 1},
        "hardware": {
            "gpu": "B200",
            "tensor_parallel_size": 8,
            "attention_data_parallel_size": 8,
            "expert_parallel": True,
        },
        "serving": {"max_model_len": 8192, "max_concurrency": 64},
    },
    "ngram": {"proposer": {"method": "ngram", "num_speculative_tokens": 4}},
    "ngram-window": {
        "proposer": {"method": "ngram", "num_speculative_tokens": 3, "ngram": {"max_window": 5}},
    },
    "draft_model": {
        "proposer": {"method": "draft_model", "model": LLAMA_1B, "num_speculative_tokens": 4},
    },
    "long-context": {"serving": {"max_model_len": 32768, "max_concurrency": 4}},
    "small-max-num-tokens": {"trtllm": {"max_num_tokens": 4096}},
    "pinned-revisions": {
        "target": {"model": "meta-llama/Llama-3.1-8B-Instruct", "revision": "0e9e39f"},
        "proposer": {
            "method": "eagle3",
            "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
            "revision": "main",
            "num_speculative_tokens": 4,
        },
        "deploy": {"baseline": True},
    },
    "baseline": {"proposer": {"method": "none"}},
}  # fmt: skip


def variant_plan(name: str, version: str, tmp_path: Path) -> DeploymentPlan:
    data = yaml.safe_load((PROFILES_DIR / BASE).read_text())
    data["metadata"]["name"] = f"t-{name}".replace("_", "-")
    data["engine"]["version"] = version
    for key, value in VARIANTS[name].items():
        data[key] = value if key in ("proposer", "target") else {**data.get(key, {}), **value}
    path = tmp_path / f"{name}-{version}.yaml"
    path.write_text(yaml.safe_dump(data))
    plan = load_and_plan(path, offline=True)
    assert isinstance(plan, DeploymentPlan), [f"{f.rule}: {f.what}" for f in plan.errors]
    return plan


def judged(plan: DeploymentPlan, version: str) -> tuple[EngineLaunch, Verdict]:
    launch = plan.launch_for(container=True)
    assert launch is not None
    verdict = Referee(version).judge(launch)
    assert verdict.ok, f"TensorRT-LLM {version} refuses:\n" + "\n".join(verdict.problems)
    return launch, verdict


def refusals(launch: EngineLaunch, version: str, **changes: Any) -> list[str]:
    """The referee's verdict on `launch` with some argv or YAML changed."""
    return Referee(version).judge(dataclasses.replace(launch, **changes)).problems


def with_options(launch: EngineLaunch, edit: Any) -> dict[str, Any]:
    options = yaml.safe_load(launch.config_files[CONFIG_FILE])
    edit(options)
    return {"config_files": {CONFIG_FILE: yaml.safe_dump(options)}}


# --- coverage --------------------------------------------------------------------------------------


def test_every_verified_release_has_a_fixture_and_no_other() -> None:
    entries = matrix()["trtllm"]["releases"]
    verified = [str(e["version"]) for e in entries if e.get("verified")]
    assert verified == RELEASES


def test_there_is_a_trtllm_example() -> None:
    assert TRTLLM_PROFILES


# --- what specdeploy renders -----------------------------------------------------------------------


@pytest.mark.parametrize("profile", TRTLLM_PROFILES, ids=lambda p: p.stem)
def test_example_profile_passes_its_release(profile: Path) -> None:
    plan = load_and_plan(profile, offline=True)
    assert isinstance(plan, DeploymentPlan), [f"{f.rule}: {f.what}" for f in plan.errors]
    version = plan.release.rules_version
    if version not in RELEASES:
        pytest.skip(f"TensorRT-LLM {version} has no fixture (not read at its tag)")
    for launch in (plan.launch_for(container=True), plan.launch_for(container=True, baseline=True)):
        if launch is not None:
            verdict = Referee(version).judge(launch)
            assert verdict.ok, "\n".join(verdict.problems)
            assert verdict.effective("max_seq_len") == plan.profile.serving.max_model_len


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("name", VARIANTS)
def test_variant_passes_every_release(name: str, version: str, tmp_path: Path) -> None:
    plan = variant_plan(name, version, tmp_path)
    assert plan.profile is not None
    _, verdict = judged(plan, version)
    profile = plan.profile
    assert verdict.model == profile.target.model
    assert verdict.effective("tensor_parallel_size") == profile.hardware.tensor_parallel_size
    assert verdict.effective("max_seq_len") == profile.serving.max_model_len
    assert verdict.effective("max_num_tokens") == effective_max_num_tokens(profile)
    spec = verdict.options.get("speculative_config")
    k = profile.proposer.num_speculative_tokens
    if profile.proposer.method == "none":
        assert spec is None
    elif profile.proposer.method == "mtp":
        assert spec == {"decoding_type": "MTP", "num_nextn_predict_layers": k}
    else:
        assert spec is not None and spec["max_draft_len"] == k
    if profile.deploy.baseline:
        baseline = plan.launch_for(container=True, baseline=True)
        assert baseline is not None
        assert Referee(version).judge(baseline).ok


@pytest.mark.parametrize("version", RELEASES)
def test_eagle3_head_spelling_and_location(version: str, tmp_path: Path) -> None:
    launch, verdict = judged(variant_plan("eagle3", version, tmp_path), version)
    spec = verdict.options["speculative_config"]
    assert spec["decoding_type"] == "Eagle"  # no Eagle3 key in from_dict up to 1.2.1
    if release_for("trtllm", version).has("speculative-model-hub-id"):
        assert spec["speculative_model_dir"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
        assert launch.downloads == ()
    else:
        assert spec["speculative_model_dir"] == DRAFT_DOWNLOAD_DIR
        (download,) = launch.downloads
        assert download.repo_id == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
        assert download.target_dir == DRAFT_DOWNLOAD_DIR


@pytest.mark.parametrize("version", RELEASES)
def test_a_pinned_draft_revision_is_downloaded_on_every_release(
    version: str, tmp_path: Path
) -> None:
    """speculative_config has no revision field in any release: the pin needs a download."""
    launch, verdict = judged(variant_plan("pinned-revisions", version, tmp_path), version)
    (download,) = launch.downloads
    assert download.revision == "main"
    assert verdict.options["speculative_config"]["speculative_model_dir"] == DRAFT_DOWNLOAD_DIR
    assert verdict.options["revision"] == "0e9e39f"


def test_a_long_context_is_served_in_one_prefill(tmp_path: Path) -> None:
    _, verdict = judged(variant_plan("long-context", "1.2.1", tmp_path), "1.2.1")
    assert verdict.effective("max_num_tokens") == 32768
    assert not verdict.effective("enable_chunked_prefill")


def test_a_small_max_num_tokens_is_kept_and_chunks_prefill(tmp_path: Path) -> None:
    _, verdict = judged(variant_plan("small-max-num-tokens", "1.0.0", tmp_path), "1.0.0")
    assert verdict.effective("max_num_tokens") == 4096
    assert verdict.effective("enable_chunked_prefill") is True


# --- the referee refuses what the release refuses --------------------------------------------------


@pytest.fixture(scope="module")
def eagle3_launch(tmp_path_factory: pytest.TempPathFactory) -> EngineLaunch:
    plan = variant_plan("eagle3", "1.2.1", tmp_path_factory.mktemp("eagle3"))
    return judged(plan, "1.2.1")[0]


@pytest.mark.parametrize(
    ("where", "edit"),
    [
        ("speculative_config.max_draft_length", lambda o: o["speculative_config"].update(
            max_draft_length=o["speculative_config"].pop("max_draft_len"))),
        ("max_num_token", lambda o: o.update(max_num_token=o.pop("max_num_tokens"))),
        ("kv_cache_config.free_gpu_mem_fraction", lambda o: o["kv_cache_config"].update(
            free_gpu_mem_fraction=o["kv_cache_config"].pop("free_gpu_memory_fraction"))),
        ("speculative_config.decoding_type", lambda o: o["speculative_config"].update(
            decoding_type="Eagle3")),
        ("speculative_config", lambda o: o["speculative_config"].pop("speculative_model_dir")),
        ("moe_config", lambda o: o.update(moe_config={"backend": "CUTLASS"})),
        ("build_config", lambda o: o.update(build_config={"max_num_tokens": 8192})),
    ],
    ids=["misspelt-draft-len", "misspelt-top-level", "misspelt-nested", "eagle3-key",
         "no-head", "untranscribed-model", "no-build-config-in-1.2"],
)  # fmt: skip
def test_referee_refuses_a_seeded_yaml_mistake(
    eagle3_launch: EngineLaunch, where: str, edit: Any
) -> None:
    problems = refusals(eagle3_launch, "1.2.1", **with_options(eagle3_launch, edit))
    assert any(where in p for p in problems), problems


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--max_draft_len", "4"], "no such option --max_draft_len"),
        (["--backend", "trt"], "is not one of"),
        (["--trust_remote_code=true"], "takes no value"),
        (["--port"], "given twice"),
        (["stray"], "unexpected extra argument"),
    ],
)
def test_referee_refuses_a_seeded_argv_mistake(
    eagle3_launch: EngineLaunch, extra: list[str], needle: str
) -> None:
    argv = (*eagle3_launch.argv, *extra)
    if extra == ["--port"]:
        argv = (*eagle3_launch.argv, "--port", "9000")
    problems = refusals(eagle3_launch, "1.2.1", argv=argv)
    assert any(needle in p for p in problems), problems


def test_referee_refuses_what_1_0_did_not_have(eagle3_launch: EngineLaunch) -> None:
    """Today's 1.2.1 launch replayed against 1.0.0: --config and --revision do not exist there,
    a hub id is no local directory, --backend trt is fine but tensorrt is not."""
    argv = (*eagle3_launch.argv, "--revision", "abc")
    problems = "\n".join(refusals(eagle3_launch, "1.0.0", argv=argv))
    assert "no such option --config" in problems
    assert "no such option --revision" in problems


def test_referee_refuses_a_hub_head_before_1_2(tmp_path: Path) -> None:
    launch, _ = judged(variant_plan("eagle3", "1.1.0", tmp_path), "1.1.0")
    hub = with_options(
        launch,
        lambda o: o["speculative_config"].update(
            speculative_model_dir="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
        ),
    )
    problems = refusals(launch, "1.1.0", **hub)
    assert any("does not download a hub id" in p for p in problems), problems


def test_referee_refuses_ngram_without_a_window(tmp_path: Path) -> None:
    launch, _ = judged(variant_plan("ngram", "1.2.1", tmp_path), "1.2.1")
    edit = with_options(launch, lambda o: o["speculative_config"].pop("max_matching_ngram_size"))
    problems = refusals(launch, "1.2.1", **edit)
    assert any("max_matching_ngram_size: NGram needs it > 0" in p for p in problems), problems


def test_referee_refuses_a_prompt_longer_than_max_num_tokens(tmp_path: Path) -> None:
    """NVIDIA/TensorRT-LLM#9277: max_seq_len 32768 with the default 8192 tokens per iteration."""
    launch, _ = judged(variant_plan("long-context", "1.2.1", tmp_path), "1.2.1")
    argv = list(launch.argv)
    at = argv.index("--max_num_tokens")
    del argv[at : at + 2]
    edit = with_options(launch, lambda o: o.pop("max_num_tokens"))
    problems = refusals(launch, "1.2.1", argv=tuple(argv), **edit)
    assert any("max_num_tokens 8192 < longest prompt 32767" in p for p in problems), problems


def test_referee_refuses_a_flag_and_yaml_that_disagree(eagle3_launch: EngineLaunch) -> None:
    edit = with_options(eagle3_launch, lambda o: o.update(max_batch_size=999))
    problems = refusals(eagle3_launch, "1.2.1", **edit)
    assert any("disagrees with YAML max_batch_size" in p for p in problems), problems
