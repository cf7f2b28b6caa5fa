"""Packaged data files (capability matrix, GPU catalog): read once, with libyaml when present."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

# The C loader parses the capability matrix about 10x faster than the pure-Python one (it is
# read on every `validate`); both are safe loaders and give the same result.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(package: str, name: str) -> Any:
    """Parse the YAML file `name` shipped inside `package`."""
    text = resources.files(package).joinpath(name).read_text("utf-8")
    return yaml.load(text, Loader=_LOADER)
