"""Which model types and architectures an engine release loads without remote code.

Recorded from the installed engines by `specdeploy dev native-models` into native_models.json
(read only when a checkpoint ships its own code, so it costs `validate` nothing otherwise).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from orchestrator.datafiles import package_file
from orchestrator.engines.capabilities import parse_version
from orchestrator.engines.names import EngineName


@dataclass(frozen=True)
class NativeSupport:
    """What the recorded engine release closest to the pinned one says about a checkpoint."""

    release: str
    """The recorded release that answered."""
    exact: bool
    """It is the pinned release itself."""
    transformers: str
    """The transformers version installed with it when it was recorded."""
    model_type_known: bool
    architecture_known: bool
    source: str

    @property
    def loads(self) -> bool:
        return self.model_type_known and self.architecture_known


def native_support(
    engine: EngineName, version: str, model_type: str | None, architectures: tuple[str, ...]
) -> NativeSupport | None:
    """The recorded release of `engine` nearest to `version` (the release itself, else the
    oldest newer one, else the newest older one); None when none was recorded."""
    releases = _recorded().get(engine, {})
    if not releases:
        return None
    wanted = parse_version(version)
    ordered = sorted(releases, key=parse_version)
    newer = [r for r in ordered if parse_version(r) >= wanted]
    release = newer[0] if newer else ordered[-1]
    facts = releases[release]
    return NativeSupport(
        release=release,
        exact=parse_version(release) == wanted,
        transformers=str(facts["transformers"]),
        model_type_known=model_type in facts["model_types"],
        architecture_known=any(a in facts["architectures"] for a in architectures),
        source=str(facts["source"]),
    )


@cache
def _recorded() -> dict[str, dict[str, dict[str, Any]]]:
    data = json.loads(package_file("orchestrator.engines", "native_models.json").read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}
