"""Property: however a profile is mutated, specdeploy answers with an exit code and a message,
never a traceback; and a profile it accepts always renders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import cli
from tests.support import EXAMPLE_PROFILES

EXAMPLES = [yaml.safe_load(p.read_text()) for p in EXAMPLE_PROFILES]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        [
            "vllm",
            "sglang",
            "trtllm",
            "eagle3",
            "mtp",
            "ngram",
            "draft_model",
            "0.32.0",
            "1.2.1",
            "0.5.23",
            "--speculative-model",
            "cpu",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _mutate(doc: Any, path: tuple[Any, ...], action: str, value: Any, key: str) -> Any:
    if not path:
        return value if action == "replace" else doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete" and isinstance(parent, dict):
        del parent[last]
    elif action == "rename" and isinstance(parent, dict) and key not in parent:
        parent[key] = parent.pop(last)
    elif action == "insert" and isinstance(parent[last], dict):
        parent[last][key] = value
    return doc


@st.composite
def mutated_profiles(draw: st.DrawFn) -> Any:
    doc = json.loads(json.dumps(draw(st.sampled_from(EXAMPLES))))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "rename", "insert"]))
        doc = _mutate(doc, path, action, draw(values), draw(st.text(min_size=1, max_size=12)))
    return doc


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(doc=mutated_profiles())
def test_mutated_profiles_never_crash(tmp_path_factory: Any, doc: Any) -> None:
    directory: Path = tmp_path_factory.mktemp("p")
    path = directory / "profile.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    out = directory / "out"
    result = CliRunner().invoke(
        cli, ["render", str(path), "--out", str(out), "--format", "json", "--offline"]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 3, 4, 5), result.output
    document = json.loads(result.stdout)
    assert document["ok"] == (result.exit_code == 0)
    assert out.exists() == (result.exit_code == 0)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=400))
def test_arbitrary_text_never_crashes(text: str) -> None:
    from orchestrator.errors import ProfileError
    from orchestrator.profile.loading import parse_profile

    try:
        parse_profile(text, "fuzz.yaml")
    except ProfileError as exc:
        assert exc.what and exc.fix


@st.composite
def reshaped_profiles(draw: st.DrawFn) -> Any:
    """An example with its deployment shape redrawn: the fields render reads beyond validate's
    own checks (parallelism over nodes, derived object names, the baseline twin)."""
    doc = json.loads(json.dumps(draw(st.sampled_from(EXAMPLES))))
    hardware = doc.setdefault("hardware", {})
    hardware["tensor_parallel_size"] = draw(st.sampled_from([1, 2, 3, 4, 8, 9, 16]))
    hardware["pipeline_parallel_size"] = draw(st.sampled_from([1, 2, 3]))
    hardware["gpus_per_node"] = draw(st.sampled_from([1, 2, 4, 8]))
    doc["metadata"]["name"] = draw(st.sampled_from(["a", "demo-1", "x" * 47, "x" * 48, "9lives"]))
    doc.setdefault("deploy", {})["baseline"] = draw(st.booleans())
    return doc


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(doc=reshaped_profiles())
def test_what_validate_accepts_renders_and_what_it_refuses_does_not(
    tmp_path_factory: Any, doc: Any
) -> None:
    directory: Path = tmp_path_factory.mktemp("p")
    path = directory / "profile.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    validated = CliRunner().invoke(cli, ["validate", str(path), "--offline"])
    rendered = CliRunner().invoke(
        cli, ["render", str(path), "--out", str(directory / "out"), "--offline"]
    )
    assert validated.exit_code in (0, 3, 4, 5), validated.output
    assert rendered.exit_code == validated.exit_code, (validated.output, rendered.output)
