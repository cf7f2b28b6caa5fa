"""The one place bench output is redacted: every credential bench holds (the API key, the
"Bearer KEY" header it sends, passwords and key parameters in the endpoint URLs, and the
credential-named environment variables) is hidden from everything bench shows or writes:
terminal lines, error messages (which quote server answers), log records and the reports.

A server can echo what it was sent (the Authorization header in a completion, a 401 body that
quotes the key, a model id), so server text is never trusted to be free of the key.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator
from typing import TextIO

from orchestrator.errors import OrchestratorError
from orchestrator.redaction import Redactor, environment_secrets, url_secrets


def bench_redactor(api_key: str | None, urls: tuple[str | None, ...]) -> Redactor:
    """A redactor for every credential one bench run holds."""
    held: list[str] = []
    if api_key:
        held += [api_key, f"Bearer {api_key}"]
    for url in urls:
        held += url_secrets(url or "")
    return Redactor([*held, *environment_secrets()])


class _LogFilter(logging.Filter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redactor(record.getMessage())
        record.args = None
        if record.exc_text:
            record.exc_text = self.redactor(record.exc_text)
        return True


@contextlib.contextmanager
def redacted(redactor: Redactor) -> Iterator[None]:
    """Inside: log records that reach a handler and Python warnings (e.g. a library's) are
    redacted; an OrchestratorError that leaves is redacted (what, why, fix) before the CLI's
    error boundary prints it. What bench prints itself goes through the redactor directly."""
    log_filter = _LogFilter(redactor)
    handlers = [*logging.getLogger().handlers, logging.lastResort]
    for handler in handlers:
        if handler is not None:
            handler.addFilter(log_filter)
    shown = warnings.showwarning

    def show_redacted(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = warnings.formatwarning(message, category, filename, lineno, line)
        with contextlib.suppress(OSError, ValueError):  # as warnings does: a closed stderr
            (file or sys.stderr).write(redactor(text))

    warnings.showwarning = show_redacted
    try:
        yield
    except OrchestratorError as exc:
        exc.what, exc.why, exc.fix = redactor(exc.what), redactor(exc.why), redactor(exc.fix)
        exc.args = (exc.what,)
        raise
    finally:
        warnings.showwarning = shown
        for handler in handlers:
            if handler is not None:
                handler.removeFilter(log_filter)
