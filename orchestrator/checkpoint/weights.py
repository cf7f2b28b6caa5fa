"""Weight facts without reading weights: `model.safetensors.index.json` and safetensors headers.

A safetensors file starts with an 8-byte little-endian header length followed by a JSON header
mapping each tensor name to its dtype, shape and byte offsets (huggingface/safetensors format
spec). Only that header is read; the tensor data after it is never touched.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INDEX_FILE = "model.safetensors.index.json"
# A header larger than this is not a safetensors header (the format caps it at 100 MB).
_MAX_HEADER_BYTES = 100_000_000
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_MTP_MARKERS = ("mtp", "nextn")


@dataclass(frozen=True)
class WeightFacts:
    """What the index and headers say about a checkpoint's tensors."""

    tensor_names: tuple[str, ...]
    weight_bytes: int | None
    param_count: int | None
    source: str
    """"index", "headers" or "index+headers"."""


def read_weight_facts(directory: Path) -> WeightFacts | None:
    """Tensor names, total bytes and parameter count, or None when neither an index nor a
    top-level safetensors file exists."""
    index = _read_index(directory / INDEX_FILE)
    headers = [h for h in map(read_header, sorted(directory.glob("*.safetensors"))) if h]
    if index is None and not headers:
        return None
    header_names = tuple(n for h in headers for n in h if n != "__metadata__")
    params = _param_count(headers) if headers else None
    if index is not None:
        names, total = index
        covered = bool(headers) and set(names) <= set(header_names)
        return WeightFacts(
            tensor_names=names,
            weight_bytes=total
            if total is not None
            else (_data_bytes(headers) if covered else None),
            param_count=params if covered else None,
            source="index+headers" if covered else "index",
        )
    return WeightFacts(header_names, _data_bytes(headers), params, "headers")


def read_header(path: Path) -> dict[str, Any] | None:
    """The JSON header of one .safetensors file, or None when it is not a valid header."""
    try:
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) != 8:
                return None
            (length,) = struct.unpack("<Q", prefix)
            if length > _MAX_HEADER_BYTES:
                return None
            header = json.loads(handle.read(length).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return header if isinstance(header, dict) else None


def count_mtp_tensors(names: tuple[str, ...], num_hidden_layers: int | None) -> int:
    """Tensors that belong to MTP layers: names with an "mtp"/"nextn" segment (MiMo
    `model.mtp_layers.*`, Qwen3.5 `mtp.*`), or decoder layers numbered at or past
    `num_hidden_layers` (DeepSeek-V3 stores its MTP layer as `model.layers.61.*`)."""
    count = 0
    for name in names:
        lowered = name.lower()
        if any(marker in part for part in lowered.split(".") for marker in _MTP_MARKERS):
            count += 1
            continue
        match = _LAYER.search(name)
        if match and num_hidden_layers is not None and int(match.group(1)) >= num_hidden_layers:
            count += 1
    return count


def _read_index(path: Path) -> tuple[tuple[str, ...], int | None] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("weight_map"), dict):
        return None
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    return tuple(sorted(data["weight_map"])), int(total) if isinstance(total, int | float) else None


def _data_bytes(headers: list[dict[str, Any]]) -> int:
    return sum(
        int(t["data_offsets"][1]) - int(t["data_offsets"][0])
        for h in headers
        for name, t in h.items()
        if name != "__metadata__" and isinstance(t, dict) and "data_offsets" in t
    )


def _param_count(headers: list[dict[str, Any]]) -> int:
    return sum(
        math.prod(int(d) for d in t.get("shape", ()))
        for h in headers
        for name, t in h.items()
        if name != "__metadata__" and isinstance(t, dict)
    )
