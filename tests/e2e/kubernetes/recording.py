"""The recorded answers of a real kube-apiserver, read at test time from
../shared/referees/kube-apiserver/README.md (never copied into the repository): the rows of its
tables and its backquoted strings, and a matcher where the recording elides with "…"."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import pytest
import yaml

from tests.kube.cluster import RECORDING


@dataclass(frozen=True)
class Row:
    request: str
    http: str
    body: str

    @property
    def code(self) -> int:
        return int(re.search(r"\d{3}", self.http)[0])  # type: ignore[index]

    @property
    def reason(self) -> str:
        """The recorded `reason` (quoted in the HTTP column), "" when the row has none."""
        found = quoted(self.http)
        return found[0] if found else ""

    @property
    def message(self) -> str:
        return quoted(self.body)[0]


@functools.cache
def text() -> str:
    if not RECORDING.is_file():
        pytest.skip(f"{RECORDING} is absent (set SPECDEPLOY_REFEREES to the referees directory)")
    return RECORDING.read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text of one `## title` section."""
    parts = re.split(r"^## ", text(), flags=re.M)
    for part in parts:
        if part.startswith(title):
            return part
    pytest.fail(f"{RECORDING} has no section {title!r}")


def row(keyword: str) -> Row:
    """The server-side apply table's row whose request column holds `keyword`."""
    for line in section("Server-side apply").splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and keyword in cells[0]:
            return Row(*cells)
    pytest.fail(f"{RECORDING}: no server-side apply row mentions {keyword!r}")


def quoted(cell: str) -> list[str]:
    return re.findall(r"`([^`]*)`", cell)


def causes(cell: str) -> list[dict[str, str]]:
    """The recorded causes of a row: a YAML flow list, or `Type` (field `x`) pairs."""
    flow = re.search(r"causes `(\[.*\])`", cell)
    if flow:
        return list(yaml.safe_load(flow[1]))
    return [
        {"reason": reason, "field": field}
        for reason, field in re.findall(r"`(\w+)` \(field `([^`]+)`\)", cell)
    ]


def matches(recorded: str, actual: str) -> bool:
    """`actual` is what the recording shows, where each "…" stands for anything."""
    pattern = ".*".join(re.escape(part) for part in recorded.split("…"))
    return re.fullmatch(pattern, actual, flags=re.S) is not None
