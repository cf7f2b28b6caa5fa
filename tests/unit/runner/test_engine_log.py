"""Engine-log tails: only the end of the file is read, long lines are cut, credentials are
redacted, and a log path that is not a regular file reads as empty."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.redaction import REDACTED
from orchestrator.runner import engine_log


def test_the_tail_and_the_refusal_hide_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_" + "Q" * 34)
    log = tmp_path / "engine.log"
    log.write_text(
        "INFO starting with --api-key team-secret-123\n"
        f"OSError: 401 Unauthorized for token {os.environ['HF_TOKEN']}\n"
    )
    tail = engine_log.tail(log)
    assert tail == [
        f"INFO starting with --api-key {REDACTED}",
        f"OSError: 401 Unauthorized for token {REDACTED}",
    ]
    assert engine_log.refusal(log) == f"OSError: 401 Unauthorized for token {REDACTED}"


def test_only_the_end_of_a_huge_log_is_read(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    with log.open("w") as handle:
        handle.write("x" * (8 * engine_log.TAIL_BYTES))  # one line without a newline
        handle.write("\nValueError: the last words\n")
    tail = engine_log.tail(log)
    assert tail[-1] == "ValueError: the last words"
    assert all(len(line) <= engine_log.MAX_LINE_CHARS + 20 for line in tail)


def test_a_fifo_or_a_missing_log_reads_as_empty(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.log")
    assert engine_log.tail(tmp_path / "fifo.log") == []  # would block forever if opened plainly
    assert engine_log.tail(tmp_path / "absent.log") == []
    assert engine_log.refusal(tmp_path / "absent.log") is None
