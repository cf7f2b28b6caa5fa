"""The operator's checkpoint source: models as a cluster sees them, never this host's files.

A resource names hub models. The operator resolves them from the user catalog
(`$SPECDEPLOY_CATALOG`, e.g. a mounted ConfigMap), the hub when allowed (small metadata files into
the operator's own cache directory), then the built-in catalog. A local directory in a resource
means nothing inside the cluster, so it is refused with what, why and fix rather than read from
wherever the operator happens to run.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from orchestrator.checkpoint.catalog.user import take_warnings
from orchestrator.checkpoint.info import CheckpointInfo, Unresolved, looks_like_path
from orchestrator.checkpoint.resolution import CheckpointResolver
from orchestrator.plan.types import ModelLocation

_LOG = logging.getLogger("specdeploy.operator.catalog")


class InClusterCheckpoints:
    """`CheckpointSource` for resources: catalogs and (unless offline) the hub."""

    def __init__(self, *, offline: bool, cache_dir: Path | None = None) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="specdeploy-operator-")
        scratch = Path(self._scratch.name)
        cache = cache_dir or scratch / "hub"
        # base_dir is an empty directory of our own: no name resolves to a local checkpoint.
        self._resolver = CheckpointResolver(
            base_dir=scratch / "none", offline=offline, hf_cache=cache
        )

    def resolve(self, field: str, model: str, revision: str | None) -> CheckpointInfo | Unresolved:
        if looks_like_path(model) or model.startswith(("/", ".", "~")):
            tried = (
                f"local directory: {model!r} is a path, and a SpeculativeDeployment's models are "
                "resolved in the cluster (user catalog, hub, built-in catalog), never from the "
                "operator's file system; name a hub id, or record the checkpoint with "
                "`specdeploy catalog add DIR --as org/name` in the operator's catalog",
            )
            return Unresolved(field=field, model=model, revision=revision, tried=tried)
        found = self._resolver.resolve(field, model, revision)
        for warning in take_warnings():  # a damaged catalog entry: said once, in the log
            _LOG.warning("%s", warning.render())
        return found

    def locate(self, model: str) -> ModelLocation:
        return ModelLocation(model, None)
