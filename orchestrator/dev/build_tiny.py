"""Build tiny random-weight Llama checkpoints with a local word-level tokenizer (no hub access).

Run as a script by the Python that has torch, transformers and tokenizers (the vLLM referee venv):
    python build_tiny.py '<json plan>'
It imports nothing from specdeploy, so it works in an environment where specdeploy is not
installed. `orchestrator.dev.tiny_models` writes the plan and calls it; use that instead.

Why these shapes: head_dim 32 because vLLM's CPU attention backend accepts only head sizes
[32, 64, 80, 96, 112, 128, ...] (64/4 = 16 is refused;
https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/attention/backends/cpu_attn.py#L68-L70); a chat template so /v1/chat/completions works ("default chat template is no longer
allowed").
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")


def main(argv: list[str]) -> int:
    plan = json.loads(argv[1])
    for model in plan["models"]:
        build_model(Path(model["path"]), model)
    return 0


def build_model(path: Path, spec: dict[str, Any]) -> None:
    """Write config.json, model.safetensors, tokenizer files and generation_config.json."""
    torch: Any = importlib.import_module("torch")
    transformers: Any = importlib.import_module("transformers")
    torch.manual_seed(spec["seed"])
    tokenizer = build_tokenizer(spec["vocab_prefix"], spec["vocab_words"])
    config = transformers.LlamaConfig(
        vocab_size=spec["vocab_size"],
        hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"],
        num_hidden_layers=spec["num_hidden_layers"],
        num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=spec["num_key_value_heads"],
        head_dim=spec["head_dim"],
        max_position_embeddings=spec["max_position_embeddings"],
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    model = transformers.LlamaForCausalLM(config)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path), safe_serialization=True)
    tokenizer.save_pretrained(str(path))


def build_tokenizer(prefix: str, words: int) -> Any:
    """A whitespace-split word-level tokenizer: specials, a-z, then `<prefix>0..<prefix>N-1`."""
    tokenizers: Any = importlib.import_module("tokenizers")
    transformers: Any = importlib.import_module("transformers")
    vocab: dict[str, int] = {}
    for token in (*SPECIAL_TOKENS, *"abcdefghijklmnopqrstuvwxyz"):
        vocab[token] = len(vocab)
    for index in range(words):
        vocab[f"{prefix}{index}"] = len(vocab)
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    core.decoder = tokenizers.decoders.WordPiece(prefix="##")  # joins words with spaces
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=4096,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))
