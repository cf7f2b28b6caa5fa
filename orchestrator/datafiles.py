"""Packaged data files (capability matrix, GPU catalog).

The YAML files are the source: people edit and review them, and their comments carry the evidence.
Each has a compiled JSON twin beside it (`capabilities.yaml` -> `capabilities.compiled.json`) that
the CLI reads instead, because PyYAML builds every object in Python: the two files cost about 10 ms
of each `validate` as YAML and 0.3 ms as JSON. The twin records the CRC-32 of the YAML it was
compiled from, so a stale or missing twin is never used: the YAML is parsed instead (slower, never
wrong). `specdeploy dev compile-data` rewrites the twins; a test fails while one is stale.
"""

from __future__ import annotations

import importlib
import json
import sys
import zlib
from pathlib import Path
from typing import Any

import yaml

from orchestrator.checkpoint.files import UnreadableMetadata, read_json_object

#: Every packaged YAML data file, as (package, file name).
DATA_FILES: tuple[tuple[str, str], ...] = (
    ("orchestrator.engines", "capabilities.yaml"),
    ("orchestrator.memory", "gpus.yaml"),
)

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


def compiled_path(source: Path) -> Path:
    """Where the compiled JSON twin of the YAML file `source` lives."""
    return source.with_name(f"{source.stem}.compiled.json")


def load_yaml(package: str, name: str) -> Any:
    """The data of the YAML file `name` shipped inside `package` (see `read_data_file`)."""
    return read_data_file(package_file(package, name))


def read_data_file(source: Path) -> Any:
    """The data of the YAML file `source`: from its compiled twin when that was compiled from
    exactly this YAML, else parsed from the YAML itself."""
    raw = source.read_bytes()
    compiled = _read_compiled(compiled_path(source), zlib.crc32(raw))
    if compiled is not None:
        return compiled
    return yaml.load(raw, Loader=SAFE_LOADER)


def _read_compiled(path: Path, crc32: int) -> Any | None:
    try:
        document = read_json_object(path)
    except UnreadableMetadata:  # a damaged twin: parse the YAML instead
        return None
    if document is None or document.get("crc32") != crc32:
        return None
    return document.get("data")


def compile_data_file(source: Path) -> Path:
    """Write the compiled JSON twin of the YAML file `source`; returns the twin's path."""
    raw = source.read_bytes()
    document = {
        "generated": f"by `specdeploy dev compile-data` from {source.name}; edit that file",
        "crc32": zlib.crc32(raw),
        "data": yaml.load(raw, Loader=SAFE_LOADER),
    }
    target = compiled_path(source)
    target.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return target


def is_fresh(source: Path) -> bool:
    """Whether the compiled twin of `source` exists, matches its CRC and holds the same data."""
    raw = source.read_bytes()
    compiled = _read_compiled(compiled_path(source), zlib.crc32(raw))
    return compiled is not None and compiled == yaml.load(raw, Loader=SAFE_LOADER)


def packaged_data_files() -> list[Path]:
    """The paths of every packaged YAML data file (`DATA_FILES`)."""
    paths = []
    for package, name in DATA_FILES:
        importlib.import_module(package)
        paths.append(package_file(package, name))
    return paths
