"""EAGLE head recognition from config fields and tensor names, never the repository name."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.checkpoint.eagle import eagle_head_info

VERIFIER = {
    "name_or_path": "meta-llama/Llama-3.1-8B-Instruct",
    "architectures": ["LlamaForCausalLM"],
}


@pytest.mark.parametrize(
    ("config", "names", "generation", "head_format"),
    [
        ({"speculators_model_type": "eagle3"}, None, "eagle3", "speculators"),
        ({"speculators_model_type": "eagle"}, None, "eagle1", "speculators"),
        ({"architectures": ["LlamaForCausalLMEagle3"]}, None, "eagle3", "specforge"),
        ({"architectures": ["Eagle3DraftModel"]}, None, "eagle3", "speculators"),
        ({"architectures": ["Eagle3LlamaForCausalLM"]}, None, "eagle3", "raw"),
        ({"architectures": ["LlamaForCausalLMEagle"]}, None, "eagle1", "raw"),
        ({"draft_vocab_size": 32000}, None, "eagle3", "raw"),
        (
            {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}},
            None,
            "eagle3",
            "modelopt",
        ),
        ({"architectures": ["LlamaForCausalLM"]}, ("fc.weight", "d2t"), "eagle3", "raw"),
        ({"architectures": ["LlamaForCausalLM"]}, ("fc.weight",), "eagle1", "raw"),
        ({"model_type": "llama", "num_hidden_layers": 1}, None, "eagle1", "raw"),
    ],
)
def test_generation_and_format(
    config: dict[str, Any], names: tuple[str, ...] | None, generation: str, head_format: str
) -> None:
    head = eagle_head_info(config, names)
    assert head is not None and (head.generation, head.format) == (generation, head_format)


@pytest.mark.parametrize(
    ("config", "names"),
    [
        ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32}, None),
        ({"model_type": "llama", "num_hidden_layers": 1}, ("model.layers.0.x",)),
        ({"speculators_model_type": "dflash"}, None),
    ],
)
def test_language_models_and_other_drafters_are_not_heads(
    config: dict[str, Any], names: tuple[str, ...] | None
) -> None:
    assert eagle_head_info(config, names) is None


def test_speculators_fields_come_from_the_layer_config_and_verifier() -> None:
    config = {
        "speculators_model_type": "eagle3",
        "draft_vocab_size": 32000,
        "target_hidden_size": 8192,
        "eagle_aux_hidden_state_layer_ids": [2, 40, 77],
        "transformer_layer_config": {"hidden_size": 6144, "vocab_size": 128256},
        "speculators_config": {"verifier": VERIFIER},
    }
    head = eagle_head_info(config, ("d2t", "t2d"))
    assert head is not None
    assert (head.hidden_size, head.target_hidden_size, head.vocab_size) == (6144, 8192, 128256)
    assert head.aux_layer_ids == (2, 40, 77) and head.has_d2t is True
    assert head.verifier_name == VERIFIER["name_or_path"]
    assert head.verifier_architectures == ("LlamaForCausalLM",)


def test_target_hidden_size_defaults_to_the_head_width() -> None:
    head = eagle_head_info({"draft_vocab_size": 32000, "hidden_size": 4096}, None)
    assert head is not None and head.target_hidden_size == 4096 and head.has_d2t is None
