"""Tokenizer fingerprints: content, not size; special tokens count; base vocabulary kept apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.checkpoint.tokenizer import read_tokenizer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"


def _write(directory: Path, vocab: Any, added: list[dict[str, Any]], **special: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    model = {"type": "BPE" if isinstance(vocab, dict) else "Unigram", "vocab": vocab}
    (directory / "tokenizer.json").write_text(
        json.dumps({"model": model, "added_tokens": added}), encoding="utf-8"
    )
    (directory / "tokenizer_config.json").write_text(json.dumps(special), encoding="utf-8")
    return directory


def test_same_size_other_tokens_differ(tmp_path: Path) -> None:
    a = read_tokenizer(FIXTURES / "llama2-style-32k")
    b = read_tokenizer(FIXTURES / "mistral-style-32k")
    assert a is not None and b is not None
    assert a.vocab_len == b.vocab_len == 32000
    assert a.fingerprint != b.fingerprint and a.vocab_fingerprint != b.vocab_fingerprint


def test_key_order_does_not_matter(tmp_path: Path) -> None:
    one = read_tokenizer(_write(tmp_path / "1", {"a": 0, "b": 1}, [], eos_token="b"))
    two = read_tokenizer(_write(tmp_path / "2", {"b": 1, "a": 0}, [], eos_token="b"))
    assert one is not None and two is not None and one.fingerprint == two.fingerprint


def test_same_ids_other_strings_differ(tmp_path: Path) -> None:
    one = read_tokenizer(_write(tmp_path / "1", {"a": 0, "b": 1}, []))
    two = read_tokenizer(_write(tmp_path / "2", {"b": 0, "a": 1}, []))
    assert one is not None and two is not None and one.fingerprint != two.fingerprint


def test_added_or_special_tokens_change_only_the_full_fingerprint(tmp_path: Path) -> None:
    base = read_tokenizer(_write(tmp_path / "1", {"a": 0}, [], eos_token="a"))
    added = [{"id": 1, "content": "<think>", "special": True}]
    more = read_tokenizer(_write(tmp_path / "2", {"a": 0}, added, eos_token="a"))
    other_eos = read_tokenizer(_write(tmp_path / "3", {"a": 0}, [], eos_token={"content": "b"}))
    assert base is not None and more is not None and other_eos is not None
    assert len({base.fingerprint, more.fingerprint, other_eos.fingerprint}) == 3
    assert base.vocab_fingerprint == more.vocab_fingerprint == other_eos.vocab_fingerprint
    assert more.vocab_len == 2 and other_eos.eos_token == "b"


def test_unigram_vocab_uses_positions(tmp_path: Path) -> None:
    info = read_tokenizer(_write(tmp_path, [["<unk>", 0.0], ["▁a", -1.0]], []))
    assert info is not None and info.vocab_len == 2


def test_vocab_json_fallback_with_added_tokens_decoder(tmp_path: Path) -> None:
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "b": 1}))
    decoder = {"2": {"content": "<|endoftext|>", "special": True}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": decoder}))
    info = read_tokenizer(tmp_path)
    assert info is not None and info.source_file == "vocab.json" and info.vocab_len == 3


def test_sentencepiece_model_alone_is_unknown(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.model").write_bytes(b"\x0a\x00")
    assert read_tokenizer(tmp_path) is None


def test_generated_fixture_tokenizers_load_in_the_tokenizers_library() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    for slug in ("qwen3-8b", "llama-3.1-8b-instruct", "llama2-style-32k"):
        loaded = tokenizers.Tokenizer.from_file(str(FIXTURES / slug / "tokenizer.json"))
        ours = read_tokenizer(FIXTURES / slug)
        assert ours is not None and loaded.get_vocab_size() == ours.vocab_len
