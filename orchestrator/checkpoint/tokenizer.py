"""Tokenizer fingerprints from `tokenizer.json` / `vocab.json` + `tokenizer_config.json`.

Two tokenizers are "the same" when they map the same strings to the same ids and agree on their
special tokens; the size alone proves nothing (Llama-2 and Mistral both have 32000 tokens). The
files are parsed as plain JSON; the `tokenizers` library is not needed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from orchestrator.checkpoint.files import read_json_object
from orchestrator.checkpoint.info import TokenizerInfo

TOKENIZER_FILES = ("tokenizer.json", "vocab.json")


def read_tokenizer(directory: Path) -> TokenizerInfo | None:
    """Fingerprint the tokenizer in `directory`, or None when no readable vocabulary file exists
    (a SentencePiece `tokenizer.model` alone cannot be read without its protobuf schema)."""
    special = read_json_object(directory / "tokenizer_config.json") or {}
    tokenizer_json = read_json_object(directory / "tokenizer.json")
    if tokenizer_json is not None:
        vocab = _model_vocab(tokenizer_json.get("model"))
        added = _added_tokens(tokenizer_json.get("added_tokens"))
        source = "tokenizer.json"
    else:
        vocab_json = read_json_object(directory / "vocab.json")
        if vocab_json is None:
            return None
        vocab = {str(k): int(v) for k, v in vocab_json.items() if isinstance(v, int)}
        added = _added_from_config(special.get("added_tokens_decoder"))
        source = "vocab.json"
    if not vocab and not added:
        return None
    return fingerprint(vocab, added, special, source_file=source)


def fingerprint(
    vocab: dict[str, int],
    added: tuple[tuple[int, str, bool], ...],
    special: dict[str, Any],
    *,
    source_file: str,
) -> TokenizerInfo:
    """Build a TokenizerInfo from a token->id map, added tokens (id, content, special) and the
    special-token settings of tokenizer_config.json."""
    bos, eos = _token_text(special.get("bos_token")), _token_text(special.get("eos_token"))
    base = sorted(vocab.items(), key=lambda kv: (kv[1], kv[0]))
    full = {
        "vocab": base,
        "added": sorted(added),
        "special": {
            "bos": bos,
            "eos": eos,
            "unk": _token_text(special.get("unk_token")),
            "pad": _token_text(special.get("pad_token")),
        },
    }
    ids = set(vocab.values()) | {token_id for token_id, _, _ in added}
    return TokenizerInfo(
        fingerprint=_sha256(full),
        vocab_len=len(ids),
        bos_token=bos,
        eos_token=eos,
        source_file=source_file,
        vocab_fingerprint=_sha256(base),
    )


def _model_vocab(model: Any) -> dict[str, int]:
    if not isinstance(model, dict):
        return {}
    vocab = model.get("vocab")
    if isinstance(vocab, dict):  # BPE, WordPiece, WordLevel
        return {str(k): int(v) for k, v in vocab.items() if isinstance(v, int)}
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...]; the id is the position
        return {str(entry[0]): i for i, entry in enumerate(vocab) if isinstance(entry, list)}
    return {}


def _added_tokens(entries: Any) -> tuple[tuple[int, str, bool], ...]:
    if not isinstance(entries, list):
        return ()
    return tuple(
        (int(e["id"]), str(e["content"]), bool(e.get("special", False)))
        for e in entries
        if isinstance(e, dict) and "id" in e and "content" in e
    )


def _added_from_config(decoder: Any) -> tuple[tuple[int, str, bool], ...]:
    if not isinstance(decoder, dict):
        return ()
    return tuple(
        (int(k), str(v.get("content")), bool(v.get("special", False)))
        for k, v in decoder.items()
        if isinstance(v, dict) and str(k).isdigit()
    )


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        content = value.get("content")
        return str(content) if content is not None else None
    return str(value) if value is not None else None


def _sha256(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
