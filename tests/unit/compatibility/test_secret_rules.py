"""Secret rules: a credential in serving.extra_args or engine.image is an error that names where
it is without repeating it."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.compatibility.rule import CompatContext
from orchestrator.compatibility.secret_rules import no_secret_in_args
from orchestrator.engines.capabilities import release_for
from tests.support import make_profile

HF_TOKEN = "hf_" + "aBcD1234" * 4 + "xy"  # the shape of a Hugging Face user token


def ctx(extra_args: list[str] | None = None, image: str | None = None) -> CompatContext:
    sections: dict[str, Any] = {"serving": {"extra_args": extra_args or []}}
    if image is not None:
        sections["engine"] = {"name": "vllm", "version": "0.32.0", "image": image}
    return CompatContext(profile=make_profile(**sections), release=release_for("vllm", "0.32.0"))


class TestNoSecretInArgs:
    @pytest.mark.parametrize(
        ("args", "index", "kind"),
        [
            (["--hf-token", HF_TOKEN], 0, "the value of --hf-token"),
            (["--enforce-eager", f"--api-key={'s3cret-value'}"], 1, "the value of --api-key"),
            (["--api-key", "my-team-key"], 0, "the value of --api-key"),
            (["--admin-api-key", "x" * 12], 0, "the value of --admin-api-key"),
            (["--served-model-name", HF_TOKEN], 1, "a Hugging Face token"),
            (["--speculative-config", f'{{"hf_token": "{HF_TOKEN}"}}'], 1, "a Hugging Face token"),
            (["--x", "sk-" + "A1b2" * 6], 1, "an OpenAI-style API key"),
        ],
    )
    def test_a_credential_in_extra_args_is_an_error_at_its_index(
        self, args: list[str], index: int, kind: str
    ) -> None:
        (finding,) = no_secret_in_args(ctx(args))
        assert finding.rule == "serving.secret-in-args" and finding.severity == "error"
        assert finding.field == "serving.extra_args"
        assert finding.what.startswith(f"serving.extra_args[{index}] holds {kind}")
        assert "s3cret" not in finding.what and HF_TOKEN not in finding.what
        assert "deploy.hf_token_secret" in finding.fix and "launch.json" in finding.why

    @pytest.mark.parametrize(
        "image",
        [
            "robot:hunter2@registry.example.com/vllm/vllm-openai:v0.32.0",
            "https://robot:hunter2@registry.example.com/vllm:v1",
        ],
    )
    def test_a_password_in_the_image_is_an_error(self, image: str) -> None:
        (finding,) = no_secret_in_args(ctx(image=image))
        assert finding.field == "engine.image"
        assert "user name and password" in finding.what and "hunter2" not in finding.what

    @pytest.mark.parametrize(
        "args",
        [
            [],
            ["--hf-token"],  # vLLM then uses the token stored by `huggingface-cli login`
            ["--hf-token", "--enforce-eager"],
            ["--max-num-batched-tokens", "8192", "--tokenizer-mode", "auto"],
            ["--served-model-name", "hf_short"],
            ["--disable-log-requests"],
        ],
    )
    def test_ordinary_args_pass(self, args: list[str]) -> None:
        assert no_secret_in_args(ctx(args)) == []

    @pytest.mark.parametrize(
        "image",
        [
            "vllm/vllm-openai:v0.32.0",
            "registry.example.com:5000/vllm/vllm-openai:v0.32.0",
            "vllm/vllm-openai@sha256:" + "a" * 64,
            "registry.example.com:5000/vllm@sha256:" + "0" * 64,
        ],
    )
    def test_ordinary_images_pass(self, image: str) -> None:
        assert no_secret_in_args(ctx(image=image)) == []
