"""Loading rules: fires / passes / does not apply."""

from __future__ import annotations

from typing import Any

from orchestrator.checkpoint.catalog import catalog_info
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.compatibility.loading_rules import remote_code_is_trusted
from orchestrator.compatibility.rule import CompatContext
from orchestrator.engines.capabilities import release_for
from tests.support import make_profile

CUSTOM = CheckpointInfo(
    ref="org/custom",
    source="catalog",
    location="",
    model_type="custom",
    custom_code=("AutoModelForCausalLM=modeling_custom.CustomForCausalLM",),
)
PLAIN = CheckpointInfo(ref="org/plain", source="catalog", location="", model_type="llama")


def ctx(
    target_info: CheckpointInfo | None, draft_info: CheckpointInfo | None = None, **sections: Any
) -> CompatContext:
    profile = make_profile(**sections)
    return CompatContext(
        profile=profile, release=release_for("vllm", "0.32.0"), target=target_info, draft=draft_info
    )


class TestRemoteCodeIsTrusted:
    def test_warns_for_a_target_with_custom_code(self) -> None:
        (finding,) = remote_code_is_trusted(ctx(CUSTOM))
        assert finding.rule == "checkpoint.remote-code" and finding.severity == "warning"
        assert finding.field == "target.model"
        assert "modeling_custom.CustomForCausalLM" in finding.what
        assert "trust_remote_code: true" in finding.fix

    def test_warns_for_a_draft_with_custom_code(self) -> None:
        (finding,) = remote_code_is_trusted(ctx(PLAIN, CUSTOM))
        assert finding.field == "proposer.model"

    def test_passes_for_native_checkpoints(self) -> None:
        assert remote_code_is_trusted(ctx(PLAIN, PLAIN)) == []

    def test_does_not_apply_when_remote_code_is_trusted(self) -> None:
        trusted = ctx(CUSTOM, target={"model": "org/custom", "trust_remote_code": True})
        assert remote_code_is_trusted(trusted) == []

    def test_the_catalog_knows_mimo_ships_its_own_code(self) -> None:
        mimo = catalog_info("XiaomiMiMo/MiMo-7B-Base")
        assert mimo is not None
        assert remote_code_is_trusted(
            ctx(mimo, proposer={"method": "mtp", "num_speculative_tokens": 1})
        )
