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
    target_info: CheckpointInfo | None,
    draft_info: CheckpointInfo | None = None,
    engine: tuple[str, str] = ("vllm", "0.32.0"),
    **sections: Any,
) -> CompatContext:
    profile = make_profile(engine={"name": engine[0], "version": engine[1]}, **sections)
    return CompatContext(
        profile=profile, release=release_for(*engine), target=target_info, draft=draft_info
    )


#: A model type both transformers and vLLM implement, with the auto_map its repository keeps
#: from before they did (deepseek-ai/DeepSeek-V3's config.json).
DEEPSEEK = CheckpointInfo(
    ref="deepseek-ai/DeepSeek-V3",
    source="catalog",
    location="",
    model_type="deepseek_v3",
    architectures=("DeepseekV3ForCausalLM",),
    custom_code=("AutoConfig=configuration_deepseek.DeepseekV3Config",),
)


class TestRemoteCodeIsTrusted:
    def test_an_unknown_model_type_is_refused_by_a_recorded_release(self) -> None:
        (finding,) = remote_code_is_trusted(ctx(CUSTOM))
        assert finding.rule == "checkpoint.remote-code" and finding.severity == "error"
        assert finding.field == "target.model"
        assert "modeling_custom.CustomForCausalLM" in finding.what
        assert "vllm 0.32.0 does not know model_type 'custom'" in finding.why
        assert "trust_remote_code: true" in finding.fix

    def test_a_model_the_release_implements_needs_no_remote_code(self) -> None:
        assert remote_code_is_trusted(ctx(DEEPSEEK)) == []
        assert remote_code_is_trusted(ctx(DEEPSEEK, engine=("sglang", "0.5.23"))) == []

    def test_an_unrecorded_release_says_what_it_could_not_check(self) -> None:
        (finding,) = remote_code_is_trusted(ctx(DEEPSEEK, engine=("vllm", "0.10.1")))
        assert finding.severity == "info" and "vllm 0.32.0 implements" in finding.why
        (unknown,) = remote_code_is_trusted(ctx(CUSTOM, engine=("vllm", "0.10.1")))
        assert unknown.severity == "warning"

    def test_an_engine_without_a_record_warns(self) -> None:
        (finding,) = remote_code_is_trusted(ctx(DEEPSEEK, engine=("trtllm", "1.2.0")))
        assert finding.severity == "warning" and "no record" in finding.why

    def test_warns_for_a_draft_with_custom_code(self) -> None:
        (finding,) = remote_code_is_trusted(ctx(PLAIN, CUSTOM))
        assert finding.field == "proposer.model"

    def test_passes_for_native_checkpoints(self) -> None:
        assert remote_code_is_trusted(ctx(PLAIN, PLAIN)) == []

    def test_does_not_apply_when_remote_code_is_trusted(self) -> None:
        trusted = ctx(CUSTOM, target={"model": "org/custom", "trust_remote_code": True})
        assert remote_code_is_trusted(trusted) == []

    def test_mimo_is_refused_as_the_conformance_run_saw(self) -> None:
        # vLLM 0.32.0 serves MiMoForCausalLM but transformers has no "mimo" config: it refuses
        # the checkpoint without --trust-remote-code (tests/conformance).
        mimo = catalog_info("XiaomiMiMo/MiMo-7B-Base")
        assert mimo is not None
        (finding,) = remote_code_is_trusted(
            ctx(mimo, proposer={"method": "mtp", "num_speculative_tokens": 1})
        )
        assert finding.severity == "error" and "'mimo'" in finding.why
