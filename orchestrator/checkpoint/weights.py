"""Weight facts without reading weights: `model.safetensors.index.json` and safetensors headers.

A safetensors file starts with an 8-byte little-endian header length followed by a JSON header
mapping each tensor name to its dtype, shape and byte offsets (huggingface/safetensors format
spec). Only that header is read; the tensor data after it is never touched.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Final

from orchestrator.checkpoint import files
from orchestrator.checkpoint.files import BadValue, UnreadableMetadata, read_json_object
from orchestrator.untrusted_files import UnreadableFile, parse_json, read_regular_file

INDEX_FILE = "model.safetensors.index.json"
#: The format's own cap on the JSON header (safetensors `MAX_HEADER_SIZE`,
#: https://github.com/huggingface/safetensors/blob/45c8c2cbd1a86ce87866a584410984bcd9aa25fc/safetensors/src/tensor.rs#L8).
MAX_HEADER_BYTES: Final = 100_000_000
#: Most top-level .safetensors files read; the largest real checkpoints have a few hundred shards.
MAX_SHARDS: Final = 10_000
_LAYER = re.compile(r"(?:^|\.)layers\.([0-9]{1,9})\.")
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
    top-level safetensors file exists. Raises `UnreadableMetadata` when the index or a header is
    present but unusable (a guessed total from the remaining files would be silently wrong)."""
    index = _read_index(directory / INDEX_FILE)
    headers = [read_header(path) for path in _shards(directory)]
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


def read_header(path: Path) -> dict[str, Any]:
    """The checked JSON header of one .safetensors file: every tensor entry has a string dtype,
    a shape of whole numbers and two ordered byte offsets. Raises `UnreadableMetadata`."""
    try:
        prefix = read_regular_file(path, 8, whole=False) or b""
        if len(prefix) < 8:
            raise UnreadableMetadata(path, "is shorter than a safetensors header (8 bytes)")
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_HEADER_BYTES:
            raise UnreadableMetadata(
                path, f"declares a {length}-byte header (the format allows {MAX_HEADER_BYTES})"
            )
        raw = read_regular_file(path, 8 + length, whole=False) or b""
    except UnreadableFile as exc:
        raise UnreadableMetadata(path, exc.problem) from None
    if len(raw) < 8 + length:
        raise UnreadableMetadata(
            path, f"declares a {length}-byte header but ends {len(raw) - 8} bytes after it starts"
        )
    try:
        header = parse_json(raw[8 : 8 + length])
    except ValueError as exc:
        raise UnreadableMetadata(path, f"has a header that {exc}") from None
    if not isinstance(header, dict):
        raise UnreadableMetadata(path, f"has a header that is {files.describe(header)}")
    try:
        for name, entry in header.items():
            if name != "__metadata__":
                _check_tensor(name, entry)
    except BadValue as exc:
        raise exc.in_file(path) from None
    return header


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


def _shards(directory: Path) -> list[Path]:
    try:
        found = sorted(islice(directory.glob("*.safetensors"), MAX_SHARDS + 1))
    except OSError as exc:
        raise UnreadableMetadata(directory, f"cannot be listed ({exc.strerror or exc})") from None
    if len(found) > MAX_SHARDS:
        raise UnreadableMetadata(directory, f"holds more than {MAX_SHARDS} .safetensors files")
    return found


def _check_tensor(name: str, entry: Any) -> None:
    if not isinstance(entry, dict):
        raise BadValue(name, f"is {files.describe(entry)}, not a tensor entry")
    if not isinstance(entry.get("dtype"), str):
        raise BadValue(f"{name}.dtype", f"is {files.describe(entry.get('dtype'))}, not a string")
    shape = entry.get("shape")
    if not isinstance(shape, list):
        raise BadValue(f"{name}.shape", f"is {files.describe(shape)}, not a list")
    for i, dim in enumerate(shape):
        if files.count(dim, f"{name}.shape[{i}]") is None:
            raise BadValue(f"{name}.shape[{i}]", "is null, not a whole number")
    if math.prod(shape) > files.MAX_COUNT:
        raise BadValue(f"{name}.shape", "holds more than 2^53 elements")
    offsets = entry.get("data_offsets")
    if not isinstance(offsets, list) or len(offsets) != 2:
        raise BadValue(f"{name}.data_offsets", f"is {files.describe(offsets)}, not [begin, end]")
    begin = files.count(offsets[0], f"{name}.data_offsets[0]")
    end = files.count(offsets[1], f"{name}.data_offsets[1]")
    if begin is None or end is None or end < begin:
        raise BadValue(f"{name}.data_offsets", f"is [{begin}, {end}], not two ordered offsets")


def _read_index(path: Path) -> tuple[tuple[str, ...], int | None] | None:
    data = read_json_object(path)
    if data is None:
        return None
    try:
        weight_map = files.mapping(data.get("weight_map"), "weight_map")
        if "weight_map" not in data:
            raise BadValue("weight_map", "is missing")
        metadata = files.mapping(data.get("metadata"), "metadata")
        total = files.count(metadata.get("total_size"), "metadata.total_size")
    except BadValue as exc:
        raise exc.in_file(path) from None
    return tuple(sorted(weight_map)), total


def _data_bytes(headers: list[dict[str, Any]]) -> int:
    return sum(
        int(t["data_offsets"][1]) - int(t["data_offsets"][0])
        for h in headers
        for name, t in h.items()
        if name != "__metadata__"
    )


def _param_count(headers: list[dict[str, Any]]) -> int:
    return sum(
        math.prod(int(d) for d in t["shape"])
        for h in headers
        for name, t in h.items()
        if name != "__metadata__"
    )
