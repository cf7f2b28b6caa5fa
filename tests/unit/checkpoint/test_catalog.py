"""The built-in catalog: every entry cited, no id twice, every config readable, heads bound to
catalogued targets, and a sample of derived facts checked against the public configs."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
import yaml

from orchestrator.checkpoint.catalog import (
    catalog_entries,
    catalog_entry,
    catalog_info,
    catalog_models,
    tokenizer_family,
)
from orchestrator.checkpoint.catalog.entries import SOURCED_FACTS
from orchestrator.checkpoint.compare import normalise_model_name
from orchestrator.checkpoint.info import CheckpointInfo, EagleHeadInfo
from orchestrator.checkpoint.resolution import looks_like_path
from orchestrator.datafiles import package_file
from tests.support import EXAMPLE_PROFILES, REPO_ROOT

MODELS_DIR = REPO_ROOT / "orchestrator" / "checkpoint" / "catalog" / "models"
# A GitHub file link must name a commit or a release tag, never a moving branch.
_GITHUB_BLOB = re.compile(r"https://github\.com/[^/]+/[^/]+/(blob|tree)/(?P<ref>[^/]+)/")
_PINNED_REF = re.compile(r"^([0-9a-f]{40}|v?\d+(\.\d+)+)$")
_SOURCE = re.compile(r"^(https://\S+|tokenizers\.json#[\w.-]+)")
#: Facts an entry may mark unverified: CheckpointInfo / EagleHeadInfo fields and config keys.
_KNOWN_FACTS = (
    {f.name for f in dataclasses.fields(CheckpointInfo)}
    | {f.name for f in dataclasses.fields(EagleHeadInfo)}
    | {"eos_token_id", "quant_method"}
)


def _all_entries() -> list[tuple[str, str, dict[str, Any]]]:
    """(file, hub id, entry) for every entry; a key written twice in one object fails the read."""
    found = []
    for path in sorted(MODELS_DIR.glob("*.json")):
        document = json.loads(path.read_text("utf-8"), object_pairs_hook=_no_duplicate_keys)
        found += [(path.name, name, entry) for name, entry in document["models"].items()]
    return found


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    assert not duplicates, f"keys written twice: {duplicates}"
    return dict(pairs)


ENTRIES = _all_entries()


def test_the_catalog_is_large_enough_and_split_by_family() -> None:
    roles = Counter(role for _, _, entry in ENTRIES for role in entry["roles"])
    assert len(ENTRIES) >= 120 and len(list(MODELS_DIR.glob("*.json"))) >= 10
    assert roles["target"] >= 70 and roles["head"] >= 40 and roles["draft"] >= 8


def test_no_hub_id_or_alias_appears_twice_ignoring_case() -> None:
    names = Counter()
    for _, model, entry in ENTRIES:
        for name in (model, *entry.get("aliases", ())):
            names[name.lower()] += 1
    assert [name for name, count in names.items() if count > 1] == []


@pytest.mark.parametrize(("file", "model", "entry"), ENTRIES, ids=[m for _, m, _ in ENTRIES])
def test_every_fact_names_a_public_pinned_source(file: str, model: str, entry: Any) -> None:
    data = entry
    sources = [*data["sources"], *data.get("fact_sources", {}).values()]
    sources += [a["source"] for a in data.get("published_acceptance", ())]
    for fact in SOURCED_FACTS:
        if data.get(fact) is not None:
            assert fact in data.get("fact_sources", {}), f"{model}: {fact} has no source"
    for source in sources:
        assert _SOURCE.match(source), f"{model}: {source!r} is not a URL"
        assert "catalog.md" not in source and "shared/reference" not in source
        pinned = _GITHUB_BLOB.match(source)
        assert pinned is None or _PINNED_REF.match(pinned["ref"]), f"{model}: {source} unpinned"


@pytest.mark.parametrize(("file", "model", "entry"), ENTRIES, ids=[m for _, m, _ in ENTRIES])
def test_every_config_parses_into_checkpoint_facts(file: str, model: str, entry: Any) -> None:
    data = entry
    info = catalog_info(model)
    assert info is not None and info.source == "catalog" and info.sources, model
    assert info.location.startswith("built-in catalog models/" + file)
    assert set(info.unverified) <= _KNOWN_FACTS, (model, info.unverified)
    family = info.tokenizer_family
    assert family is None or tokenizer_family(family) is not None, (model, family)
    if "head" in data["roles"]:
        assert info.eagle is not None and info.eagle.generation in ("eagle1", "eagle3"), model
        return
    complete = data.get("config_complete", True)
    assert info.architectures and info.num_hidden_layers, model
    if complete:
        assert info.hidden_size and info.vocab_size and info.max_context, model
        assert info.kv_heads or info.is_mla, model


def test_heads_name_a_verifier_the_catalog_knows() -> None:
    known = {normalise_model_name(m) for m in catalog_models()}
    for _, model, data in ENTRIES:
        if "head" not in data["roles"]:
            continue
        assert data.get("verifier"), f"{model} names no verifier"
        assert normalise_model_name(data["verifier"]) in known, (model, data["verifier"])


def test_published_acceptance_lengths_are_plausible_and_sourced() -> None:
    for entry in catalog_entries():
        for a in entry.published_acceptance:
            assert 1.0 < a.value <= 9.0 and a.dataset and a.engine and a.source, entry.model
            assert a.k is None or 1 <= a.k <= 16
    kimi = catalog_entry("AQ-MedAI/Kimi-K2-Instruct-eagle3")
    assert kimi is not None and kimi.verifier == "moonshotai/Kimi-K2-Instruct"
    mtbench = next(a for a in kimi.published_acceptance if a.dataset == "mtbench")
    assert (mtbench.value, mtbench.k, mtbench.engine) == (2.39, 3, "sglang")


class TestDerivedFacts:
    """Facts the rules and the memory model read, derived from the stored config.json fields."""

    def test_qwen3_next_is_48_layers_with_full_attention_every_4th(self) -> None:
        for model in ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Thinking"):
            info, entry = catalog_info(model), catalog_entry(model)
            assert info is not None and entry is not None
            assert (info.num_hidden_layers, info.num_experts, info.num_experts_per_tok) == (
                48,
                512,
                10,
            )
            assert entry.config["full_attention_interval"] == 4
            assert "mtp_layers" in info.unverified  # MTP weights, but no MTP key in the config
            assert info.layer_types is not None
            full = [i for i, kind in enumerate(info.layer_types) if kind == "full_attention"]
            assert full == list(range(3, 48, 4))

    def test_gpt_oss_alternates_sliding_128_and_full_attention(self) -> None:
        info = catalog_info("openai/gpt-oss-120b")
        assert info is not None and info.layer_types is not None
        assert info.sliding_window == 128 and info.num_hidden_layers == 36
        assert Counter(info.layer_types) == {"sliding_attention": 18, "full_attention": 18}
        assert (info.quant_method, info.quant_bits, info.num_experts) == ("mxfp4", 4.0, 128)
        assert info.tokenizer_family == "o200k-harmony"

    def test_deepseek_r1_is_mla_fp8_with_one_mtp_layer(self) -> None:
        info = catalog_info("deepseek-ai/DeepSeek-R1")
        assert info is not None and info.is_mla and info.kv_lora_rank == 512
        assert (info.mtp_layers, info.quant_method, info.num_experts) == (1, "fp8", 256)
        assert info.max_context == 163840

    def test_llama_33_70b_and_its_eagle3_heads(self) -> None:
        target = catalog_info("meta-llama/Llama-3.3-70B-Instruct")
        assert target is not None and (target.hidden_size, target.num_hidden_layers) == (8192, 80)
        assert target.max_context == 131072 and target.tokenizer_family == "llama3"
        head = catalog_info("yuhuili/EAGLE3-LLaMA3.3-Instruct-70B")
        assert head is not None and head.eagle is not None
        assert (head.eagle.generation, head.eagle.target_hidden_size) == ("eagle3", 8192)
        assert head.eagle.hidden_size is None and "hidden_size" in head.unverified

    def test_the_8b_eagle3_head_matches_its_training_config(self) -> None:
        head = catalog_info("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
        assert head is not None and head.eagle is not None
        assert (head.eagle.generation, head.eagle.draft_vocab_size, head.eagle.has_d2t) == (
            "eagle3", 32000, True,
        )  # fmt: skip
        assert (head.hidden_size, head.vocab_size, head.num_hidden_layers) == (4096, 128256, 1)

    def test_the_nvidia_blog_id_resolves_offline(self) -> None:
        entry = catalog_entry("nvidia/gpt-oss-120b-Eagle3")
        info = catalog_info("nvidia/gpt-oss-120b-Eagle3")
        assert entry is not None and entry.verifier == "openai/gpt-oss-120b"
        assert info is not None and info.eagle is not None and info.eagle.format == "modelopt"

    def test_modelopt_fp8_comes_from_hf_quant_config(self) -> None:
        info = catalog_info("nvidia/Llama-3.1-70B-Instruct-FP8")
        assert info is not None and (info.quant_method, info.quant_bits) == ("fp8", 8.0)

    def test_multimodal_configs_read_their_text_config(self) -> None:
        info = catalog_info("Qwen/Qwen3-VL-235B-A22B-Instruct")
        assert info is not None and info.architectures == ("Qwen3VLMoeForConditionalGeneration",)
        assert (info.hidden_size, info.num_hidden_layers, info.num_experts) == (4096, 94, 128)

    def test_trimmed_and_partial_sources_mark_what_they_cannot_confirm(self) -> None:
        glm = catalog_info("zai-org/GLM-4.7-FP8")
        assert glm is not None and {"mtp_layers", "quant_method"} <= set(glm.unverified)

    def test_gemma_3_fills_what_its_text_config_leaves_to_the_class_defaults(self) -> None:
        # The file names 10 text keys; vocab, window pattern and tied embeddings are defaults.
        gemma = catalog_info("google/gemma-3-27b-it")
        assert gemma is not None and gemma.layer_types is not None
        assert (gemma.vocab_size, gemma.sliding_window, gemma.tie_word_embeddings) == (
            262208,
            1024,
            True,
        )
        assert Counter(gemma.layer_types) == {"sliding_attention": 52, "full_attention": 10}
        small = catalog_info("google/gemma-3-4b-it")
        assert small is not None
        assert (small.num_attention_heads, small.num_key_value_heads, small.head_dim) == (8, 4, 256)

    def test_weight_bytes_come_from_an_index_or_a_file_size(self) -> None:
        coder = catalog_info("Qwen/Qwen3-Coder-30B-A3B-Instruct")
        assert coder is not None and coder.weight_bytes == 61064245248
        gpt_oss = catalog_info("openai/gpt-oss-120b")
        assert gpt_oss is not None and gpt_oss.weight_bytes is None  # Kaito's size counts original/


def test_every_hub_model_in_the_example_profiles_is_in_the_catalog() -> None:
    for path in EXAMPLE_PROFILES:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for section in ("target", "proposer"):
            model = (doc.get(section) or {}).get("model")
            if model and not looks_like_path(model):
                assert catalog_info(model) is not None, f"{path.name}: {model}"


def test_the_family_file_shortcut_finds_what_the_whole_index_finds() -> None:
    # catalog_entry reads the family files whose name a model id contains first; for every id
    # and alias that must give the entry the full index gives.
    from orchestrator.checkpoint.catalog import _index

    for name, (model, _, location) in _index().items():
        entry = catalog_entry(name)
        assert entry is not None and entry.model == model, name
        assert entry.location == location, name


def test_lookup_by_alias_or_case_keeps_the_profile_spelling() -> None:
    info = catalog_info("META-LLAMA/Meta-Llama-3.1-8B-Instruct")
    assert info is not None and info.ref == "META-LLAMA/Meta-Llama-3.1-8B-Instruct"
    assert info.hidden_size == 4096 and "meta-llama/Llama-3.1-8B-Instruct" in info.location


def test_documented_tokenizer_relationships() -> None:
    qwen3 = tokenizer_family("qwen3")
    assert qwen3 is not None and qwen3.extends == "qwen2.5" and qwen3.vocab_len == 151669
    small = catalog_info("Qwen/Qwen2.5-1.5B-Instruct")
    large = catalog_info("Qwen/Qwen2.5-7B-Instruct")
    assert small is not None and large is not None
    assert small.tokenizer_family == large.tokenizer_family == "qwen2.5"
    assert (small.vocab_size, large.vocab_size) == (151936, 152064)
    for family in ("llama3", "qwen2.5", "qwen3", "o200k-harmony"):
        found = tokenizer_family(family)
        assert found is not None and found.source.startswith("https://")


def test_unknown_models_are_not_in_the_catalog() -> None:
    assert catalog_info("acme/no-such-model") is None


def test_the_catalog_is_read_only_when_resolution_reaches_it() -> None:
    code = (
        "import orchestrator.checkpoint.resolution, orchestrator.checkpoint.catalog as c;"
        "assert c._file_entries.cache_info().currsize == 0;"
        "c.catalog_info('Qwen/Qwen3-8B');"
        "assert c._file_entries.cache_info().currsize == 1;"  # qwen3.json alone
        "assert c._raw_entries.cache_info().currsize == 0"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)
    assert package_file("orchestrator.checkpoint.catalog", "models") == MODELS_DIR
