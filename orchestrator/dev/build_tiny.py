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
        if "layered" in model:
            build_layered(Path(model["path"]), model)
        else:
            build_model(Path(model["path"]), model)
    return 0


def build_model(path: Path, spec: dict[str, Any]) -> None:
    """Write config.json, model.safetensors, tokenizer files and generation_config.json."""
    model, tokenizer = random_model(spec)
    save(model, tokenizer, path)


def build_layered(path: Path, spec: dict[str, Any]) -> None:
    """The layered test bed (see `orchestrator.dev.layered`): a target whose layers after the
    first write nothing into the residual stream, or a one-layer draft cut from that target
    (same embeddings, first layer, norm and head) with Gaussian noise mixed into its head."""
    torch: Any = importlib.import_module("torch")
    layered = spec["layered"]
    target, tokenizer = random_model({**spec, "num_hidden_layers": layered["target_layers"]})
    with torch.no_grad():
        for layer in target.model.layers[1:]:
            layer.self_attn.o_proj.weight.zero_()  # attention adds nothing to the residual
            layer.mlp.down_proj.weight.zero_()  # nor does the MLP
    if layered["role"] == "target":
        save(target, tokenizer, path)
        return
    draft, _ = random_model({**spec, "num_hidden_layers": 1})
    state = {k: v for k, v in target.state_dict().items() if not k.startswith("model.layers.")}
    state |= {k: v for k, v in target.state_dict().items() if k.startswith("model.layers.0.")}
    draft.load_state_dict(state, strict=True)
    noise = float(layered["head_noise"])
    if noise > 0:
        generator = torch.Generator().manual_seed(layered["noise_seed"])
        with torch.no_grad():
            head = draft.lm_head.weight
            head += noise * head.std() * torch.randn(head.shape, generator=generator)
    save(draft, tokenizer, path)


def random_model(spec: dict[str, Any]) -> tuple[Any, Any]:
    """A random-weight LlamaForCausalLM of `spec`'s shape (seeded) and its word tokenizer."""
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
    return transformers.LlamaForCausalLM(config), tokenizer


def save(model: Any, tokenizer: Any, path: Path) -> None:
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
