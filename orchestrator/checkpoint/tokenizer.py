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

from orchestrator.checkpoint import files
from orchestrator.checkpoint.files import BadValue, read_json_object
from orchestrator.checkpoint.info import TokenizerInfo

TOKENIZER_FILES = ("tokenizer.json", "vocab.json")


def read_tokenizer(directory: Path) -> TokenizerInfo | None:
    """Fingerprint the tokenizer in `directory`, or None when no readable vocabulary file exists
    (a SentencePiece `tokenizer.model` alone cannot be read without its protobuf schema).
    Raises `UnreadableMetadata` naming the file and key when a present file is unusable."""
    config_file = directory / "tokenizer_config.json"
    special = read_json_object(config_file) or {}
    tokenizer_json = read_json_object(directory / "tokenizer.json")
    if tokenizer_json is not None:
        source = "tokenizer.json"
        try:
            vocab = _model_vocab(tokenizer_json.get("model"))
            added = _added_tokens(tokenizer_json.get("added_tokens"))
        except BadValue as exc:
            raise exc.in_file(directory / source) from None
    else:
        vocab_json = read_json_object(directory / "vocab.json")
        if vocab_json is None:
            return None
        source = "vocab.json"
        vocab = {str(k): v for k, v in vocab_json.items() if _is_id(v)}
        try:
            added = _added_from_config(special.get("added_tokens_decoder"))
        except BadValue as exc:
            raise exc.in_file(config_file) from None
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
        return {str(k): v for k, v in vocab.items() if _is_id(v)}
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...]; the id is the position
        return {
            str(entry[0]): i for i, entry in enumerate(vocab) if isinstance(entry, list) and entry
        }
    return {}


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= files.MAX_COUNT


def _added_tokens(entries: Any) -> tuple[tuple[int, str, bool], ...]:
    if not isinstance(entries, list):
        return ()
    return tuple(
        (
            files.count(e["id"], f"added_tokens[{n}].id") or 0,
            str(e["content"]),
            bool(e.get("special", False)),
        )
        for n, e in enumerate(entries)
        if isinstance(e, dict) and e.get("id") is not None and "content" in e
    )


def _added_from_config(decoder: Any) -> tuple[tuple[int, str, bool], ...]:
    if not isinstance(decoder, dict):
        return ()
    return tuple(
        (int(k), str(v.get("content")), bool(v.get("special", False)))
        for k, v in decoder.items()
        if isinstance(v, dict) and k.isascii() and k.isdigit() and len(k) <= 16
    )


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        content = value.get("content")
        return str(content) if content is not None else None
    return str(value) if value is not None else None


def _sha256(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
