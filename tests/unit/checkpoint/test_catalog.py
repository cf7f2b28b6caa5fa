"""The built-in catalog covers the example profiles and the reference models, each cited."""

from __future__ import annotations

import yaml

from orchestrator.checkpoint.catalog import catalog_info, catalog_models, tokenizer_family
from orchestrator.checkpoint.resolution import looks_like_path
from tests.support import EXAMPLE_PROFILES

PROFILE_MODELS = (
    "Qwen/Qwen3-4B-Thinking-2507", "Qwen/Qwen3-0.6B", "XiaomiMiMo/MiMo-7B-Base",
    "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "meta-llama/Llama-3.1-8B-Instruct",
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
)  # fmt: skip


def test_every_model_in_the_brief_is_in_the_catalog() -> None:
    for model in PROFILE_MODELS:
        assert catalog_info(model) is not None, model
    assert len(catalog_models()) >= 27  # + everything in shared/reference/catalog_configs.json


def test_every_hub_model_in_the_example_profiles_is_in_the_catalog() -> None:
    for path in EXAMPLE_PROFILES:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for section in ("target", "proposer"):
            model = (doc.get(section) or {}).get("model")
            if model and not looks_like_path(model):
                assert catalog_info(model) is not None, f"{path.name}: {model}"


def test_every_entry_is_cited_and_names_a_known_family() -> None:
    for model in catalog_models():
        info = catalog_info(model)
        assert info is not None and info.source == "catalog" and info.sources, model
        family = info.tokenizer_family
        assert family is None or tokenizer_family(family) is not None, (model, family)
        assert info.eagle is not None or family is not None, f"{model}: no way to compare"


def test_lookup_is_case_insensitive_and_keeps_the_profile_spelling() -> None:
    info = catalog_info("qwen/qwen3-8b")
    assert info is not None and info.ref == "qwen/qwen3-8b" and info.hidden_size == 4096


def test_documented_relationships() -> None:
    qwen3 = tokenizer_family("qwen3")
    assert qwen3 is not None and qwen3.extends == "qwen2.5" and qwen3.vocab_len == 151669
    small = catalog_info("Qwen/Qwen2.5-1.5B-Instruct")
    large = catalog_info("Qwen/Qwen2.5-7B-Instruct")
    assert small is not None and large is not None
    assert small.tokenizer_family == large.tokenizer_family
    assert (small.vocab_size, large.vocab_size) == (151936, 152064)


def test_heads_and_mtp_facts() -> None:
    head = catalog_info("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert head is not None and head.eagle is not None
    assert (head.eagle.generation, head.eagle.draft_vocab_size, head.eagle.has_d2t) == (
        "eagle3", 32000, True,
    )  # fmt: skip
    eagle1 = catalog_info("yuhuili/EAGLE-LLaMA3.1-Instruct-8B")
    assert eagle1 is not None and eagle1.eagle is not None and eagle1.eagle.generation == "eagle1"
    mimo = catalog_info("XiaomiMiMo/MiMo-7B-Base")
    assert mimo is not None and mimo.mtp_layers == 1 and mimo.mtp_tensor_count is None
    llama = catalog_info("meta-llama/Llama-3.1-8B-Instruct")
    assert llama is not None and llama.weight_bytes == int(14.96 * 2**30)


def test_unknown_models_are_not_in_the_catalog() -> None:
    assert catalog_info("acme/no-such-model") is None
