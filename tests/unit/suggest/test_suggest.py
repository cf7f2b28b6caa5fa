"""`suggest` on real catalog targets and local checkpoints: the known heads, MTP and drafts with
their sources, in issue-12 order, and each rejected candidate with the rules' own reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.bench.planned import NoEstimate
from orchestrator.checkpoint.catalog.user import record, user_catalog_path
from orchestrator.checkpoint.files import read_json_object
from orchestrator.checkpoint.reading import read_checkpoint_dir
from orchestrator.errors import IncompatibleError
from orchestrator.suggest.build import suggest
from orchestrator.suggest.types import KIND_ORDER, Suggestions, SuggestRequest
from tests.support import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "checkpoints"
TINY = REPO_ROOT / ".cache" / "tiny-models"


def run(target: str, **options: object) -> Suggestions:
    return suggest(SuggestRequest(target, offline=True, **options))  # type: ignore[arg-type]


def proposers(found: Suggestions) -> list[str | None]:
    return [o.candidate.model for o in found.options]


def rejected(found: Suggestions, name: str) -> str:
    reasons = [r.reason for r in found.rejected if r.candidate.name == name]
    assert reasons, f"{name} is neither an option nor rejected"
    return reasons[0]


# The seven targets of issue 12's acceptance, each with proposers suggest must list.
ACCEPTANCE = [
    (
        "meta-llama/Llama-3.1-8B-Instruct",
        "H100-80GB",
        ["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "meta-llama/Llama-3.2-1B-Instruct", None],
    ),
    (
        "meta-llama/Llama-3.3-70B-Instruct",
        "H100-80GB",
        [
            "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B",
            "RedHatAI/Llama-3.3-70B-Instruct-speculator.eagle3",
        ],
    ),
    ("Qwen/Qwen3-8B", "H100-80GB", ["RedHatAI/Qwen3-8B-speculator.eagle3", "Qwen/Qwen3-0.6B"]),
    ("Qwen/Qwen3-32B", "H100-80GB", ["RedHatAI/Qwen3-32B-speculator.eagle3", "Qwen/Qwen3-0.6B"]),
    ("deepseek-ai/DeepSeek-R1", "H200", [None]),
    (
        "openai/gpt-oss-120b",
        "H100-80GB",
        ["nvidia/gpt-oss-120b-Eagle3", "lmsys/EAGLE3-gpt-oss-120b-bf16"],
    ),
    (
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "H100-80GB",
        [None, "lmsys/SGLang-EAGLE3-Qwen3-Next-80B-A3B-Instruct-FP8-perfect-blend-regenerated"],
    ),
]


@pytest.mark.parametrize("target,gpu,expected", ACCEPTANCE, ids=[t for t, _, _ in ACCEPTANCE])
def test_known_proposers_are_listed_with_sources(
    target: str, gpu: str, expected: list[str | None]
) -> None:
    found = run(target, gpu=gpu)
    assert found.placement.problem is None
    listed = proposers(found)
    for proposer in expected:
        assert proposer in listed, f"{proposer} missing for {target}: {listed}"
    for option in found.options:
        assert option.plan.exit_code() == 0
        assert option.support, "every option names the engines that support it"
        if option.candidate.model is not None and option.candidate.origin == "built-in catalog":
            assert option.candidate.sources, option.candidate.name
        accepts = option.acceptance
        if accepts is not None:
            assert accepts.kind in ("published", "prior")
            assert accepts.sources or accepts.kind == "measured"
        else:
            assert isinstance(option.estimate, NoEstimate)


def test_options_come_in_issue_order_with_the_original_authors_first() -> None:
    found = run("meta-llama/Llama-3.1-8B-Instruct")
    kinds = [KIND_ORDER[o.candidate.kind] for o in found.options]
    assert kinds == sorted(kinds)
    heads = [o.candidate.name for o in found.options if o.candidate.kind == "head"]
    assert heads[0].startswith("yuhuili/")


def test_rejections_carry_the_rules_reasons() -> None:
    big = run("meta-llama/Llama-3.3-70B-Instruct")
    why = rejected(big, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert "trained for meta-llama/Llama-3.1-8B-Instruct" in why
    assert "4096" in why and "8192" in why
    small = run("meta-llama/Llama-3.1-8B-Instruct")
    assert "different tokenizer" in rejected(small, "Qwen/Qwen2.5-0.5B-Instruct")
    assert "no MTP layers" in rejected(small, "mtp")
    assert "trained for meta-llama/Meta-Llama-3-8B-Instruct" in rejected(
        small, "yuhuili/EAGLE-LLaMA3-Instruct-8B"
    )
    assert "not small relative to the target" in rejected(small, "meta-llama/Llama-3.2-3B-Instruct")


def test_an_unknown_tokenizer_is_no_same_tokenizer_draft() -> None:
    # DeepSeek-R1's catalog entry has no tokenizer family, so suggest offers no Llama or Qwen
    # draft for it; SGLang 0.5.23 would refuse one anyway, its vocab_size being another
    # (STANDALONE compares sizes from 0.5.15), and the rejection shows the values compared.
    found = run("deepseek-ai/DeepSeek-R1", gpu="H200", engines=("sglang",))
    assert all(o.candidate.kind != "draft" for o in found.options)
    reason = rejected(found, "Qwen/Qwen3-0.6B")
    assert "vocab_size=151936" in reason and "vocab_size=129280" in reason


def test_mtp_without_a_known_cost_is_listed_without_a_recommendation() -> None:
    found = run("Qwen/Qwen3-Next-80B-A3B-Instruct")
    mtp = next(o for o in found.options if o.candidate.kind == "mtp")
    assert isinstance(mtp.estimate, NoEstimate) and mtp.estimate.cost_unknown


def test_a_target_too_large_for_the_gpu_says_where_it_fits() -> None:
    found = run("deepseek-ai/DeepSeek-R1")  # about 640 GB: more than 8 x H100-80GB
    assert found.options == ()
    assert found.placement.problem is not None and "H200" in found.placement.problem


def test_a_target_whose_budget_cannot_be_made_says_why_not_that_it_fits_nowhere() -> None:
    # Issue 23: 470 GB on a 1,128 GB node was said to fit "on no GPU of the catalog". The
    # built-in catalog now knows every target's width, so the case is a catalog entry copied
    # from a model card alone (Qwen3-235B-A22B-Instruct-2507's, as the built-in one once was).
    card_only = {
        "roles": ["target"],
        "config": {
            "architectures": ["Qwen3MoeForCausalLM"],
            "model_type": "qwen3_moe",
            "num_hidden_layers": 94,
            "num_attention_heads": 64,
            "num_key_value_heads": 4,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "max_position_embeddings": 262144,
        },
        "config_complete": False,
        "unverified": ["hidden_size", "head_dim", "vocab_size"],
        "tokenizer_family": "qwen3",
        "published_param_count": 235_000_000_000,
        "sources": ["https://huggingface.co/Qwen/Qwen3-235B-A22B-Instruct-2507 (model card)"],
    }
    path = user_catalog_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"models": {"acme/card-only-moe": card_only}}), encoding="utf-8")
    found = run("acme/card-only-moe", gpu="H200")
    problem = found.placement.problem
    assert problem is not None and "no GPU" not in problem
    assert "cannot be estimated" in problem and "hidden_size" in problem
    assert "235.0 B published parameters" in problem


def test_a_2507_refresh_fits_the_node_its_card_serves_it_on() -> None:
    # Its card serves it with --tensor-parallel-size 8; bf16 weights are about 470 GB.
    found = run("Qwen/Qwen3-235B-A22B-Instruct-2507", gpu="H200")
    assert found.placement.problem is None and found.options


def test_an_unresolvable_target_is_exit_4() -> None:
    with pytest.raises(IncompatibleError, match="could not be resolved") as caught:
        run("nobody/no-such-model")
    assert caught.value.exit_code == 4


def test_a_local_target_gets_its_siblings(tmp_path: Path) -> None:
    for name in ("qwen3-8b", "qwen3-0.6b", "llama-3.1-8b-instruct"):
        shutil.copytree(FIXTURES / name, tmp_path / name)
    found = run(str(tmp_path / "qwen3-8b"))
    assert str(tmp_path / "qwen3-0.6b") in proposers(found)
    assert "different tokenizer" in rejected(found, str(tmp_path / "llama-3.1-8b-instruct"))
    # built-in catalog entries are matched to hub ids only
    assert all(o.candidate.origin != "built-in catalog" for o in found.options)


def test_the_user_catalog_is_searched() -> None:
    # A team records its fine-tune and a draft; suggest for the fine-tune's id finds the draft.
    for name, directory in (("acme/qwen3-8b-ft", "qwen3-8b"), ("acme/qwen3-draft", "qwen3-0.6b")):
        source = FIXTURES / directory
        info = read_checkpoint_dir(
            source, ref=name, source="local", location=str(source), revision=None
        )
        config = read_json_object(source / "config.json")
        assert config is not None
        record(name, info, config, added_from=str(source))
    found = run("acme/qwen3-8b-ft")
    option = next(o for o in found.options if o.candidate.name == "acme/qwen3-draft")
    assert option.candidate.origin == "user catalog"


@pytest.mark.skipif(
    not (TINY / "target" / "config.json").is_file(),
    reason="tiny models not built (specdeploy dev make-tiny-models)",
)
def test_tiny_models_propose_the_same_tokenizer_draft() -> None:
    found = run(str(TINY / "target"))
    assert str(TINY / "draft") in proposers(found)
    assert "different tokenizer" in rejected(found, str(TINY / "bad-draft"))
