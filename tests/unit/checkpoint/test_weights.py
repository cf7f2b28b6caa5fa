"""Weight facts from the index and safetensors headers; MTP tensor detection."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

import pytest

from orchestrator.checkpoint.files import UnreadableMetadata
from orchestrator.checkpoint.weights import count_mtp_tensors, read_weight_facts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"


def _safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> None:
    header, offset = {}, 0
    for name, (dtype, shape, itemsize) in tensors.items():
        size = math.prod(shape) * itemsize
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def test_header_only_eagle3_file_gives_bytes_and_parameters() -> None:
    facts = read_weight_facts(FIXTURES / "eagle3-llama3.1-8b")
    assert facts is not None and facts.source == "headers"
    # 0.425 B parameters without embed_tokens: catalog.md §B1 (matches lmsys "0.4B").
    assert facts.param_count == 424_849_920
    d2t, t2d = 32000, 128256  # int64 and bool buffers; every other tensor is fp16
    assert facts.weight_bytes == 2 * (facts.param_count - d2t - t2d) + 8 * d2t + t2d
    assert "d2t" in facts.tensor_names and "fc.weight" in facts.tensor_names


def test_index_total_size_and_names() -> None:
    facts = read_weight_facts(FIXTURES / "qwen2.5-7b-instruct")
    assert facts is not None and facts.source == "index"
    assert facts.weight_bytes == 15_231_233_024 and facts.param_count is None
    assert "model.layers.27.mlp.down_proj.weight" in facts.tensor_names


def test_index_plus_complete_headers_gives_parameters(tmp_path: Path) -> None:
    _safetensors(tmp_path / "a.safetensors", {"x": ("BF16", [4, 8], 2), "y": ("F32", [3], 4)})
    weight_map = {"x": "a.safetensors", "y": "a.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    facts = read_weight_facts(tmp_path)
    assert facts is not None and facts.source == "index+headers"
    assert (facts.param_count, facts.weight_bytes) == (35, 76)


def test_nothing_to_read(tmp_path: Path) -> None:
    assert read_weight_facts(tmp_path) is None


def _header(entries: object) -> bytes:
    raw = json.dumps(entries).encode()
    return struct.pack("<Q", len(raw)) + raw


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\x01\x02", "shorter than a safetensors header"),
        (struct.pack("<Q", 2**40) + b"{}", "declares a 1099511627776-byte header"),
        (struct.pack("<Q", 300) + b"{}", "declares a 300-byte header but ends 2 bytes"),
        (struct.pack("<Q", 3) + b"abc", "has a header that is not valid JSON"),
        (_header([1, 2]), "has a header that is a list"),
        (_header({"w": {"dtype": "F16", "shape": [2], "data_offsets": ["0", "4"]}}),
         "`w.data_offsets[0]` is '0', not a whole number"),
        (_header({"w": {"dtype": "F16", "shape": 4, "data_offsets": [0, 8]}}),
         "`w.shape` is 4, not a list"),
        (_header({"w": {"dtype": "F16", "shape": [4], "data_offsets": [8, 0]}}),
         "`w.data_offsets` is [8, 0], not two ordered offsets"),
        (_header({"w": {"dtype": "F16", "shape": [2**40, 2**40], "data_offsets": [0, 8]}}),
         "`w.shape` holds more than 2^53 elements"),
    ],
)  # fmt: skip
def test_a_broken_header_makes_the_weights_unreadable(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(UnreadableMetadata, match=re.escape(problem)) as caught:
        read_weight_facts(tmp_path)  # a total from the remaining shards would be wrong
    assert caught.value.file == path


def test_an_index_total_size_must_be_a_finite_count(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"metadata": {"total_size": Infinity}, "weight_map": {}}')
    with pytest.raises(UnreadableMetadata, match=r"`metadata.total_size` is Infinity"):
        read_weight_facts(tmp_path)
    index.write_text('{"metadata": {"total_size": -5}, "weight_map": {}}')
    with pytest.raises(UnreadableMetadata, match=r"`metadata.total_size` is -5"):
        read_weight_facts(tmp_path)


def test_mtp_tensors_by_name_and_by_layer_number() -> None:
    names = (
        "model.layers.60.mlp.gate.weight",
        "model.layers.61.eh_proj.weight",  # DeepSeek-V3: the MTP layer is layer 61 of 61
        "model.mtp_layers.0.input_proj.weight",  # MiMo
        "mtp.fc.weight",  # Qwen3.5
        "model.nextn.norm.weight",
    )
    assert count_mtp_tensors(names, 61) == 4
    assert count_mtp_tensors(names[:1], 61) == 0
    assert count_mtp_tensors(("model.layers.61.x",), None) == 0
