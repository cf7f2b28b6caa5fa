"""Hostile-input fuzzers (issue 16): mutated checkpoint metadata (config.json, the weight index,
safetensors headers, tokenizer files), YAML built from anchors, aliases, tags and odd keys, and
profile fields set to values at and beyond every bound. Whatever the input, specdeploy answers
with a documented exit code and a message, never a traceback. Each fuzzer runs in seconds."""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from orchestrator.cli import cli
from orchestrator.errors import ProfileError
from orchestrator.profile.loading import parse_profile
from tests.support import EXAMPLE_PROFILES, REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "checkpoints"


def fast(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


#: Values that broke the readers and the memory arithmetic, plus ordinary ones.
hostile_values = st.one_of(
    st.sampled_from(
        [math.inf, -math.inf, math.nan, -1, 0, 2**53 + 1, 2**80, 10**400, 1.5, 1e308, True,
         False, None, "", "4096", "Infinity", [], [1, 2], {}, {"a": 1}, "x" * 500, [[]]]
    ),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)  # fmt: skip


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in list(node.items())[:40]:
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:5]):
            out += _paths(value, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return doc


def _json(value: Any) -> str:
    # Python's json writes Infinity/NaN and integers of any size, as hostile files may hold.
    return json.dumps(value, default=str)


@st.composite
def mutated_checkpoints(draw: st.DrawFn) -> tuple[str, dict[str, bytes]]:
    """(fixture slug, file name -> new content) for one or two mutated metadata files."""
    slug = draw(st.sampled_from(["qwen3-8b", "eagle3-llama3.1-8b", "mimo-7b-base"]))
    directory = FIXTURES / slug
    names = sorted(p.name for p in directory.iterdir() if p.suffix in (".json", ".safetensors"))
    changed: dict[str, bytes] = {}
    for name in draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)):
        raw = (directory / name).read_bytes()
        if name.endswith(".safetensors"):
            (length,) = struct.unpack("<Q", raw[:8])
            doc = json.loads(raw[8 : 8 + length])
        else:
            doc = json.loads(raw)
        path = draw(st.sampled_from(_paths(doc)))
        doc = _set(doc, path, draw(hostile_values))
        body = _json(doc).encode()
        if name.endswith(".safetensors"):
            declared = draw(st.sampled_from([len(body), len(body) + 7, 2**40]))
            changed[name] = struct.pack("<Q", declared) + body
        else:
            changed[name] = body
    return slug, changed


@fast(40)
@given(case=mutated_checkpoints())
def test_mutated_checkpoints_never_crash_any_command(
    tmp_path_factory: Any, case: tuple[str, dict[str, bytes]]
) -> None:
    slug, changed = case
    root: Path = tmp_path_factory.mktemp("ckpt")
    model = root / "model"
    shutil.copytree(FIXTURES / slug, model)
    for name, content in changed.items():
        (model / name).write_bytes(content)
    profile = root / "p.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "specdeploy/v1",
                "kind": "SpeculativeDeployment",
                "metadata": {"name": "fuzz"},
                "engine": {"name": "vllm", "version": "0.32.0"},
                "target": {"model": "./model"},
                "proposer": {"method": "ngram", "num_speculative_tokens": 3},
            }
        )
    )
    runner = CliRunner()
    for args in (
        ["inspect", str(model), "--offline", "--format", "json"],
        ["validate", str(profile), "--offline", "--format", "json"],
        ["plan", str(profile), "--offline"],
        ["render", str(profile), "--out", str(root / "out"), "--offline"],
    ):
        result = runner.invoke(cli, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args,
            changed,
            result.output,
        )
        assert result.exit_code in (0, 3, 4, 5), (args, result.output)
        assert "Traceback" not in result.output
        event(f"{args[0]} exit {result.exit_code}")


# --- YAML built from the constructs that broke the loader ----------------------------------------

_SCALARS = ["1", "x", "0x" + "f" * 40, "1.0e+400", ".nan", "~", "true", "'q'", '""', "2024-01-01",
            "9" * 120, "1:2:3", "<<"]  # fmt: skip
_TAGS = ["", "", "", "!!int ", "!!float ", "!!bool ", "!!str ", "!!timestamp ", "!!binary ",
         "!!null ", "!!set ", "!!python/name:os.system ", "!custom "]  # fmt: skip


@st.composite
def yaml_nodes(draw: st.DrawFn, depth: int = 0) -> str:
    anchor = draw(st.sampled_from(["", "", "&a ", "&b "]))
    tag = draw(st.sampled_from(_TAGS))
    kind = draw(st.sampled_from(["scalar", "alias", "seq", "map"] if depth < 4 else ["scalar"]))
    if kind == "scalar":
        return f"{anchor}{tag}{draw(st.sampled_from(_SCALARS))}"
    if kind == "alias":
        return draw(st.sampled_from(["*a", "*b", "*c"]))
    items = draw(st.lists(yaml_nodes(depth + 1), max_size=4))
    if kind == "seq":
        return f"{anchor}{tag}[{', '.join(items)}]"
    keys = draw(st.lists(st.one_of(st.sampled_from(["a", "b", "1", "~", "yes", "<<", "? [x]"]),
                                   yaml_nodes(depth + 1)), min_size=len(items), max_size=len(items)))  # fmt: skip
    pairs = ", ".join(
        f"{k}: {v}" if not k.startswith("?") else f"{k} : {v}"
        for k, v in zip(keys, items, strict=True)
    )
    return f"{anchor}{tag}{{{pairs}}}"


@fast(300)
@given(body=yaml_nodes())
def test_the_yaml_constructor_never_crashes(body: str) -> None:
    for text in (
        body,
        f"apiVersion: specdeploy/v1\nkind: SpeculativeDeployment\nmetadata: {body}\n",
    ):
        try:
            parse_profile(text, "fuzz.yaml")
        except ProfileError as exc:
            assert exc.what and exc.fix


# --- profile fields at and beyond their bounds ----------------------------------------------------

EXAMPLES = [yaml.safe_load(p.read_text()) for p in EXAMPLE_PROFILES]
FIELDS = [
    ("hardware", "tensor_parallel_size"), ("hardware", "pipeline_parallel_size"),
    ("hardware", "gpus_per_node"), ("serving", "max_model_len"), ("serving", "max_concurrency"),
    ("serving", "gpu_memory_fraction"), ("serving", "port"), ("deploy", "replicas"),
    ("proposer", "num_speculative_tokens"), ("proposer", "draft_tensor_parallel_size"),
    ("target", "model"), ("target", "revision"), ("metadata", "name"), ("engine", "version"),
    ("engine", "image"), ("serving", "extra_args"),
]  # fmt: skip
#: Values at the edge of what each field accepts (so some renders get through to the end) ...
edge_values = st.sampled_from(
    [1, 2, 8, 1024, 2**31 - 1, 65535, 0.05, 1.0, "qwen3-edge", "0.32.0", "99.0.0", [],
     ["--enforce-eager"], "vllm/vllm-openai@sha256:" + "a" * 64, "Qwen/Qwen3-8B"]
)  # fmt: skip
#: ... and values beyond it.
bound_values = st.one_of(
    edge_values,
    hostile_values,
    st.sampled_from([1025, 2**31, 65536, "~root/x", "a\nb", "a\x00b", "m" * 256,
                     "org/" + "m" * 97, ["--hf-token", "hf_" + "a" * 34], "x\n"]),
)  # fmt: skip


@fast(60)
@given(
    doc=st.sampled_from(EXAMPLES),
    changes=st.lists(st.tuples(st.sampled_from(FIELDS), bound_values), min_size=1, max_size=2),
)
def test_fields_beyond_their_bounds_never_crash_and_never_name_files_badly(
    tmp_path_factory: Any, doc: Any, changes: list[tuple[tuple[str, str], Any]]
) -> None:
    doc = json.loads(json.dumps(doc))
    for (section, key), value in changes:
        doc.setdefault(section, {})[key] = value
    directory: Path = tmp_path_factory.mktemp("p")
    path = directory / "profile.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    out = directory / "out"
    result = CliRunner().invoke(cli, ["render", str(path), "--out", str(out), "--offline"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 3, 4, 5), result.output
    event(f"render exit {result.exit_code}")
    if result.exit_code == 0:
        for written in out.rglob("*"):
            assert written.name.isprintable(), written
