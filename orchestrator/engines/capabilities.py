"""The capability matrix: per engine and release, the methods supported, flags removed or renamed,
and limits. Data lives in `capabilities.yaml` beside this module, each fact with its source.

A release entry describes the engine from that version on, until the next entry. A requested
version newer than the newest entry uses the newest rules (with a warning); one older than the
oldest entry is refused.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from orchestrator.datafiles import load_yaml
from orchestrator.errors import ProfileError
from orchestrator.profile.schema import ENGINE_NAMES, EngineName

Version = tuple[int, ...]
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.-]?(rc|post|dev)(\d+))?(?:\+\S+)?$")


@dataclass(frozen=True)
class RemovedFlag:
    """A flag (or speculative-config key) a release no longer accepts."""

    flag: str
    removed_in: str
    replacement: str
    source: str


@dataclass(frozen=True)
class EngineRelease:
    """What one engine release supports, as far as specdeploy renders it."""

    engine: EngineName
    version: str
    """The version the profile asked for."""
    rules_version: str
    """The matrix entry whose rules apply (<= version)."""
    newer_than_known: bool
    methods: frozenset[str]
    method_sources: str
    removed_flags: tuple[RemovedFlag, ...]
    eagle3_architectures: frozenset[str]
    """Target architectures the release can attach an EAGLE-3 head to."""
    mtp_architectures: frozenset[str]
    """Target architectures whose native MTP layers the release can serve."""
    features: frozenset[str]
    """Named behaviour switches (e.g. trtllm "config-flag"); see capabilities.yaml."""
    image: str
    notes: tuple[str, ...]

    def removed(self, flag: str) -> RemovedFlag | None:
        key = flag.split("=", 1)[0]
        for removed in self.removed_flags:
            if removed.flag == key and parse_version(removed.removed_in) <= parse_version(
                self.version
            ):
                return removed
        return None

    def has(self, feature: str) -> bool:
        return feature in self.features


def parse_version(text: str) -> Version:
    """ "0.10.1" -> (0, 10, 1, 0, 0); pre-releases sort before the release ("1.3.0rc1" < "1.3.0")
    and post-releases after it."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise ValueError(f"not a version: {text!r}")
    major, minor, patch, tag, number = match.groups()
    rank = {"dev": -2, "rc": -1, None: 0, "post": 1}[tag]
    return (int(major), int(minor), int(patch or 0), rank, int(number or 0))


def release_for(engine: EngineName, version: str) -> EngineRelease:
    """The capabilities of `engine` at `version`, or a ProfileError when it is too old."""
    table = _matrix()[engine]
    entries = sorted(table["releases"], key=lambda r: parse_version(str(r["version"])))
    wanted = parse_version(version)
    oldest = str(entries[0]["version"])
    if wanted < parse_version(oldest):
        raise ProfileError(
            f"engine.version: {engine} {version} is older than the oldest supported release "
            f"{oldest}",
            why=str(table.get("oldest_reason", "its flags are not in the capability matrix")),
            fix=f"set engine.version to {oldest} or newer (`specdeploy engines` lists releases)",
        )
    applicable = [r for r in entries if parse_version(str(r["version"])) <= wanted]
    return _build(
        engine, version, applicable, newer=wanted > parse_version(str(entries[-1]["version"]))
    )


def known_versions(engine: EngineName) -> list[str]:
    return [str(r["version"]) for r in _matrix()[engine]["releases"]]


def matrix() -> dict[str, Any]:
    """The raw capability matrix (for `specdeploy engines`)."""
    return _matrix()


def _build(
    engine: EngineName, version: str, applicable: list[dict[str, Any]], *, newer: bool
) -> EngineRelease:
    # Each entry lists what changes from its version on; fold them in order.
    methods: set[str] = set()
    eagle3: set[str] = set()
    mtp: set[str] = set()
    features: set[str] = set()
    notes: list[str] = []
    sources: list[str] = []
    for entry in applicable:
        methods |= set(entry.get("adds_methods", ()))
        methods -= set(entry.get("drops_methods", ()))
        eagle3 |= set(entry.get("adds_eagle3_architectures", ()))
        mtp |= set(entry.get("adds_mtp_architectures", ()))
        features |= set(entry.get("adds_features", ()))
        features -= set(entry.get("drops_features", ()))
        notes += [str(n) for n in entry.get("notes", ())]
        if entry.get("source"):
            sources.append(f"{entry['version']}: {entry['source']}")
    table = _matrix()[engine]
    removed = tuple(
        RemovedFlag(
            flag=str(r["flag"]),
            removed_in=str(r["removed_in"]),
            replacement=str(r["replacement"]),
            source=str(r["source"]),
        )
        for r in table.get("removed_flags", ())
    )
    return EngineRelease(
        engine=engine,
        version=version,
        rules_version=str(applicable[-1]["version"]),
        newer_than_known=newer,
        methods=frozenset(methods | {"none"}),
        method_sources="; ".join(sources),
        removed_flags=removed,
        eagle3_architectures=frozenset(eagle3),
        mtp_architectures=frozenset(mtp),
        features=frozenset(features),
        image=str(table["image"]).format(version=version),
        notes=tuple(notes),
    )


@functools.cache
def _matrix() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml("orchestrator.engines", "capabilities.yaml")
    missing = [e for e in ENGINE_NAMES if e not in data]
    if missing:  # a packaging bug, not a user error
        raise RuntimeError(f"capabilities.yaml lacks engines {missing}")
    return data
