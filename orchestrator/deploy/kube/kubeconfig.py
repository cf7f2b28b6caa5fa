"""Where the kubeconfig is, and the namespace its context names."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def kubeconfig_path() -> str:
    """KUBECONFIG as it is now (the client reads it once, at import), else ~/.kube/config."""
    return os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


def context_namespace(config: Any, context: str | None) -> str | None:
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig_path())
    except Exception:
        return None
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    namespace = (chosen or {}).get("context", {}).get("namespace")
    return None if namespace is None else str(namespace)
