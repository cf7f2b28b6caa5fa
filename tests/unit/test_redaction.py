"""Redaction: credentials from the environment and token-shaped strings are hidden in text that
specdeploy prints; ordinary log text is left as it is."""

from __future__ import annotations

import pytest

from orchestrator.redaction import REDACTED, environment_secrets, redact

HF_TOKEN = "hf_" + "Zx9" * 12


class TestRedact:
    def test_known_values_and_token_shapes_are_hidden(self) -> None:
        text = (
            f"ValueError: 401 for token {HF_TOKEN} (key my-long-api-key-value)\n"
            "args: --api-key=abc123xyz --hf-token sekrit-value --port 8000\n"
            "pulling https://robot:hunter2@registry.example.com/vllm\n"
        )
        out = redact(text, known=["my-long-api-key-value"])
        for secret in (HF_TOKEN, "my-long-api-key-value", "abc123xyz", "sekrit-value", "hunter2"):
            assert secret not in out
        assert out.count(REDACTED) == 5
        assert "--port 8000" in out and "registry.example.com/vllm" in out

    def test_ordinary_log_lines_are_unchanged(self) -> None:
        lines = [
            "INFO 11-29 09:46:52 [api_server.py:12] Starting vLLM API server on 0.0.0.0:8000",
            "--max-num-batched-tokens 8192 --tokenizer-mode auto --hf-token --enforce-eager",
            "ERROR 12:30:45 engine core died; pid=17",
        ]
        assert [redact(line, known=[]) for line in lines] == lines

    def test_environment_secrets_by_name(self, monkeypatch: pytest.MonkeyPatch) -> None:
        env = {
            "HF_TOKEN": HF_TOKEN,
            "VLLM_API_KEY": "team-key-0123",
            "MY_SERVICE_PASSWORD": "correct-horse",
            "HOME": "/root/secret-home",
            "SHORT_TOKEN": "1",
            "TOKENIZERS_PARALLELISM": "false-but-long",
        }
        assert set(environment_secrets(env)) == {HF_TOKEN, "team-key-0123", "correct-horse"}
        monkeypatch.setenv("VLLM_API_KEY", "team-key-0123")
        assert redact("auth failed for team-key-0123") == f"auth failed for {REDACTED}"

    def test_long_lines_stay_fast(self) -> None:
        text = "a:" * 50_000  # many colons, no '@': no quadratic backtracking
        assert redact(text, known=[]) == text
