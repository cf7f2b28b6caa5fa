"""orchestrator.bench.secrets: which credentials one bench run holds, and the redaction of its
errors and log records."""

from __future__ import annotations

import logging

import pytest

from orchestrator.bench.secrets import bench_redactor, redacted
from orchestrator.errors import BenchError
from orchestrator.redaction import REDACTED

KEY = "sekrit-api-key-0042"


def test_the_key_its_header_url_passwords_and_environment_secrets_are_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTHER_SERVICE_TOKEN", "env-token-value-0042")
    redact = bench_redactor(KEY, ("http://u:url-password-0042@h:1", None))
    text = f"Bearer {KEY} {KEY} url-password-0042 env-token-value-0042"
    assert redact(text) == " ".join([REDACTED] * 4)


def test_no_key_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("orchestrator.bench.secrets.environment_secrets", lambda: ())
    assert not bench_redactor(None, ("http://127.0.0.1:8000", None))


def test_an_error_leaving_is_redacted_in_what_why_fix_and_args() -> None:
    redact = bench_redactor(KEY, ())
    with pytest.raises(BenchError) as caught, redacted(redact):
        raise BenchError(f"401: {KEY}", why=f"bad {KEY}", fix=f"not {KEY}")
    error = caught.value
    assert (error.what, error.why, error.fix) == (
        f"401: {REDACTED}",
        f"bad {REDACTED}",
        f"not {REDACTED}",
    )
    assert str(error) == f"401: {REDACTED}"


def test_log_records_reaching_a_handler_are_redacted() -> None:
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with redacted(bench_redactor(KEY, ())):
            logging.getLogger("aiohttp.client").warning("sent %s", f"Bearer {KEY}")
        logging.getLogger("aiohttp.client").warning("after: %s", KEY)  # filter removed
    finally:
        root.removeHandler(handler)
    assert seen == [f"sent {REDACTED}", f"after: {KEY}"]


def test_python_warnings_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with redacted(bench_redactor(KEY, ())):
            warnings.warn(f"Unclosed session with headers Bearer {KEY}", ResourceWarning, 1)
    err = capsys.readouterr().err
    assert f"Unclosed session with headers {REDACTED}" in err and KEY not in err
