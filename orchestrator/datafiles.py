"""Packaged data files (capability matrix, GPU catalog): YAML that people edit and review, with
the evidence in its comments, parsed with libyaml when PyYAML has it (about 3 ms for both files)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

#: The fastest safe loader this PyYAML has: libyaml's when it was built with it (the wheels are),
#: about 10x faster than the pure-Python one, with the same nodes, marks and results.
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def package_file(package: str, name: str) -> Path:
    """The file `name` shipped beside the modules of the (already imported) `package`.

    A plain path rather than importlib.resources: the package is always installed unzipped,
    and importlib.resources with its zipfile support costs about 25 ms of every CLI start."""
    module_file = sys.modules[package].__file__
    if module_file is None:  # a namespace package: never the case for orchestrator's packages
        raise RuntimeError(f"{package} has no __file__ to find {name} beside")
    return Path(module_file).parent / name


def load_yaml(package: str, name: str) -> Any:
    """The data of the YAML file `name` shipped inside `package`."""
    return yaml.load(package_file(package, name).read_bytes(), Loader=SAFE_LOADER)
