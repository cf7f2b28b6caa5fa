"""Shared finding helpers for rules that read checkpoint metadata: the `info` finding for a check
that could not be made, and stamping the profile field a finding is about."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.compatibility.rule import Finding

UNCHECKED_WHY = (
    "specdeploy could not check this from metadata, so a mismatch would first show at serving time"
)


def cannot_check(
    what: str,
    first: CheckpointInfo | None,
    second: CheckpointInfo | None,
    *,
    facts: tuple[str, ...] = (),
) -> Finding:
    """An info finding for a check that could not be made, saying for each checkpoint why: the
    `facts` its catalog source could not confirm, else the files it lacks."""
    refs = [i for i in (first, second) if i is not None]
    reasons = "; ".join(_reason(i, facts) for i in refs)
    hub = next((i.ref for i in refs if i.source in ("catalog", "hub", "hf-cache")), None)
    download = (
        f"`huggingface-cli download {hub} --include config.json 'tokenizer*' '*.index.json'` "
        "(then validate without --offline or with the cache; `specdeploy catalog add` keeps its "
        "facts for offline use), or "
        if hub
        else ""
    )
    return Finding.info(
        what=f"not checked: {what} ({reasons or 'no metadata'})",
        why=UNCHECKED_WHY,
        fix=f"make the metadata available: {download}point the model at a local directory "
        "with config.json, tokenizer.json and model.safetensors.index.json",
    )


def _reason(info: CheckpointInfo, facts: tuple[str, ...]) -> str:
    unconfirmed = [f for f in facts if f in info.unverified]
    if unconfirmed:
        return f"{info.ref}: {', '.join(unconfirmed)} not confirmed by its catalog source"
    if facts and info.source == "catalog":
        return f"{info.ref}: its catalog entry does not give {', '.join(facts)}"
    if info.missing:
        return f"{info.ref} lacks {', '.join(info.missing)}"
    return f"{info.ref}: config.json does not give {', '.join(facts) or 'the field'}"


def at_field(field: str, finding: Finding) -> Finding:
    """The finding, stamped with the profile field it is about."""
    return replace(finding, field=field)
