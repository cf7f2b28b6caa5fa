"""Comparisons of two checkpoints' metadata that several rules share: tokenizer identity (by file
content, else by documented family) and model-name normalisation for speculators verifiers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.checkpoint.catalog import tokenizer_family
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.checkpoint.names import normalise_model_name

__all__ = ["TokenizerComparison", "compare_tokenizers", "normalise_model_name"]

Verdict = Literal["same", "related", "different", "unknown"]
Basis = Literal["content", "family", "none"]


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
