"""Loading rules: can the engine load the checkpoints at all, before any pairing question."""

from __future__ import annotations

from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.compatibility.unchecked import at_field


@rule(
    "checkpoint.remote-code",
    source="https://github.com/huggingface/transformers/blob/v5.19.0/src/transformers/models/auto/configuration_auto.py#L397-L416 (config.json auto_map: the "
    "AutoConfig/AutoModel classes are the checkpoint's own code, loaded only with "
    "trust_remote_code) and #L426-L436 ('Transformers does not recognize this architecture', "
    "which vLLM 0.32.0 raises for XiaomiMiMo/MiMo-7B-Base without --trust-remote-code); "
    "tests/conformance",
    applies=lambda ctx: not ctx.profile.target.trust_remote_code,
)
def remote_code_is_trusted(ctx: CompatContext) -> list[Finding]:
    """A checkpoint whose config.json maps its classes to code in the repository (`auto_map`)
    may not load without trust_remote_code: when transformers has no class for its model_type,
    the engine exits at start-up. The flag applies to the draft too (vLLM builds the draft's
    ModelConfig with the target's setting)."""
    found = []
    for field, info in (("target.model", ctx.target), ("proposer.model", ctx.draft)):
        if info is None or not info.custom_code:
            continue
        finding = Finding.warning(
            what=(
                f"{field} {info.ref} (model_type {info.model_type!r}) ships its own model code "
                f"({', '.join(info.custom_code)}) and target.trust_remote_code is false"
            ),
            why=(
                "unless the engine or transformers implements this model_type natively, it "
                "refuses the checkpoint at start-up"
            ),
            fix="set target.trust_remote_code: true after reviewing the repository's code, or "
            "ignore this rule if your engine release supports the architecture natively",
        )
        found.append(at_field(field, finding))
    return found


RULES = (remote_code_is_trusted,)
