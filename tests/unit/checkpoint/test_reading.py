"""config.json parsing and directory reading: the ground-truth table for the fixtures, the alias
table, nested text_config, MTP keys, quantization and RoPE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.checkpoint.files import UnreadableMetadata
from orchestrator.checkpoint.reading import info_from_config, mtp_layer_count, read_checkpoint_dir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"

# slug: facts read_checkpoint_dir must produce (trimmed real configs; generated tokenizers/indexes).
EXPECTED: dict[str, dict[str, Any]] = {
    "qwen2.5-7b-instruct": {"hidden_size": 3584, "num_attention_heads": 28, "kv_heads": 4,
                            "resolved_head_dim": 128, "vocab_size": 152064, "mtp_layers": 0,
                            "weight_bytes": 15_231_233_024, "tie_word_embeddings": False},
    "qwen2.5-1.5b-instruct": {"hidden_size": 1536, "vocab_size": 151936, "kv_heads": 2,
                              "tie_word_embeddings": True},
    "qwen3-8b": {"num_hidden_layers": 36, "head_dim": 128, "max_context": 40960,
                 "mtp_tensor_count": 0},
    "mimo-7b-base": {"architectures": ("MiMoForCausalLM",), "mtp_layers": 1,
                     "mtp_tensor_count": 7, "sliding_window": 32768},
    "mimo-7b-no-mtp-weights": {"mtp_layers": 1, "mtp_tensor_count": 0},
    "llama-3.1-8b-instruct": {"rope_type": "llama3", "rope_scaling_factor": 8.0,
                              "original_max_position_embeddings": 8192, "max_context": 131072},
    "llama-3.1-70b-instruct": {"hidden_size": 8192, "num_hidden_layers": 80},
    "eagle3-llama3.1-8b": {"num_hidden_layers": 1, "weight_bytes": 849_763_584,
                           "param_count": 424_849_920, "tokenizer": None},
    "llama2-style-32k": {"vocab_size": 32000, "weight_bytes": None, "mtp_tensor_count": None},
}  # fmt: skip


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_fixture_facts(slug: str) -> None:
    info = read_checkpoint_dir(
        FIXTURES / slug, ref=slug, source="local", location="here", revision=None
    )
    for name, expected in EXPECTED[slug].items():
        assert getattr(info, name) == expected, f"{slug}.{name}"


def test_missing_files_are_listed_not_guessed(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64}))
    info = read_checkpoint_dir(tmp_path, ref="x", source="local", location="x", revision=None)
    assert info.missing == ("tokenizer.json", "model.safetensors.index.json or *.safetensors")
    assert info.tokenizer is None and info.weight_bytes is None and info.mtp_tensor_count is None


def test_empty_directory_reads_as_all_unknown(tmp_path: Path) -> None:
    info = read_checkpoint_dir(tmp_path, ref="x", source="local", location="x", revision=None)
    assert "config.json" in info.missing and info.hidden_size is None and info.vocab_size is None


def _info(config: dict[str, Any]) -> Any:
    return info_from_config(config, ref="x", source="local", location="x", revision=None)


def test_aliases_of_other_families() -> None:
    info = _info({"n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024})
    assert (info.hidden_size, info.num_hidden_layers, info.num_attention_heads) == (768, 12, 12)
    assert info.max_position_embeddings == 1024 and info.kv_heads == 12


def test_moe_and_mla_fields_of_deepseek_v3() -> None:
    info = _info({"n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
                  "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
                  "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128})  # fmt: skip
    assert (info.num_experts, info.num_shared_experts, info.first_k_dense_replace) == (256, 1, 3)
    assert info.is_mla and info.qk_rope_head_dim == 64


def test_text_config_of_multimodal_wrappers_wins() -> None:
    info = _info({"architectures": ["X"], "hidden_size": 1, "text_config": {"hidden_size": 5120,
                  "num_hidden_layers": 64, "mtp_num_hidden_layers": 1}})  # fmt: skip
    assert info.hidden_size == 5120 and info.num_hidden_layers == 64 and info.mtp_layers == 1


@pytest.mark.parametrize(
    ("config", "layers"),
    [
        ({"num_nextn_predict_layers": 1}, 1),
        ({"mtp_num_hidden_layers": 2}, 2),
        ({"num_mtp_modules": 3}, 3),
        ({"mtp_config": {"num_nextn_predict_layers": 1}}, 1),
        ({"num_nextn_predict_layers": 0}, 0),
        ({}, 0),
    ],
)
def test_mtp_keys_of_every_family(config: dict[str, Any], layers: int) -> None:
    assert mtp_layer_count(config) == layers


def test_quantization_bits() -> None:
    fp8 = _info({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}})
    awq = _info({"quantization_config": {"quant_method": "awq", "bits": 4}})
    assert (fp8.quant_method, fp8.quant_bits) == ("fp8", 8.0)
    assert (awq.quant_method, awq.quant_bits) == ("awq", 4.0)


def test_modelopt_quant_config_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "hf_quant_config.json").write_text(
        json.dumps({"quantization": {"quant_algo": "NVFP4"}})
    )
    info = read_checkpoint_dir(tmp_path, ref="x", source="local", location="x", revision=None)
    assert (info.quant_method, info.quant_bits) == ("nvfp4", 4.0)


@pytest.mark.parametrize(
    ("rope", "limit"),
    [
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, 131072),
        ({"type": "linear", "factor": 2.0}, 65536),
        ({"rope_type": "llama3", "factor": 8.0}, 32768),
        (None, 32768),
    ],
)
def test_max_context_follows_rope_scaling(rope: dict[str, Any] | None, limit: int) -> None:
    info = _info({"max_position_embeddings": 32768, "rope_scaling": rope})
    assert info.max_context == limit


def test_gpt_oss_layer_types_and_dtype_key() -> None:
    info = _info({"layer_types": ["sliding_attention", "full_attention"], "dtype": "bfloat16"})
    assert info.layer_types == ("sliding_attention", "full_attention")
    assert info.torch_dtype == "bfloat16"


def test_a_readable_vocab_json_is_not_reported_missing(tmp_path: Path) -> None:
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0}))
    info = read_checkpoint_dir(tmp_path, ref="x", source="local", location="x", revision=None)
    assert info.tokenizer is not None and info.tokenizer.source_file == "vocab.json"
    assert "tokenizer.json" not in info.missing and "config.json" in info.missing


def test_a_damaged_config_is_unreadable_not_missing(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(UnreadableMetadata, match=r"config.json: is not valid JSON"):
        read_checkpoint_dir(tmp_path, ref="x", source="local", location="x", revision=None)


@pytest.mark.parametrize(
    ("config", "key", "problem"),
    [
        ('{"hidden_size": Infinity}', "hidden_size", "is Infinity, not a whole number"),
        ('{"architectures": 5}', "architectures", "is 5, not a list of strings"),
        ('{"num_attention_heads": -8}', "num_attention_heads", "is -8, outside 0..2^53"),
        ('{"vocab_size": true}', "vocab_size", "is true, not a whole number"),
        ('{"rope_scaling": {"factor": NaN}}', "rope_scaling.factor", "is NaN"),
        ('{"max_position_embeddings": 1e300}', "max_position_embeddings", "outside 0..2^53"),
        ('{"quantization_config": []}', "quantization_config", "is a list, not an object"),
    ],
)
def test_a_bad_value_names_its_file_and_key(
    tmp_path: Path, config: str, key: str, problem: str
) -> None:
    (tmp_path / "config.json").write_text(config)
    with pytest.raises(UnreadableMetadata) as caught:
        read_checkpoint_dir(tmp_path, ref="x", source="local", location="x", revision=None)
    assert caught.value.file == tmp_path / "config.json" and caught.value.key == key
    assert problem in caught.value.problem


def test_integral_floats_are_counts(tmp_path: Path) -> None:
    info = _info({"hidden_size": 4096.0, "num_hidden_layers": 32})
    assert info.hidden_size == 4096 and isinstance(info.hidden_size, int)
