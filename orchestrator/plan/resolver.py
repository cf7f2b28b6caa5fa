"""The checkpoint-source seam: how planning finds a model's metadata and where its files are.

`LocalCheckpoints` is the CLI's: a local directory relative to the profile, the Hugging Face
cache, the hub, the catalog (`CheckpointResolver`). An operator plans from a resource and
resolves from inside its cluster, with a source of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from orchestrator.checkpoint.info import CheckpointInfo, Unresolved
from orchestrator.checkpoint.resolution import CheckpointResolver
from orchestrator.plan.types import ModelLocation


class CheckpointSource(Protocol):
    """Resolves the models a profile names."""

    def resolve(self, field: str, model: str, revision: str | None) -> CheckpointInfo | Unresolved:
        """Metadata of `model` (the profile's `field`, e.g. "target.model"), or what was tried."""
        ...

    def locate(self, model: str) -> ModelLocation:
        """Where `model`'s files are: a hub id stays as written; a local directory is absolute."""
        ...


class LocalCheckpoints:
    """The CLI's source: paths relative to the profile file's directory."""

    def __init__(self, *, base_dir: Path, offline: bool) -> None:
        self.base_dir = base_dir
        self._resolver = CheckpointResolver(base_dir=base_dir, offline=offline)

    def resolve(self, field: str, model: str, revision: str | None) -> CheckpointInfo | Unresolved:
        return self._resolver.resolve(field, model, revision)

    def locate(self, model: str) -> ModelLocation:
        candidate = Path(model).expanduser()
        if not candidate.is_absolute():
            candidate = self.base_dir / candidate
        if candidate.is_dir():
            return ModelLocation(model, candidate.resolve())
        return ModelLocation(model, None)
