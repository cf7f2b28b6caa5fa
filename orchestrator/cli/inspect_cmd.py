"""inspect: what specdeploy knows about one checkpoint, and where each fact came from.

The resolver (and `huggingface_hub` behind it) is imported only when the command runs, so other
commands do not pay for it at start-up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator.cli.options import format_option, offline_option
from orchestrator.errors import IncompatibleError

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo, EagleHeadInfo


@click.command(name="inspect")
@click.argument("model")
@click.option("--revision", default=None, help="Hub commit or tag to read (default: main).")
@format_option
@offline_option
def inspect(model: str, revision: str | None, output: str, offline: bool) -> None:
    """Show the metadata of MODEL (hub id or local directory) and where it was found.

    Looks in the local directory, the Hugging Face cache, the hub (small files only), the user
    catalog (`specdeploy catalog add`) and the built-in catalog, in that order, and says which
    catalog answered. Exit 4 when the model cannot be found anywhere allowed.
    """
    from orchestrator.checkpoint.info import Unresolved
    from orchestrator.checkpoint.resolution import CheckpointResolver

    found = CheckpointResolver(base_dir=Path.cwd(), offline=offline).resolve(
        "model", model, revision
    )
    if isinstance(found, Unresolved):
        raise IncompatibleError(
            f"{model} could not be resolved (tried: {'; '.join(found.tried)})",
            why="specdeploy reads config.json and tokenizer files; it found them nowhere allowed",
            fix=found.suggestion().replace("model.revision", "--revision"),
        )
    if output == "json":
        click.echo(json.dumps(_document(found), indent=2))
    else:
        click.echo(_text(found))


def _document(info: CheckpointInfo) -> dict[str, Any]:
    import dataclasses

    from orchestrator.checkpoint.catalog import answering_catalog

    doc: dict[str, Any] = dataclasses.asdict(info)
    doc["catalog"] = answering_catalog(info)
    doc["derived"] = {
        "resolved_head_dim": info.resolved_head_dim,
        "kv_heads": info.kv_heads,
        "is_mla": info.is_mla,
        "max_context": info.max_context,
    }
    return doc


def _text(info: CheckpointInfo) -> str:
    rows = [
        ("source", f"{info.source}: {info.location}"),
        ("revision", info.revision),
        ("architecture", f"{', '.join(info.architectures) or '?'} ({info.model_type or '?'})"),
        ("shape", _shape(info)),
        ("vocab", f"vocab_size {_n(info.vocab_size)}, context limit {_n(info.max_context)}"),
        ("dtype", f"{info.torch_dtype or '?'}, tied embeddings {_yes(info.tie_word_embeddings)}"),
        ("MoE", _moe(info)),
        ("MLA", f"kv_lora_rank {info.kv_lora_rank}" if info.is_mla else None),
        ("MTP", _mtp(info)),
        ("quantization", _quant(info)),
        ("weights", _weights(info)),
        ("tokenizer", _tokenizer(info)),
        ("EAGLE head", _eagle(info.eagle)),
        ("not found", ", ".join(info.missing) or None),
        ("unverified", ", ".join(info.unverified) or None),
        ("sources", "; ".join(info.sources) or None),
    ]
    lines = [info.ref] + [f"  {label + ':':<14}{value}" for label, value in rows if value]
    return "\n".join(lines)


def _shape(info: CheckpointInfo) -> str:
    return (
        f"{_n(info.num_hidden_layers)} layers, hidden {_n(info.hidden_size)}, "
        f"{_n(info.num_attention_heads)} heads / {_n(info.kv_heads)} KV heads, "
        f"head_dim {_n(info.resolved_head_dim)}, intermediate {_n(info.intermediate_size)}"
    )


def _moe(info: CheckpointInfo) -> str | None:
    if info.num_experts is None:
        return None
    return f"{info.num_experts} experts, {_n(info.num_experts_per_tok)} active per token"


def _mtp(info: CheckpointInfo) -> str | None:
    if not info.mtp_layers:
        return None
    tensors = "no index" if info.mtp_tensor_count is None else f"{info.mtp_tensor_count} tensors"
    return f"{info.mtp_layers} layer(s) declared; {tensors} in the weight index"


def _quant(info: CheckpointInfo) -> str | None:
    if info.quant_method is None:
        return None
    bits = f" ({info.quant_bits:g} bits)" if info.quant_bits else ""
    return f"{info.quant_method}{bits}"


def _weights(info: CheckpointInfo) -> str | None:
    parts = []
    if info.weight_bytes is not None:
        parts.append(f"{info.weight_bytes / 2**30:.2f} GiB ({info.weight_bytes:,} bytes)")
    if info.param_count is not None:
        parts.append(f"{info.param_count / 1e9:.3f} B parameters")
    return ", ".join(parts) or None


def _tokenizer(info: CheckpointInfo) -> str | None:
    tok = info.tokenizer
    if tok is not None:
        return f"{tok.source_file}, {tok.vocab_len} tokens, sha256 {tok.fingerprint[:16]}"
    if info.tokenizer_family is not None:
        return f"documented family {info.tokenizer_family!r} (catalog; file content not known)"
    return None


def _eagle(head: EagleHeadInfo | None) -> str | None:
    if head is None:
        return None
    generation = "EAGLE-3" if head.generation == "eagle3" else "EAGLE-1/2"
    aux = list(head.aux_layer_ids) if head.aux_layer_ids is not None else "engine default"
    verifier = f", verifier {head.verifier_name}" if head.verifier_name else ""
    return (
        f"{generation} ({head.format}), built for hidden {_n(head.target_hidden_size)}, "
        f"vocab {_n(head.vocab_size)} -> draft {_n(head.draft_vocab_size)}, d2t "
        f"{_yes(head.has_d2t)}, aux layers {aux}{verifier}"
    )


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _yes(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


COMMANDS: tuple[click.Command, ...] = (inspect,)
