"""Pairing rules: one Test<Rule> class each, with fires / passes / does-not-apply / cannot-check.

Checkpoints come from tests/fixtures/checkpoints (trimmed real configs, generated tokenizers and
indexes), the built-in catalog, or small factories. No test touches the network.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.checkpoint.catalog import catalog_entries, catalog_info
from orchestrator.checkpoint.catalog.user import record, user_catalog_path
from orchestrator.checkpoint.files import read_json_object
from orchestrator.checkpoint.info import CheckpointInfo, EagleHeadInfo, Unresolved
from orchestrator.checkpoint.reading import read_checkpoint_dir
from orchestrator.checkpoint.resolution import CheckpointResolver
from orchestrator.compatibility import pairing_rules, shape_rules
from orchestrator.compatibility.pairing_rules import (
    checkpoint_resolved,
    draft_tokenizer_matches,
    draft_vocab_size_matches,
    eagle_aux_layers_exist,
    eagle_generation_matches,
    eagle_head_hidden_size_matches,
    eagle_head_vocab_matches,
    mtp_layers_declared,
    mtp_weights_present,
    revisions_pinned,
    speculators_format_is_read,
    speculators_verifier_matches,
    trtllm_eagle_checkpoint,
    user_catalog_named,
)
from orchestrator.compatibility.rule import CompatContext, Finding, run_rules
from orchestrator.compatibility.shape_rules import max_model_len_supported, tensor_parallel_shape
from orchestrator.engines.capabilities import release_for
from orchestrator.profile.loading import parse_profile
from orchestrator.profile.schema import EngineName

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"
VERSIONS: dict[EngineName, str] = {"vllm": "0.32.0", "sglang": "0.5.23", "trtllm": "1.2.0"}
SHA = "0123456789abcdef0123456789abcdef01234567"

#: The rules that read checkpoint metadata (pairing, plus model shape vs topology and context).
RULES = pairing_rules.RULES + shape_rules.RULES


@functools.cache
def fixture(slug: str, ref: str | None = None) -> CheckpointInfo:
    path = FIXTURES / slug
    return read_checkpoint_dir(
        path, ref=ref or f"./{slug}", source="local", location=str(path), revision=None
    )


def catalog(model: str) -> CheckpointInfo:
    info = catalog_info(model)
    assert info is not None, model
    return info


def ckpt(**fields: Any) -> CheckpointInfo:
    base: dict[str, Any] = {
        "ref": "org/model",
        "source": "local",
        "location": "/models/model",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 32768,
    }
    return CheckpointInfo(**{**base, **fields})


def head(**fields: Any) -> EagleHeadInfo:
    base: dict[str, Any] = {
        "generation": "eagle3",
        "format": "raw",
        "hidden_size": 4096,
        "target_hidden_size": 4096,
        "vocab_size": 128256,
        "draft_vocab_size": 32000,
        "has_d2t": True,
        "aux_layer_ids": None,
    }
    return EagleHeadInfo(**{**base, **fields})


def context(
    method: str = "draft_model",
    engine: EngineName = "vllm",
    *,
    target: CheckpointInfo | None = None,
    draft: CheckpointInfo | None = None,
    unresolved: tuple[Unresolved, ...] = (),
    target_model: str = "./target",
    draft_model: str = "./draft",
    target_revision: str | None = None,
    draft_revision: str | None = None,
    tp: int = 1,
    draft_tp: int | None = None,
    max_model_len: int = 8192,
    version: str | None = None,
) -> CompatContext:
    version = version or VERSIONS[engine]
    proposer: dict[str, Any] = {"method": method}
    if method in ("draft_model", "eagle", "eagle3"):
        proposer |= {"model": draft_model, "revision": draft_revision}
        proposer["draft_tensor_parallel_size"] = draft_tp
    doc = {
        "apiVersion": "specdeploy/v1",
        "kind": "SpeculativeDeployment",
        "metadata": {"name": "x"},
        "engine": {"name": engine, "version": version},
        "target": {"model": target_model, "revision": target_revision},
        "proposer": proposer,
        "hardware": {"tensor_parallel_size": tp},
        "serving": {"max_model_len": max_model_len},
    }
    return CompatContext(
        profile=parse_profile(yaml.safe_dump(doc)),
        release=release_for(engine, version),
        target=target,
        draft=draft,
        unresolved=unresolved,
    )


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


def test_rule_ids_are_the_contract() -> None:
    assert {r.id for r in RULES} == {
        "checkpoint.unresolved", "checkpoint.user-catalog", "pairing.draft-tokenizer",
        "pairing.draft-vocab-size",
        "pairing.eagle-head-hidden-size", "pairing.eagle-head-vocab", "pairing.eagle-generation",
        "pairing.eagle-aux-layers", "pairing.speculators-verifier", "pairing.mtp-layers",
        "pairing.speculators-format",
        "pairing.mtp-weights", "pairing.revision-pinned", "engine.trtllm-eagle-checkpoint",
        "engine.tensor-parallel-shape", "serving.max-model-len",
    }  # fmt: skip
    assert all(r.source and r.doc for r in RULES)


class TestCheckpointResolved:
    def test_unknown_hub_id_offline_is_an_error_with_a_download_fix(self, tmp_path: Path) -> None:
        resolver = CheckpointResolver(base_dir=tmp_path, offline=True, hf_cache=tmp_path / "hub")
        unresolved = resolver.resolve("proposer.model", "acme/no-such-model", None)
        assert isinstance(unresolved, Unresolved)
        ctx = context(target=fixture("qwen3-8b"), unresolved=(unresolved,))
        finding = one(checkpoint_resolved(ctx))
        assert finding.severity == "error" and finding.exit_code == 4
        assert finding.rule == "checkpoint.unresolved" and finding.field == "proposer.model"
        assert "acme/no-such-model" in finding.what and "offline" in finding.what
        assert "huggingface-cli download acme/no-such-model" in finding.fix
        assert "--offline" in finding.fix and "proposer.revision" in finding.fix

    def test_missing_local_directory_says_to_fix_the_path(self) -> None:
        missing = Unresolved("target.model", "./models/gone", None, ("local directory: gone",))
        finding = one(checkpoint_resolved(context(unresolved=(missing,))))
        assert "fix the path in target.model" in finding.fix

    def test_passes_when_everything_resolved(self) -> None:
        assert checkpoint_resolved(context(target=fixture("qwen3-8b"))) == []


class TestUserCatalogNamed:
    def recorded(self, tmp_path: Path, model: str, slug: str) -> CheckpointInfo:
        config = read_json_object(FIXTURES / slug / "config.json") or {}
        record(model, fixture(slug), config, added_from=f"local directory {slug}")
        resolver = CheckpointResolver(base_dir=tmp_path, offline=True, hf_cache=tmp_path / "hub")
        found = resolver.resolve("target.model", model, None)
        assert isinstance(found, CheckpointInfo)
        return found

    def test_a_user_entry_with_a_built_in_id_names_the_file_and_what_it_shadows(
        self, tmp_path: Path
    ) -> None:
        target = self.recorded(tmp_path, "Qwen/Qwen3-8B", "qwen3-0.6b")
        finding = one(user_catalog_named(context(target=target)))
        assert finding.severity == "info" and finding.field == "target.model"
        assert f"user catalog {user_catalog_path()}" in finding.what
        assert "shadows the built-in catalog entry Qwen/Qwen3-8B (models/qwen3.json)" in (
            finding.what
        )

    def test_a_user_entry_of_its_own_id_names_the_file_only(self, tmp_path: Path) -> None:
        draft = self.recorded(tmp_path, "acme/draft", "qwen3-0.6b")
        finding = one(user_catalog_named(context(target=fixture("qwen3-8b"), draft=draft)))
        assert finding.field == "proposer.model" and str(user_catalog_path()) in finding.what
        assert "shadows" not in finding.what

    def test_files_and_the_built_in_catalog_say_nothing(self) -> None:
        ctx = context(target=fixture("qwen3-8b"), draft=catalog("Qwen/Qwen3-0.6B"))
        assert user_catalog_named(ctx) == []


class TestDraftTokenizerMatches:
    def test_two_32000_token_tokenizers_with_other_tokens_are_refused(self) -> None:
        target, draft = fixture("llama2-style-32k"), fixture("mistral-style-32k")
        assert target.vocab_size == draft.vocab_size == 32000
        finding = one(draft_tokenizer_matches(context(target=target, draft=draft)))
        assert finding.severity == "error" and finding.exit_code == 4
        assert "32000 tokens" in finding.what and "tokenizers differ" in finding.what
        assert "proposer.method: ngram" in finding.fix

    def test_passes_for_one_tokenizer_with_other_padding(self) -> None:
        target, draft = fixture("qwen2.5-7b-instruct"), fixture("qwen2.5-1.5b-instruct")
        assert draft_tokenizer_matches(context(target=target, draft=draft)) == []

    def test_added_tokens_only_is_a_warning(self) -> None:
        target, draft = fixture("qwen3-8b"), fixture("qwen2.5-1.5b-instruct")
        finding = one(draft_tokenizer_matches(context(target=target, draft=draft)))
        assert finding.severity == "warning" and "same base vocabulary" in finding.what

    def test_catalog_models_compare_by_documented_family(self) -> None:
        ctx = context(target=catalog("Qwen/Qwen3-8B"), draft=catalog("Qwen/Qwen3-0.6B"))
        assert draft_tokenizer_matches(ctx) == []
        ctx = context(
            target=catalog("meta-llama/Llama-3.1-8B-Instruct"), draft=catalog("Qwen/Qwen3-0.6B")
        )
        finding = one(draft_tokenizer_matches(ctx))
        assert finding.severity == "error"
        assert "documented tokenizer family" in finding.what and "not file content" in finding.what

    def test_does_not_apply_to_eagle3(self) -> None:
        ctx = context(
            "eagle3", target=fixture("llama2-style-32k"), draft=fixture("mistral-style-32k")
        )
        assert draft_tokenizer_matches(ctx) == []

    def test_cannot_check_without_tokenizer_files(self) -> None:
        ctx = context(
            target=fixture("qwen3-8b"), draft=ckpt(ref="./bare", missing=("tokenizer.json",))
        )
        finding = one(draft_tokenizer_matches(ctx))
        assert finding.severity == "info" and "not checked" in finding.what
        assert "tokenizer.json" in finding.what and "local directory" in finding.fix


class TestDraftVocabSizeMatches:
    def test_vllm_refuses_qwen25_7b_with_15b_draft(self) -> None:
        target, draft = fixture("qwen2.5-7b-instruct"), fixture("qwen2.5-1.5b-instruct")
        finding = one(draft_vocab_size_matches(context(target=target, draft=draft)))
        assert finding.severity == "error" and finding.exit_code == 4
        assert "vocab_size=151936" in finding.what and "vocab_size=152064" in finding.what
        assert "engine.name: trtllm" in finding.fix

    def test_sglang_before_0_5_15_accepts_the_same_pair_with_no_pairing_error(self) -> None:
        # SGLang's own docs example (STANDALONE, Qwen2.5-7B + 1.5B) ran on 0.5.14 and earlier.
        target, draft = fixture("qwen2.5-7b-instruct"), fixture("qwen2.5-1.5b-instruct")
        ctx = context(engine="sglang", version="0.5.14", target=target, draft=draft)
        assert draft_vocab_size_matches(ctx) == []
        errors = [f for f in run_rules(RULES, ctx, frozenset()) if f.severity == "error"]
        assert errors == []

    def test_sglang_from_0_5_15_refuses_a_padding_only_difference(self) -> None:
        # standalone_worker_v2._validate_vocab_compatibility compares vocab_size from 0.5.15.
        target, draft = fixture("qwen2.5-7b-instruct"), fixture("qwen2.5-1.5b-instruct")
        for version in ("0.5.15", "0.5.23"):
            ctx = context(engine="sglang", version=version, target=target, draft=draft)
            finding = one(draft_vocab_size_matches(ctx))
            assert finding.severity == "error" and f"sglang {version} refuses" in finding.why

    def test_trtllm_warns_when_the_draft_vocab_is_larger(self) -> None:
        target, draft = fixture("qwen2.5-1.5b-instruct"), fixture("qwen2.5-7b-instruct")
        finding = one(
            draft_vocab_size_matches(context(engine="trtllm", target=target, draft=draft))
        )
        assert finding.severity == "warning" and "151936..152063" in finding.what
        same_direction = context(engine="trtllm", target=draft, draft=target)
        assert draft_vocab_size_matches(same_direction) == []

    def test_passes_when_sizes_match(self) -> None:
        ctx = context(target=catalog("Qwen/Qwen3-8B"), draft=catalog("Qwen/Qwen3-0.6B"))
        assert draft_vocab_size_matches(ctx) == []

    def test_does_not_apply_to_ngram(self) -> None:
        ctx = context("ngram", target=fixture("qwen2.5-7b-instruct"), draft=None)
        assert draft_vocab_size_matches(ctx) == []

    def test_cannot_check_without_sizes(self) -> None:
        ctx = context(target=fixture("qwen3-8b"), draft=ckpt(vocab_size=None))
        assert one(draft_vocab_size_matches(ctx)).severity == "info"

    def test_sglang_cannot_tell_padding_without_tokenizers(self) -> None:
        ctx = context(
            engine="sglang",
            version="0.5.14",
            target=ckpt(vocab_size=152064),
            draft=ckpt(vocab_size=151936),
        )
        finding = one(draft_vocab_size_matches(ctx))
        assert finding.severity == "info" and "padding" in finding.what


class TestEagleHeadHiddenSizeMatches:
    def test_a_4096_head_on_an_8192_target_is_refused(self) -> None:
        ctx = context(
            "eagle3", target=fixture("llama-3.1-70b-instruct"), draft=fixture("eagle3-llama3.1-8b")
        )
        finding = one(eagle_head_hidden_size_matches(ctx))
        assert finding.severity == "error" and finding.exit_code == 4
        assert "hidden size 4096" in finding.what and "hidden_size=8192" in finding.what

    def test_passes_on_the_target_it_was_trained_for(self) -> None:
        ctx = context(
            "eagle3", target=fixture("llama-3.1-8b-instruct"), draft=fixture("eagle3-llama3.1-8b")
        )
        assert eagle_head_hidden_size_matches(ctx) == []

    def test_does_not_apply_to_draft_models(self) -> None:
        ctx = context(target=fixture("llama-3.1-70b-instruct"), draft=fixture("eagle3-llama3.1-8b"))
        assert eagle_head_hidden_size_matches(ctx) == []

    def test_cannot_check_an_unknown_head_width(self) -> None:
        # neither the head's config nor a verifier's catalog entry gives a width (a local head
        # with a partial config, as a user catalog may hold)
        headless = head(hidden_size=None, target_hidden_size=None)
        draft = ckpt(ref="org/my-head", hidden_size=None, eagle=headless)
        ctx = context("eagle3", target=catalog("Qwen/Qwen3-8B"), draft=draft)
        finding = one(eagle_head_hidden_size_matches(ctx))
        assert finding.severity == "info" and "config.json" in finding.fix
        # It is the head's width that is unknown: the finding names the head, not the target.
        assert "org/my-head" in finding.what
        assert "Qwen/Qwen3-8B lacks" not in finding.what

    def test_every_built_in_head_has_a_checkable_width(self) -> None:
        # from its own config, else from the verifier the catalog records (or, for a verifier
        # named by its quantized checkpoint, the model it quantizes)
        unknown = [
            entry.model
            for entry in catalog_entries()
            if "head" in entry.roles
            and (info := catalog_info(entry.model)) is not None
            and info.eagle is not None
            and info.eagle.target_hidden_size is None
        ]
        assert unknown == []

    def test_a_quantized_verifier_name_reads_the_model_it_quantizes(self) -> None:
        draft = catalog(
            "lmsys/SGLang-EAGLE3-Qwen3-Next-80B-A3B-Instruct-FP8-perfect-blend-regenerated"
        )
        assert draft.eagle is not None and draft.eagle.target_hidden_size == 2048
        assert draft.eagle.target_hidden_size_from == "Qwen/Qwen3-Next-80B-A3B-Instruct"
        other = context("eagle3", target=catalog("Qwen/Qwen3-8B"), draft=draft)
        assert one(eagle_head_hidden_size_matches(other)).severity == "error"

    def test_a_head_without_its_width_reads_its_verifiers(self) -> None:
        # the head's catalog config has no hidden size, but the catalog records the model it was
        # trained for, whose hidden states it reads: that width is checked
        draft = catalog("RedHatAI/Llama-3.3-70B-Instruct-speculator.eagle3")
        assert draft.eagle is not None and draft.eagle.target_hidden_size == 8192
        assert draft.eagle.target_hidden_size_from == "meta-llama/Llama-3.3-70B-Instruct"
        own = context("eagle3", target=catalog("meta-llama/Llama-3.3-70B-Instruct"), draft=draft)
        assert eagle_head_hidden_size_matches(own) == []
        other = context("eagle3", target=catalog("meta-llama/Llama-3.1-8B-Instruct"), draft=draft)
        finding = one(eagle_head_hidden_size_matches(other))
        assert finding.severity == "error" and "hidden_size=4096" in finding.what
        assert "(that of meta-llama/Llama-3.3-70B-Instruct, its verifier in the catalog)" in (
            finding.what
        )


class TestEagleHeadVocabMatches:
    def test_a_llama_head_on_a_qwen_target_is_refused(self) -> None:
        ctx = context("eagle3", target=fixture("qwen3-8b"), draft=fixture("eagle3-llama3.1-8b"))
        finding = one(eagle_head_vocab_matches(ctx))
        assert finding.severity == "error" and "vocab_size=128256" in finding.what
        assert "vocab_size=151936" in finding.what

    def test_reduced_vocab_without_d2t_is_refused(self) -> None:
        draft = ckpt(eagle=head(has_d2t=False))
        ctx = context("eagle3", target=fixture("llama-3.1-8b-instruct"), draft=draft)
        finding = one(eagle_head_vocab_matches(ctx))
        assert finding.severity == "error" and "no d2t" in finding.what

    def test_passes_with_a_d2t_map(self) -> None:
        ctx = context(
            "eagle3", target=fixture("llama-3.1-8b-instruct"), draft=fixture("eagle3-llama3.1-8b")
        )
        assert eagle_head_vocab_matches(ctx) == []

    def test_does_not_apply_to_mtp(self) -> None:
        assert eagle_head_vocab_matches(context("mtp", target=fixture("mimo-7b-base"))) == []

    def test_cannot_check_d2t_without_an_index(self) -> None:
        draft = ckpt(eagle=head(has_d2t=None))
        ctx = context("eagle3", target=fixture("llama-3.1-8b-instruct"), draft=draft)
        assert one(eagle_head_vocab_matches(ctx)).severity == "info"


class TestEagleGenerationMatches:
    def test_an_eagle1_head_with_method_eagle3_is_refused(self) -> None:
        ctx = context(
            "eagle3", target=fixture("llama-3.1-8b-instruct"), draft=fixture("eagle1-llama3.1-8b")
        )
        finding = one(eagle_generation_matches(ctx))
        assert finding.severity == "error" and "EAGLE-1/2 head" in finding.what
        assert "proposer.method: eagle" in finding.fix

    def test_an_eagle3_head_with_method_eagle_is_refused_by_vllm(self) -> None:
        ctx = context(
            "eagle",
            "vllm",
            target=fixture("llama-3.1-8b-instruct"),
            draft=fixture("eagle3-llama3.1-8b"),
        )
        finding = one(eagle_generation_matches(ctx))
        assert finding.severity == "error" and "EAGLE-3 head" in finding.what
        assert "fails to load" in finding.why

    def test_sglang_runs_an_eagle3_head_as_eagle_at_acceptance_one(self) -> None:
        ctx = context(
            "eagle",
            "sglang",
            target=fixture("llama-3.1-8b-instruct"),
            draft=fixture("eagle3-llama3.1-8b"),
        )
        finding = one(eagle_generation_matches(ctx))
        assert finding.severity == "warning" and "EAGLE-3 head" in finding.what
        assert "~1.0" in finding.why and "proposer.method: eagle3" in finding.fix

    def test_sglang_refuses_an_eagle1_head_as_eagle3(self) -> None:
        ctx = context(
            "eagle3",
            "sglang",
            target=fixture("llama-3.1-8b-instruct"),
            draft=fixture("eagle1-llama3.1-8b"),
        )
        assert one(eagle_generation_matches(ctx)).severity == "error"

    def test_passes_when_generations_agree(self) -> None:
        ctx = context(
            "eagle", target=fixture("llama-3.1-8b-instruct"), draft=fixture("eagle1-llama3.1-8b")
        )
        assert eagle_generation_matches(ctx) == []

    def test_a_full_language_model_is_not_a_head(self) -> None:
        ctx = context("eagle3", target=fixture("qwen3-8b"), draft=fixture("qwen3-0.6b"))
        finding = one(eagle_generation_matches(ctx))
        assert finding.severity == "error" and "28-layer language model" in finding.what
        assert "proposer.method: draft_model" in finding.fix

    def test_does_not_apply_on_trtllm_or_to_draft_models(self) -> None:
        draft = fixture("eagle1-llama3.1-8b")
        target = fixture("llama-3.1-8b-instruct")
        assert (
            eagle_generation_matches(context("eagle3", "trtllm", target=target, draft=draft)) == []
        )
        assert eagle_generation_matches(context(target=target, draft=draft)) == []

    def test_cannot_check_without_config(self) -> None:
        draft = ckpt(num_hidden_layers=None, missing=("config.json",))
        ctx = context("eagle3", target=fixture("llama-3.1-8b-instruct"), draft=draft)
        assert one(eagle_generation_matches(ctx)).severity == "info"


class TestEagleAuxLayersExist:
    def test_ids_past_the_target_depth_are_refused(self) -> None:
        draft = ckpt(eagle=head(aux_layer_ids=(1, 17, 33)))
        ctx = context("eagle3", target=ckpt(num_hidden_layers=24), draft=draft)
        finding = one(eagle_aux_layers_exist(ctx))
        assert finding.severity == "error" and "[33]" in finding.what

    def test_passes_within_range_including_the_boundary_index(self) -> None:
        draft = ckpt(eagle=head(aux_layer_ids=(2, 12, 24)))
        assert (
            eagle_aux_layers_exist(
                context("eagle3", target=ckpt(num_hidden_layers=24), draft=draft)
            )
            == []
        )

    def test_passes_without_explicit_ids(self) -> None:
        ctx = context(
            "eagle3", target=fixture("llama-3.1-8b-instruct"), draft=fixture("eagle3-llama3.1-8b")
        )
        assert eagle_aux_layers_exist(ctx) == []

    def test_does_not_apply_to_eagle1(self) -> None:
        draft = ckpt(eagle=head(generation="eagle1", aux_layer_ids=(99,)))
        assert eagle_aux_layers_exist(context("eagle", target=ckpt(), draft=draft)) == []

    def test_cannot_check_unknown_target_depth(self) -> None:
        draft = ckpt(eagle=head(aux_layer_ids=(1, 2, 3)))
        ctx = context("eagle3", target=ckpt(num_hidden_layers=None), draft=draft)
        assert one(eagle_aux_layers_exist(ctx)).severity == "info"


class TestSpeculatorsFormatIsRead:
    HEAD = "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"
    TARGET = "meta-llama/Llama-3.1-8B-Instruct"

    def ctx(self, engine: EngineName) -> CompatContext:
        return context("eagle3", engine, target=catalog(self.TARGET), draft=catalog(self.HEAD))

    def test_sglang_has_no_code_for_it(self) -> None:
        finding = one(speculators_format_is_read(self.ctx("sglang")))
        assert finding.severity == "error" and "speculators format" in finding.what
        assert "vllm (from 0.10.1)" in finding.fix

    def test_vllm_reads_it_from_0_10_1(self) -> None:
        assert speculators_format_is_read(self.ctx("vllm")) == []
        old = dataclasses.replace(self.ctx("vllm"), release=release_for("vllm", "0.10.0"))
        assert one(speculators_format_is_read(old)).severity == "error"

    def test_unchecked_engine_warns(self) -> None:
        assert one(speculators_format_is_read(self.ctx("trtllm"))).severity == "warning"

    def test_does_not_apply_to_a_head_in_its_original_format(self) -> None:
        draft = catalog("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
        ctx = context("eagle3", "sglang", target=catalog(self.TARGET), draft=draft)
        assert speculators_format_is_read(ctx) == []


class TestSpeculatorsVerifierMatches:
    def test_passes_when_the_normalised_verifier_path_names_the_target(self) -> None:
        target = fixture("llama-3.1-8b-instruct", ref="meta-llama/Llama-3.1-8B-Instruct")
        target = replace(target, source="hf-cache")
        ctx = context("eagle3", target=target, draft=fixture("speculators-llama3.1-8b-eagle3"))
        assert speculators_verifier_matches(ctx) == []

    def test_passes_for_a_local_target_with_the_same_name(self) -> None:
        target = fixture("llama-3.1-8b-instruct", ref="./models/Llama-3.1-8B-Instruct-FP8")
        ctx = context("eagle3", target=target, draft=fixture("speculators-llama3.1-8b-eagle3"))
        assert speculators_verifier_matches(ctx) == []

    def test_warns_for_another_verifier(self) -> None:
        ctx = context(
            "eagle3",
            target=catalog("Qwen/Qwen3-8B"),
            draft=fixture("speculators-llama3.1-8b-eagle3"),
        )
        finding = one(speculators_verifier_matches(ctx))
        assert finding.severity == "warning" and "Llama-3.1-8B-Instruct" in finding.what

    def test_does_not_apply_to_raw_heads(self) -> None:
        ctx = context(
            "eagle3", target=catalog("Qwen/Qwen3-8B"), draft=fixture("eagle3-llama3.1-8b")
        )
        assert speculators_verifier_matches(ctx) == []

    def test_cannot_check_without_a_verifier(self) -> None:
        draft = ckpt(eagle=head(format="speculators", verifier_name=None))
        assert (
            one(
                speculators_verifier_matches(context("eagle3", target=ckpt(), draft=draft))
            ).severity
            == "info"
        )


class TestMtpLayersDeclared:
    def test_mtp_on_qwen3_8b_is_refused(self) -> None:
        finding = one(mtp_layers_declared(context("mtp", target=fixture("qwen3-8b"))))
        assert finding.severity == "error" and finding.exit_code == 4
        assert "declares no MTP layers" in finding.what
        # The fix names catalog models whose MTP this release serves, not a fixed example.
        assert "that vllm 0.32.0 serves (e.g. " in finding.fix
        named = finding.fix.split("(e.g. ")[1].split(")")[0].split(" or ")
        for model in named:
            info = catalog_info(model)
            assert info is not None and info.mtp_layers > 0

    def test_passes_for_mimo(self) -> None:
        assert mtp_layers_declared(context("mtp", target=fixture("mimo-7b-base"))) == []

    def test_does_not_apply_to_draft_models(self) -> None:
        assert (
            mtp_layers_declared(context(target=fixture("qwen3-8b"), draft=fixture("qwen3-0.6b")))
            == []
        )

    def test_cannot_check_an_unverified_catalog_count(self) -> None:
        ctx = context("mtp", target=catalog("Qwen/Qwen3-Next-80B-A3B-Instruct"))
        finding = one(mtp_layers_declared(ctx))
        assert finding.severity == "info"
        assert "mtp_layers not confirmed by its catalog source" in finding.what


class TestMtpWeightsPresent:
    def test_declared_layers_without_tensors_are_refused(self) -> None:
        finding = one(mtp_weights_present(context("mtp", target=fixture("mimo-7b-no-mtp-weights"))))
        assert finding.severity == "error" and "1 MTP layer(s)" in finding.what

    def test_passes_when_the_index_has_mtp_tensors(self) -> None:
        assert mtp_weights_present(context("mtp", target=fixture("mimo-7b-base"))) == []

    def test_does_not_apply_without_declared_layers(self) -> None:
        assert mtp_weights_present(context("mtp", target=fixture("qwen3-8b"))) == []

    def test_cannot_check_without_an_index(self) -> None:
        finding = one(
            mtp_weights_present(context("mtp", target=catalog("XiaomiMiMo/MiMo-7B-Base")))
        )
        assert finding.severity == "info" and "index" in finding.what


class TestRevisionsPinned:
    def test_unpinned_hub_models_warn_with_the_cached_sha(self) -> None:
        target = replace(catalog("Qwen/Qwen3-8B"), source="hf-cache", revision=SHA)
        ctx = context(target_model="Qwen/Qwen3-8B", draft_model="Qwen/Qwen3-0.6B", target=target)
        findings = revisions_pinned(ctx)
        assert [f.field for f in findings] == ["target.model", "proposer.model"]
        assert all(f.severity == "warning" for f in findings)
        assert SHA in findings[0].fix and "target.revision" in findings[0].fix

    def test_a_branch_name_is_not_a_pin(self) -> None:
        ctx = context("ngram", target_model="Qwen/Qwen3-8B", target_revision="main")
        assert one(revisions_pinned(ctx)).field == "target.model"

    def test_passes_when_pinned(self) -> None:
        ctx = context(
            target_model="Qwen/Qwen3-8B", target_revision=SHA,
            draft_model="Qwen/Qwen3-0.6B", draft_revision="v1.0",
        )  # fmt: skip
        assert revisions_pinned(ctx) == []

    def test_does_not_apply_to_local_directories(self) -> None:
        ctx = context(target_model="./models/qwen3-8b", draft_model="/models/qwen3-0.6b")
        assert revisions_pinned(ctx) == []


class TestTrtllmEagleCheckpoint:
    def test_an_eagle1_head_on_tensorrt_llm_is_refused(self) -> None:
        ctx = context(
            "eagle3",
            "trtllm",
            target=fixture("llama-3.1-8b-instruct"),
            draft=fixture("eagle1-llama3.1-8b"),
        )
        finding = one(trtllm_eagle_checkpoint(ctx))
        assert finding.severity == "error" and "EAGLE-1/2 head" in finding.what

    def test_passes_for_an_eagle3_head(self) -> None:
        ctx = context(
            "eagle3",
            "trtllm",
            target=fixture("llama-3.1-8b-instruct"),
            draft=fixture("eagle3-llama3.1-8b"),
        )
        assert trtllm_eagle_checkpoint(ctx) == []

    def test_does_not_apply_to_vllm(self) -> None:
        ctx = context(
            "eagle3", target=fixture("llama-3.1-8b-instruct"), draft=fixture("eagle1-llama3.1-8b")
        )
        assert trtllm_eagle_checkpoint(ctx) == []

    def test_cannot_check_an_unrecognised_checkpoint(self) -> None:
        draft = ckpt(num_hidden_layers=None)
        ctx = context("eagle3", "trtllm", target=ckpt(), draft=draft)
        assert one(trtllm_eagle_checkpoint(ctx)).severity == "info"


class TestTensorParallelShape:
    def test_heads_not_divisible_by_tp_are_refused(self) -> None:
        finding = one(
            tensor_parallel_shape(context("ngram", target=fixture("qwen2.5-7b-instruct"), tp=8))
        )
        assert finding.severity == "error" and finding.field == "target.model"
        assert "28 attention heads" in finding.what and "[1, 2, 4]" in finding.fix

    def test_kv_heads_that_neither_split_nor_replicate_are_refused(self) -> None:
        ctx = context("ngram", target=ckpt(num_attention_heads=24, num_key_value_heads=3), tp=2)
        assert "3 KV heads" in one(tensor_parallel_shape(ctx)).what

    def test_replicating_fewer_kv_heads_than_gpus_is_fine(self) -> None:
        ctx = context("ngram", target=fixture("llama-3.1-8b-instruct"), tp=16)
        assert tensor_parallel_shape(ctx) == []

    def test_the_draft_is_checked_at_its_own_tp(self) -> None:
        ctx = context(
            target=fixture("qwen2.5-7b-instruct"), draft=fixture("qwen2.5-1.5b-instruct"),
            tp=4, draft_tp=8,
        )  # fmt: skip
        finding = one(tensor_parallel_shape(ctx))
        assert finding.field == "proposer.model"
        # vLLM takes a draft TP of 1 or the target's: only 4 splits Qwen2.5-1.5B's 12 heads too.
        assert finding.fix == "set proposer.draft_tensor_parallel_size to 4"

    def test_never_proposes_a_draft_tp_the_engine_refuses(self) -> None:
        # Qwen2.5-1.5B has 12 heads and 2 KV heads: TP 8 cannot split them, and vLLM's other
        # choice for a draft_model (equal to the target's TP) is 8 again.
        ctx = context(
            target=fixture("llama-3.1-8b-instruct"), draft=fixture("qwen2.5-1.5b-instruct"),
            tp=8, draft_tp=8,
        )  # fmt: skip
        finding = one(tensor_parallel_shape(ctx))
        assert not finding.fix.startswith("set proposer.draft_tensor_parallel_size")
        assert finding.fix.startswith("set hardware.tensor_parallel_size to one of [1, 2, 4] ")

    def test_sglang_has_no_draft_tp_so_the_target_tp_is_proposed(self) -> None:
        ctx = context(
            "draft_model", "sglang",
            target=fixture("qwen2.5-7b-instruct"), draft=fixture("qwen2.5-1.5b-instruct"), tp=8,
        )  # fmt: skip
        fixes = [f.fix for f in tensor_parallel_shape(ctx)]
        assert fixes and all("draft_tensor_parallel_size" not in fix for fix in fixes)

    def test_does_not_check_a_draft_for_ngram(self) -> None:
        ctx = context("ngram", target=fixture("qwen3-8b"), draft=ckpt(num_attention_heads=7), tp=2)
        assert tensor_parallel_shape(ctx) == []

    def test_cannot_check_unknown_head_counts(self) -> None:
        ctx = context("ngram", target=ckpt(num_attention_heads=None), tp=2)
        assert one(tensor_parallel_shape(ctx)).severity == "info"


class TestMaxModelLenSupported:
    def test_longer_than_max_positions_is_refused(self) -> None:
        ctx = context("ngram", target=fixture("qwen3-8b"), max_model_len=65536)
        finding = one(max_model_len_supported(ctx))
        assert finding.severity == "error" and "limit 40960" in finding.what
        assert "serving.max_model_len: 40960" in finding.fix

    def test_yarn_scaling_in_the_config_extends_the_limit(self) -> None:
        target = ckpt(
            max_position_embeddings=32768, rope_type="yarn", rope_scaling_factor=4.0,
            original_max_position_embeddings=32768,
        )  # fmt: skip
        assert max_model_len_supported(context("ngram", target=target, max_model_len=131072)) == []
        too_long = context("ngram", target=target, max_model_len=131073)
        assert "rope_scaling yarn" in one(max_model_len_supported(too_long)).what

    def test_llama3_scaling_is_already_in_max_positions(self) -> None:
        ctx = context("ngram", target=fixture("llama-3.1-8b-instruct"), max_model_len=262144)
        assert "limit 131072" in one(max_model_len_supported(ctx)).what

    def test_a_shorter_draft_is_a_warning(self) -> None:
        ctx = context(
            target=catalog("Qwen/Qwen3-4B-Thinking-2507"), draft=catalog("Qwen/Qwen3-0.6B"),
            max_model_len=65536,
        )  # fmt: skip
        finding = one(max_model_len_supported(ctx))
        assert finding.severity == "warning" and finding.field == "proposer.model"

    def test_passes_within_limits(self) -> None:
        assert max_model_len_supported(context("ngram", target=fixture("qwen3-8b"))) == []

    def test_cannot_check_unknown_positions(self) -> None:
        ctx = context("ngram", target=ckpt(max_position_embeddings=None))
        assert one(max_model_len_supported(ctx)).severity == "info"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_no_rule_crashes_on_an_all_unknown_checkpoint(rule: Any) -> None:
    missing = ("config.json", "tokenizer.json", "model.safetensors.index.json or *.safetensors")
    bare = CheckpointInfo(ref="./bare", source="local", location="/bare", missing=missing)
    for method in ("draft_model", "eagle3", "mtp"):
        for engine in VERSIONS:
            draft = bare if method != "mtp" else None
            findings = rule(context(method, engine, target=bare, draft=draft))
            assert all(f.severity == "info" for f in findings), findings


def test_findings_name_the_profile_field_they_are_about() -> None:
    tokenizer = context(target=fixture("llama2-style-32k"), draft=fixture("mistral-style-32k"))
    assert one(draft_tokenizer_matches(tokenizer)).field == "proposer.model"
    assert one(mtp_layers_declared(context("mtp", target=fixture("qwen3-8b")))).field == (
        "proposer.method"
    )
    no_weights = context("mtp", target=fixture("mimo-7b-no-mtp-weights"))
    assert one(mtp_weights_present(no_weights)).field == "target.model"
    assert draft_tokenizer_matches.check.__name__ == "draft_tokenizer_matches"
