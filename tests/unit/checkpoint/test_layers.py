"""Per-layer kinds and recurrent state from every way config.json spells them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrator.checkpoint.catalog import catalog_info
from orchestrator.checkpoint.files import UnreadableMetadata
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.checkpoint.reading import info_from_config, read_checkpoint_dir
from orchestrator.memory.formulas import attention_layout, param_breakdown

#: google/gemma-3-4b-it config.json as published (https://huggingface.co/google/gemma-3-4b-it/
#: blob/main/config.json): the text_config names 6 keys, transformers' Gemma3TextConfig the rest.
GEMMA_3_4B = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "boi_token_index": 255999,
    "eoi_token_index": 256000,
    "eos_token_id": [1, 106],
    "image_token_index": 262144,
    "initializer_range": 0.02,
    "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "model_type": "gemma3_text",
        "num_hidden_layers": 34,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
    },
    "torch_dtype": "bfloat16",
    "transformers_version": "4.50.0.dev0",
    "vision_config": {
        "hidden_size": 1152,
        "image_size": 896,
        "intermediate_size": 4304,
        "model_type": "siglip_vision_model",
        "num_attention_heads": 16,
        "num_hidden_layers": 27,
        "patch_size": 14,
        "vision_use_head": False,
    },
}


def read(config: dict[str, Any]) -> CheckpointInfo:
    return info_from_config(config, ref="m", source="local", location="test", revision=None)


class TestMultimodalTextConfig:
    def test_gemma_3_gets_the_class_defaults_its_file_leaves_out(self) -> None:
        info = read(GEMMA_3_4B)
        assert (info.num_attention_heads, info.num_key_value_heads, info.head_dim) == (8, 4, 256)
        assert (info.vocab_size, info.max_position_embeddings) == (262208, 131072)
        assert info.tie_word_embeddings is True

    def test_gemma_3_4b_counts_its_published_4_3b_parameters(self) -> None:
        # The model card says 4.3 B: 3.88 B language model + ~0.42 B SigLIP tower and projector.
        info = read(GEMMA_3_4B)
        params = param_breakdown(info)
        assert params is not None and info.vision_params is not None
        assert 0.40e9 < info.vision_params < 0.44e9
        assert params.total == pytest.approx(4.30e9, rel=0.02)

    def test_every_sixth_layer_is_global(self) -> None:
        kinds = read(GEMMA_3_4B).layer_types
        assert kinds is not None and len(kinds) == 34
        assert [i for i, k in enumerate(kinds) if k == "full_attention"] == [5, 11, 17, 23, 29]

    def test_a_value_in_the_file_beats_the_class_default(self) -> None:
        config = {**GEMMA_3_4B, "text_config": {**GEMMA_3_4B["text_config"], "vocab_size": 1000}}
        assert read(config).vocab_size == 1000


class TestLayerPatterns:
    def test_gemma_2_alternates_sliding_and_full_and_ties_embeddings(self) -> None:
        info = read(
            {
                "model_type": "gemma2",
                "num_hidden_layers": 42,
                "hidden_size": 3584,
                "num_attention_heads": 16,
                "sliding_window": 4096,
            }
        )
        assert info.layer_types is not None
        assert info.layer_types[:2] == ("sliding_attention", "full_attention")
        assert Counter(info.layer_types) == {"sliding_attention": 21, "full_attention": 21}
        assert info.tie_word_embeddings is True  # Gemma2Config's default, never written

    def test_qwen3_next_interval_gives_12_full_of_48(self) -> None:
        info = catalog_info("Qwen/Qwen3-Next-80B-A3B-Instruct")
        assert info is not None and info.layer_types is not None
        assert Counter(info.layer_types) == {"linear_attention": 36, "full_attention": 12}

    def test_llama_4_nope_layers_are_full_and_the_rest_chunked(self) -> None:
        info = catalog_info("meta-llama/Llama-4-Scout-17B-16E-Instruct")
        assert info is not None and info.layer_types is not None
        assert info.attention_chunk_size == 8192
        assert [i for i, k in enumerate(info.layer_types) if k == "full_attention"] == list(
            range(3, 48, 4)
        )

    def test_llama_4_without_an_explicit_list_uses_the_interval(self) -> None:
        info = read({"model_type": "llama4_text", "num_hidden_layers": 8, "hidden_size": 64})
        assert info.layer_types == ("chunked_attention",) * 3 + ("full_attention",) + (
            "chunked_attention",
        ) * 3 + ("full_attention",)

    def test_nemotron_h_pattern_string(self) -> None:
        info = read(
            {
                "model_type": "nemotron_h",
                "num_hidden_layers": 6,
                "hybrid_override_pattern": "M-M*-E",
            }
        )
        assert info.layer_types == (
            "linear_attention",
            "mlp",
            "linear_attention",
            "full_attention",
            "mlp",
            "mlp",
        )

    def test_a_pattern_with_an_unknown_layer_is_unreadable_not_guessed(
        self, tmp_path: Path
    ) -> None:
        (tmp_path / "config.json").write_text(
            '{"model_type": "nemotron_h", "hybrid_override_pattern": "M*X"}', encoding="utf-8"
        )
        with pytest.raises(UnreadableMetadata) as caught:
            read_checkpoint_dir(tmp_path, ref="m", source="local", location="x", revision=None)
        assert "hybrid_override_pattern" in str(caught.value) and "'X'" in str(caught.value)

    def test_a_layer_kind_specdeploy_does_not_know_costs_full_attention(self) -> None:
        info = read(
            {
                "model_type": "x",
                "num_hidden_layers": 3,
                "hidden_size": 64,
                "num_attention_heads": 4,
                "layer_types": ["full_attention", "differential_attention", "mlp"],
            }
        )
        layout = attention_layout(info)
        assert (layout.full, layout.linear, layout.sliding) == (2, 0, 0)

    def test_no_pattern_means_every_layer_is_full_attention(self) -> None:
        info = read({"model_type": "llama", "num_hidden_layers": 4, "sliding_window": None})
        assert info.layer_types is None


class TestRecurrentState:
    def test_gated_deltanet_shape(self) -> None:
        info = catalog_info("Qwen/Qwen3-Next-80B-A3B-Instruct")
        assert info is not None and info.recurrent_state is not None
        state = info.recurrent_state
        # conv: 128 x 16 x 2 (q, k) + 128 x 32 (v) channels; state: 32 v-heads x 128 x 128
        assert (state.kind, state.conv_channels, state.conv_kernel) == ("gated_delta_net", 8192, 4)
        assert (state.state_heads, state.state_dims, state.state_dtype) == (32, (128, 128), None)

    def test_mamba2_shape_keeps_its_float32_state(self) -> None:
        info = catalog_info("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
        assert info is not None and info.recurrent_state is not None
        state = info.recurrent_state
        assert state.kind == "mamba2" and state.state_dtype == "float32"
        # conv channels: heads x head_dim + 2 x groups x state size
        assert state.conv_channels == 64 * 64 + 2 * 8 * 128
