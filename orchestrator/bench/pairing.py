"""Refuse a confounded A/B: two launches may differ only in their speculative flags.

The inference-perf KubeCon NA 2025 EAGLE-3 demo compared a speculative server against a baseline
that also turned off prefix caching and chunked prefill, so its "-39 % output tok/s" measured
three changes at once
(https://github.com/kubernetes-sigs/inference-perf/tree/7de5ef2e/demos/kubecon-na-2025). When both arms come from known profiles, the
bench diffs their rendered launches (image, argv, env, engine config files) with the proposer
removed, and fails on any other difference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import BenchError

_SPECULATIVE_PREFIX = "--speculative"
"""vLLM `--speculative-config` (https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/engine/arg_utils.py#L1826-L1828),
SGLang `--speculative-*` (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/fields/spec.py#L31-L51)."""
_SPECULATIVE_KEYS = frozenset({"speculative_config"})
"""TensorRT-LLM: the speculative block of the extra options YAML (`speculative_config` of the
LLM-API options, tests/fixtures/trtllm/1.2.0.json)."""


def launch_differences(
    candidate: EngineLaunch, baseline: EngineLaunch, speculative_flags: Iterable[str] = ()
) -> list[str]:
    """Every difference between two launches other than the proposer, one line each."""
    spec = frozenset(speculative_flags)
    found: list[str] = []
    for name, a, b in (
        ("engine", candidate.engine, baseline.engine),
        ("engine version", candidate.version, baseline.version),
        ("image", candidate.image, baseline.image),
    ):
        if a != b:
            found.append(f"{name}: candidate {a!r}, baseline {b!r}")
    found += _diff("argv", _flags(candidate.argv, spec), _flags(baseline.argv, spec))
    found += _diff("env", dict(candidate.env), dict(baseline.env))
    found += _diff("config file", _files(candidate), _files(baseline))
    return found


def speculative_only(candidate: EngineLaunch, speculative_flags: Iterable[str] = ()) -> bool:
    """True when the candidate's launch carries at least one speculative flag or config key."""
    spec = frozenset(speculative_flags)
    in_argv = any(_is_speculative(_flag_name(t), spec) for t in candidate.argv if t[:2] == "--")
    in_files = any(
        isinstance(parsed, dict) and _SPECULATIVE_KEYS & parsed.keys()
        for parsed in (_parse(text) for text in candidate.config_files.values())
    )
    return in_argv or in_files


def require_same_target(
    candidate: EngineLaunch,
    baseline: EngineLaunch,
    speculative_flags: Iterable[str] = (),
    *,
    names: tuple[str, str] = ("candidate", "baseline"),
) -> None:
    """Raise BenchError unless the two launches differ only in the proposer."""
    flags = tuple(speculative_flags)
    if not speculative_only(candidate, flags):
        raise BenchError(
            f"--candidate-profile {names[0]}: its launch has no speculative flags",
            why="the candidate arm must speculate, or the A/B compares a baseline with itself",
            fix="give the candidate profile a proposer: block (method and model)",
        )
    differences = launch_differences(candidate, baseline, flags)
    if differences:
        listed = "; ".join(differences)
        raise BenchError(
            f"the {names[0]} and {names[1]} launches differ in more than the proposer: {listed}",
            why="a confounded A/B measures those changes together with speculation, so its "
            "speedup cannot be attributed to the proposer",
            fix="benchmark one profile against its baseline twin (deploy.baseline: true), or make "
            "the two profiles identical except for the proposer: block",
        )


def _flags(argv: Iterable[str], spec: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """argv -> {flag: values in order}; positionals keyed as '<argument N>'."""
    tokens = list(argv)
    flags: dict[str, list[str]] = {}
    position, i = 0, 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--"):
            name = _flag_name(token)
            if "=" in token:
                value = token.split("=", 1)[1]
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                i += 1
                value = tokens[i]
            else:
                value = "(set)"
            if not _is_speculative(name, spec):
                flags.setdefault(name, []).append(value)
        else:
            flags.setdefault(f"<argument {position}>", []).append(token)
            position += 1
        i += 1
    return {name: tuple(values) for name, values in flags.items()}


def _flag_name(token: str) -> str:
    return token.split("=", 1)[0]


def _is_speculative(name: str, spec: frozenset[str]) -> bool:
    return name in spec or name.startswith(_SPECULATIVE_PREFIX)


def _files(launch: EngineLaunch) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for name, text in launch.config_files.items():
        content = _parse(text)
        if isinstance(content, dict):
            content = {k: v for k, v in content.items() if k not in _SPECULATIVE_KEYS}
        parsed[name] = content
    return parsed


def _parse(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _diff(kind: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    found = []
    for key in sorted(a.keys() | b.keys()):
        left, right = a.get(key), b.get(key)
        if left != right:
            found.append(f"{kind} {key}: candidate {_show(left)}, baseline {_show(right)}")
    return found


def _show(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, tuple) and len(value) == 1:
        return repr(value[0])
    return repr(value)
