"""Which proposers `suggest` checks against a target, and in what order it lists them.

- native MTP and n-gram: always (the rules say when the target has no MTP layers);
- EAGLE-3 and EAGLE heads: catalog heads whose publisher names this target as their verifier, and
  heads trained for another model of the same architecture (the rules or the verifier then say
  why they do not fit);
- same-tokenizer drafts: built-in catalog entries with the `draft` role;
- for a hub id, every entry of the user catalog (heads and drafts a team recorded);
- for a local TARGET directory, every sibling directory with a config.json (heads and drafts
  placed beside it), and every entry of the user catalog. Built-in entries are matched to hub ids
  only (their verifiers are hub ids), so a local copy of a hub model gets them by being recorded
  with `specdeploy catalog add DIR --as ORG/NAME` and suggested by that id.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from orchestrator.checkpoint.catalog.entries import CatalogEntry, entry_info
from orchestrator.checkpoint.compare import normalise_model_name
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.plan.resolver import CheckpointSource
from orchestrator.profile.schema import SpecMethod
from orchestrator.suggest.types import KIND_ORDER, Candidate

#: Heads by the authors of EAGLE (SafeAILab) are listed first among heads for the same target.
ORIGINAL_AUTHORS = ("yuhuili",)


def find_candidates(
    target: CheckpointInfo,
    target_model: str,
    local_dir: Path | None,
    *,
    builtin: Iterable[CatalogEntry],
    user: Iterable[CatalogEntry],
    source: CheckpointSource,
) -> list[Candidate]:
    """Every proposer to check, in listing order within each kind."""
    found = [
        Candidate("mtp", "mtp", None, "the target's own layers"),
        Candidate("ngram", "ngram", None, "prompt lookup, no weights"),
    ]
    if local_dir is not None:
        found += _siblings(local_dir, source)
    else:
        found += _builtin(target, target_model, builtin)
    found += _user(target_model, user)
    return _dedupe(found)


def group_key(candidate: Candidate, target_model: str) -> tuple[int, int, int, int]:
    """Kinds in issue-12 order; heads for this target before others, EAGLE-3 before EAGLE, the
    original authors' first."""
    matches = 0 if _same_model(candidate.verifier, target_model) else 1
    generation = 0 if candidate.method in ("eagle3", "draft_model") else 1
    author = candidate.name.split("/")[0].lower()
    authored = 0 if author in ORIGINAL_AUTHORS else 1
    return (KIND_ORDER[candidate.kind], matches, generation, authored)


def trained_for_another(candidate: Candidate, target_model: str) -> str | None:
    """The verifier a head was trained for, when that is known and is not this target."""
    if candidate.kind != "head" or candidate.verifier is None:
        return None
    return None if _same_model(candidate.verifier, target_model) else candidate.verifier


def _builtin(
    target: CheckpointInfo, target_model: str, entries: Iterable[CatalogEntry]
) -> list[Candidate]:
    entries = tuple(entries)
    out = []
    for entry in entries:
        if _same_model(entry.model, target_model) or _is_alias(entry, target_model):
            continue
        if "head" in entry.roles:
            if _same_model(entry.verifier, target_model) or _same_architecture(
                target, entry, entries
            ):
                out.append(_head(entry, "built-in catalog", from_user=False))
        elif "draft" in entry.roles:
            out.append(Candidate("draft", "draft_model", entry.model, "built-in catalog", entry))
    return out


def _same_architecture(
    target: CheckpointInfo, head: CatalogEntry, entries: tuple[CatalogEntry, ...]
) -> bool:
    if head.verifier is None or not target.architectures:
        return False
    verifier = next((e for e in entries if _same_model(e.model, head.verifier)), None)
    if verifier is None:
        return False
    return bool(set(entry_info(verifier, verifier.model).architectures) & set(target.architectures))


def _user(target_model: str, entries: Iterable[CatalogEntry]) -> list[Candidate]:
    out = []
    for entry in entries:
        if _same_model(entry.model, target_model):
            continue
        if entry_info(entry, entry.model).eagle is not None:
            out.append(_head(entry, "user catalog", from_user=True))
        else:
            out.append(
                Candidate("draft", "draft_model", entry.model, "user catalog", entry, None, True)
            )
    return out


def _siblings(local_dir: Path, source: CheckpointSource) -> list[Candidate]:
    out = []
    for path in sorted(local_dir.parent.iterdir()):
        if path == local_dir or not (path / "config.json").is_file():
            continue
        info = source.resolve("proposer.model", str(path), None)
        if not isinstance(info, CheckpointInfo):
            continue
        if info.eagle is not None:
            method: SpecMethod = "eagle3" if info.eagle.generation == "eagle3" else "eagle"
            verifier = info.eagle.verifier_name
            out.append(
                Candidate("head", method, str(path), "beside the target", None, verifier, True)
            )
        else:
            out.append(
                Candidate("draft", "draft_model", str(path), "beside the target", None, None, True)
            )
    return out


def _head(entry: CatalogEntry, origin: str, *, from_user: bool) -> Candidate:
    eagle = entry_info(entry, entry.model).eagle
    method: SpecMethod = "eagle" if eagle is not None and eagle.generation == "eagle1" else "eagle3"
    verifier = entry.verifier or (eagle.verifier_name if eagle is not None else None)
    return Candidate("head", method, entry.model, origin, entry, verifier, from_user)


def _same_model(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    return normalise_model_name(a)[1] == normalise_model_name(b)[1]


def _is_alias(entry: CatalogEntry, model: str) -> bool:
    return any(_same_model(alias, model) for alias in entry.aliases)


def _dedupe(candidates: list[Candidate]) -> list[Candidate]:
    seen: set[tuple[str, str]] = set()
    out = []
    for candidate in candidates:
        key = (candidate.method, candidate.name.lower())
        if key not in seen:
            seen.add(key)
            out.append(candidate)
    return out
