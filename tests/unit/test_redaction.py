"""Redaction: credentials from the environment and token-shaped strings are hidden in text that
specdeploy prints; ordinary log text is left as it is."""

from __future__ import annotations

import base64
from urllib.parse import quote, quote_plus

import pytest

from orchestrator.redaction import REDACTED, Redactor, environment_secrets, redact, url_secrets

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


KEY = "team_Key+with/odd=chars*0123456789abcdef"


class TestRedactor:
    """orchestrator.redaction.Redactor: the known secrets of one command, in every spelling
    specdeploy's outputs could give them."""

    @pytest.mark.parametrize(
        "spelling",
        [
            KEY,
            f"Bearer {KEY}",
            quote(KEY, safe=""),
            quote_plus(KEY),
            KEY.replace("_", "\\_").replace("*", "\\*"),  # as bench.md escapes server text
            base64.b64encode(f"Bearer {KEY}".encode()).decode(),
            base64.urlsafe_b64encode(f"x{KEY}".encode()).decode(),
        ],
        ids=["plain", "bearer", "url-encoded", "form-encoded", "markdown", "base64", "base64url"],
    )
    def test_each_spelling_is_hidden(self, spelling: str) -> None:
        shown = Redactor([KEY, f"Bearer {KEY}"])(f"server said: {spelling}.")
        assert REDACTED in shown
        # base64 may keep a character or two at each end (bytes shared with what surrounds it)
        assert spelling[4:-4] not in shown

    def test_the_start_of_a_key_cut_off_by_truncation_is_hidden(self) -> None:
        redactor = Redactor([KEY])
        assert redactor(f"HTTP 401: bad key {KEY[:10]}…") == f"HTTP 401: bad key {REDACTED}…"
        assert redactor(f"'{KEY[:5]}…' and more") == f"'{REDACTED}…' and more"
        # three characters before a cut say nothing about the key: left alone
        assert redactor(f"bad key {KEY[:3]}…") == f"bad key {KEY[:3]}…"

    def test_a_short_key_is_hidden_only_where_it_stands_alone(self) -> None:
        redactor = Redactor(["k3Y"])
        assert redactor("Bearer k3Y, again k3Y.") == f"Bearer {REDACTED}, again {REDACTED}."
        assert redactor("k3Yboard and ak3Y stay") == "k3Yboard and ak3Y stay"

    def test_json_data_is_redacted_string_by_string_keys_included(self) -> None:
        data = {"model": f"echo {KEY}", KEY: [1, 2.5, None, True, f"x{KEY}"]}
        assert Redactor([KEY]).data(data) == {
            "model": f"echo {REDACTED}",
            REDACTED: [1, 2.5, None, True, f"x{REDACTED}"],
        }

    def test_no_secrets_leaves_text_alone(self) -> None:
        redactor = Redactor(["", ""])
        assert not redactor
        assert redactor("Bearer … anything") == "Bearer … anything"


class TestUrlSecrets:
    @pytest.mark.parametrize(
        ("url", "secrets"),
        [
            ("https://robot:pa%2Fss-0042@api.example.com/v1", {"pa%2Fss-0042", "pa/ss-0042"}),
            ("https://tok3n-0042@api.example.com/v1", {"tok3n-0042"}),
            ("https://api.example.com/v1?api_key=abc-0042&x=1", {"abc-0042"}),
            ("https://api.example.com/v1?sig=s1&region=eu", {"s1"}),
            ("http://127.0.0.1:8000", set()),
            ("http://[::1", set()),  # not a URL: nothing to find, no error
        ],
    )
    def test_passwords_and_key_parameters(self, url: str, secrets: set[str]) -> None:
        assert set(url_secrets(url)) == secrets
