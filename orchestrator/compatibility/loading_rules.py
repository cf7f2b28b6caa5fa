"""Loading rules: can the engine load the checkpoints at all, before any pairing question."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.compatibility.unchecked import at_field

if TYPE_CHECKING:
    from orchestrator.engines.native import NativeSupport


@rule(
    "checkpoint.remote-code",
    source="https://github.com/huggingface/transformers/blob/v5.19.0/src/transformers/models/auto/configuration_auto.py#L397-L416 (config.json auto_map: the "
    "AutoConfig/AutoModel classes are the checkpoint's own code, loaded only with "
    "trust_remote_code) and #L426-L436 ('Transformers does not recognize this architecture', "
    "which vLLM 0.32.0 raises for XiaomiMiMo/MiMo-7B-Base without --trust-remote-code); "
    "orchestrator/engines/native_models.json (the model types and architectures each engine "
    "release loads natively, recorded from the engine by `specdeploy dev native-models`); "
    "tests/conformance",
    applies=lambda ctx: not ctx.profile.target.trust_remote_code,
)
def remote_code_is_trusted(ctx: CompatContext) -> list[Finding]:
    """A checkpoint whose config.json maps its classes to code in the repository (`auto_map`)
    loads without trust_remote_code only where the engine knows its model_type (its
    transformers or its own config registry) and implements its architecture; otherwise the
    engine exits at start-up. The flag applies to the draft too (vLLM builds the draft's
    ModelConfig with the target's setting)."""
    found = []
    for field, info in (("target.model", ctx.target), ("proposer.model", ctx.draft)):
        if info is None or not info.custom_code:
            continue
        from orchestrator.engines.native import native_support  # only for shipped model code

        native = native_support(
            ctx.engine, ctx.profile.engine.version, info.model_type, info.architectures
        )
        finding = _finding(ctx, field, info, native)
        if finding is not None:
            found.append(at_field(field, finding))
    return found


def _finding(
    ctx: CompatContext, field: str, info: CheckpointInfo, native: NativeSupport | None
) -> Finding | None:
    engine = f"{ctx.engine} {ctx.profile.engine.version}"
    ships = (
        f"{field} {info.ref} (model_type {info.model_type!r}, "
        f"{', '.join(info.architectures) or 'no architectures'}) ships its own model code "
        f"({', '.join(info.custom_code)}) and target.trust_remote_code is false"
    )
    fix = "set target.trust_remote_code: true after reviewing the repository's code"
    if native is not None and native.exact and native.loads:
        return None  # the engine's own implementation is used; auto_map is ignored
    if native is not None and native.exact and not native.model_type_known:
        return Finding.error(
            what=ships,
            why=(
                f"{engine} does not know model_type {info.model_type!r} (neither its own config "
                f"registry nor transformers {native.transformers} has it), so it can only read "
                "this config.json with the repository's code and refuses it at start-up"
            ),
            fix=fix,
        )
    if native is not None and not native.exact and native.loads:
        return Finding.info(
            what=ships,
            why=(
                f"{ctx.engine} {native.release} implements this model natively, but specdeploy "
                f"has not recorded what {engine} implements"
            ),
            fix=f"{fix}, or keep it false if {engine} lists {info.architectures[0]} among its "
            "supported models",
        )
    return Finding.warning(
        what=ships,
        why=_unsure(ctx, info, native),
        fix=f"{fix}, or ignore this rule if your engine release supports the architecture natively",
    )


def _unsure(ctx: CompatContext, info: CheckpointInfo, native: NativeSupport | None) -> str:
    if native is None:
        return (
            f"specdeploy has no record of the models {ctx.engine} implements; unless it or "
            "transformers implements this model_type natively, it refuses the checkpoint at "
            "start-up"
        )
    if native.exact:  # the config loads, but the engine has no class for the architecture
        return (
            f"{ctx.engine} {native.release} has no implementation of "
            f"{', '.join(info.architectures) or 'its architecture'}; it would fall back to "
            "transformers' modelling code, which for this checkpoint is the repository's code"
        )
    return (
        f"{ctx.engine} {native.release} (the nearest release specdeploy recorded) does not "
        f"implement it natively, so {ctx.engine} {ctx.profile.engine.version} most likely "
        "refuses it at start-up"
    )


RULES = (remote_code_is_trusted,)
