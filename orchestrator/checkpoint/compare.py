"""Comparisons of two checkpoints' metadata that several rules share: tokenizer identity (by file
content, else by documented family) and model-name normalisation for speculators verifiers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from orchestrator.checkpoint.catalog import tokenizer_family
from orchestrator.checkpoint.info import CheckpointInfo

Verdict = Literal["same", "related", "different", "unknown"]
Basis = Literal["content", "family", "none"]

# Suffixes quantizers append to a model name: a speculators head records its verifier by such a
# name, or by a local path, so normalise before comparing (e.g. the verifier of
# https://huggingface.co/RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3/commit/5b6cee4e4955edb3c90f2a39d1d804fbee5ce0ae).
_QUANT_SUFFIX = re.compile(
    r"(-(fp8(-dynamic)?|fp4|nvfp4|mxfp4|awq|gptq(-int[48])?|int[48]|w4a16|w8a8|w8a16|bnb-4bit"
    r"|quantized\.[\w.]+))+$"
)


@dataclass(frozen=True)
class TokenizerComparison:
    """Whether two checkpoints share a tokenizer, and what the answer rests on."""

    verdict: Verdict
    """same; related (one adds tokens to the other, shared ids agree); different; unknown."""
    basis: Basis
    detail: str
    """What was compared, with the values, for the finding's `what`."""


def compare_tokenizers(target: CheckpointInfo, draft: CheckpointInfo) -> TokenizerComparison:
    """Compare tokenizer files when both are available, else documented catalog families."""
    t, d = target.tokenizer, draft.tokenizer
    if t is not None and d is not None:
        detail = (
            f"{t.source_file} content: target {t.vocab_len} tokens (sha256 {t.fingerprint[:12]}), "
            f"draft {d.vocab_len} tokens (sha256 {d.fingerprint[:12]})"
        )
        if t.fingerprint == d.fingerprint:
            return TokenizerComparison("same", "content", detail)
        if t.vocab_fingerprint is not None and t.vocab_fingerprint == d.vocab_fingerprint:
            return TokenizerComparison("related", "content", detail + "; same base vocabulary")
        return TokenizerComparison("different", "content", detail)
    tf, df = target.tokenizer_family, draft.tokenizer_family
    if tf is not None and df is not None:
        detail = (
            f"documented tokenizer family (built-in catalog, not file content): "
            f"target {tf!r}, draft {df!r}"
        )
        if tf == df:
            return TokenizerComparison("same", "family", detail)
        if _extends(tf, df) or _extends(df, tf):
            return TokenizerComparison("related", "family", detail)
        return TokenizerComparison("different", "family", detail)
    return TokenizerComparison("unknown", "none", _unknown_detail(target, draft))


def normalise_model_name(name: str) -> tuple[str | None, str]:
    """(org, name) in lower case, from a hub id or the last two components of a local path, with
    quantization suffixes removed: "/x/meta-llama/Llama-3.1-8B-Instruct-FP8" ->
    ("meta-llama", "llama-3.1-8b-instruct")."""
    parts = [p for p in name.strip().rstrip("/").split("/") if p and p not in (".", "..")]
    if not parts:
        return None, ""
    model = _QUANT_SUFFIX.sub("", parts[-1].lower())
    org = parts[-2].lower() if len(parts) >= 2 else None
    return org, model


def _extends(child: str, parent: str) -> bool:
    family = tokenizer_family(child)
    return family is not None and family.extends == parent


def _unknown_detail(target: CheckpointInfo, draft: CheckpointInfo) -> str:
    unknown = [
        f"{role} {info.ref}"
        for role, info in (("target", target), ("draft", draft))
        if info.tokenizer is None and info.tokenizer_family is None
    ]
    if unknown:
        return f"no tokenizer.json/vocab.json for {' and '.join(unknown)}"
    return (
        "one tokenizer is known by file content, the other only by documented family "
        f"(target: {_describe(target)}; draft: {_describe(draft)})"
    )


def _describe(info: CheckpointInfo) -> str:
    if info.tokenizer is not None:
        return f"{info.tokenizer.source_file} of {info.ref}"
    return f"family {info.tokenizer_family!r} of {info.ref}"
