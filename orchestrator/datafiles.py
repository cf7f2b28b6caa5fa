"""Packaged data files (capability matrix, GPU catalog): read once, with libyaml when present."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

# The C loader parses the capability matrix about 10x faster than the pure-Python one (it is
# read on every `validate`); both are safe loaders and give the same result.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def package_file(package: str, name: str) -> Path:
    """The file `name` shipped beside the modules of the (already imported) `package`.

    A plain path rather than importlib.resources: the package is always installed unzipped,
    and importlib.resources with its zipfile support costs about 25 ms of every CLI start."""
    module_file = sys.modules[package].__file__
    if module_file is None:  # a namespace package: never the case for orchestrator's packages
        raise RuntimeError(f"{package} has no __file__ to find {name} beside")
    return Path(module_file).parent / name


def load_yaml(package: str, name: str) -> Any:
    """Parse the YAML file `name` shipped inside `package`."""
    text = package_file(package, name).read_text("utf-8")
    return yaml.load(text, Loader=_LOADER)
