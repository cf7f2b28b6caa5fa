"""Model names as hub ids and local paths spell them, reduced to what identifies the model."""

from __future__ import annotations

import re

# Suffixes quantizers append to a model name: a speculators head records its verifier by such a
# name, or by a local path, so normalise before comparing (e.g. the verifier of
# https://huggingface.co/RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3/commit/5b6cee4e4955edb3c90f2a39d1d804fbee5ce0ae).
_QUANT_SUFFIX = re.compile(
    r"(-(fp8(-dynamic)?|fp4|nvfp4|mxfp4|awq|gptq(-int[48])?|int[48]|w4a16|w8a8|w8a16|bnb-4bit"
    r"|quantized\.[\w.]+))+$"
)


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
