"""The user catalog against hostile input (issue 19 §2): a damaged entry hides nothing else and is
said once, concurrent `catalog add` runs keep every entry, ids the hub would refuse are refused,
the file's mode survives, a full disk leaves the catalog as it was, and shadowing a built-in entry
is said. Every run has a memory cap and a deadline, ends without a traceback, and changes nothing
outside the catalog's directory."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hostile.capped_cli import (
    TIME_LIMIT_S,
    Run,
    specdeploy,
)
from tests.support import REPO_ROOT, write_profile

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "checkpoints"
SMALL = FIXTURES / "qwen3-0.6b"
NGRAM = {"method": "ngram", "num_speculative_tokens": 4}


@dataclass(frozen=True)
class Sandbox:
    root: Path
    catalog: Path
    env: dict[str, str]

    def run(self, *args: str) -> Run:
        return specdeploy(*args, env=self.env, cwd=self.root)

    def add(self, name: str, directory: Path = SMALL) -> Run:
        return self.run("catalog", "add", str(directory), "--as", name)

    def models(self) -> dict[str, object]:
        return dict(json.loads(self.catalog.read_text(encoding="utf-8"))["models"])


def _state(root: Path, skip: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `root` (outside `skip`) with its mode and content."""
    return {
        str(p.relative_to(root)): (p.lstat().st_mode, p.read_bytes() if p.is_file() else b"")
        for p in sorted(root.rglob("*"))
        if skip not in p.parents and p != skip
    }


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    """A catalog directory of its own, an empty HF cache and home; on teardown, nothing outside
    the catalog directory (the profiles, the cache, the fixtures read) has changed."""
    catalog_dir = tmp_path / "team-catalog"
    (tmp_path / "hub").mkdir()
    (tmp_path / "home").mkdir()
    env = {
        "SPECDEPLOY_CATALOG": str(catalog_dir / "catalog.json"),
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config"),
    }
    box = Sandbox(tmp_path, catalog_dir / "catalog.json", env)
    write_profile(tmp_path, "builtin.yaml", target={"model": "Qwen/Qwen3-8B"}, proposer=NGRAM)
    write_profile(tmp_path, "good.yaml", target={"model": "acme/good"}, proposer=NGRAM)
    write_profile(tmp_path, "bad.yaml", target={"model": "acme/bad"}, proposer=NGRAM)
    fixtures_before = _state(FIXTURES, catalog_dir)
    yield box
    assert _state(FIXTURES, catalog_dir) == fixtures_before


def _outside(box: Sandbox) -> dict[str, tuple[int, bytes]]:
    return _state(box.root, box.catalog.parent)


DAMAGE: dict[str, Callable[[dict[str, object]], object]] = {
    "a string": lambda entry: "not an entry",
    "1e26 layers": lambda entry: {**entry, "config": {"num_hidden_layers": 1e26}},
    "missing config": lambda entry: {"roles": ["target"], "added_from": "hand-written"},
    "wrong types": lambda entry: {**entry, "roles": "target", "weight_bytes": "lots"},
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_entry_is_said_once_and_hides_nothing_else(sandbox: Sandbox, damage: str) -> None:
    assert sandbox.add("acme/good").returncode == 0
    document = json.loads(sandbox.catalog.read_text(encoding="utf-8"))
    document["models"]["acme/bad"] = DAMAGE[damage](document["models"]["acme/good"])
    sandbox.catalog.write_text(json.dumps(document), encoding="utf-8")
    catalog_before, outside_before = sandbox.catalog.read_bytes(), _outside(sandbox)
    said = f"Warning: user catalog {sandbox.catalog}: entry 'acme/bad' is skipped"

    built_in = sandbox.run("validate", "builtin.yaml", "--offline")
    assert built_in.returncode == 0, built_in.output
    assert built_in.stderr.count(said) == 1 and built_in.stderr.count("Warning:") == 1
    assert "  why: " in built_in.stderr and "  fix: " in built_in.stderr
    both = sandbox.run("validate", "builtin.yaml", "good.yaml", "--offline", "--format", "json")
    assert both.returncode == 0 and both.stderr.count(said) == 1  # once per run, not per model
    assert [d["ok"] for d in json.loads(both.stdout)] == [True, True]
    bad = sandbox.run("validate", "bad.yaml", "--offline")
    assert bad.returncode == 4 and "entry 'acme/bad' is skipped" in bad.stderr
    listed = sandbox.run("catalog", "list", "--catalog", "user")
    assert listed.returncode == 0 and "acme/good" in listed.stdout
    assert "acme/bad" not in listed.stdout and listed.stderr.count(said) == 1
    assert sandbox.catalog.read_bytes() == catalog_before and _outside(sandbox) == outside_before


@pytest.mark.parametrize("text", ["[]", '{"models": "none"}', "{", "\x00" * 64])
def test_a_catalog_that_is_not_a_mapping_hides_no_built_in_model(
    sandbox: Sandbox, text: str
) -> None:
    sandbox.catalog.parent.mkdir()
    sandbox.catalog.write_text(text, encoding="utf-8")
    run = sandbox.run("validate", "builtin.yaml", "--offline")
    assert run.returncode == 0, run.output
    assert run.stderr.count(f"Warning: user catalog {sandbox.catalog} is skipped") == 1
    refused = sandbox.add("acme/new")
    assert refused.returncode == 4 and "fix:" in refused.stderr
    assert sandbox.catalog.read_text(encoding="utf-8") == text


def test_sixteen_parallel_adds_keep_sixteen_entries(sandbox: Sandbox) -> None:
    """One round as users run it: 16 `python -m orchestrator catalog add` processes at once."""
    names = [f"acme/model-{i:02d}" for i in range(16)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        runs = list(pool.map(sandbox.add, names))
    assert [r.returncode for r in runs] == [0] * 16, [r.output for r in runs if r.returncode]
    assert sorted(sandbox.models()) == names


def _forked_add(catalog: str, name: str) -> None:
    """A child of the test process: `catalog add` through the same click command and code path
    as `python -m orchestrator catalog add`, without paying Python's start-up again."""
    from click.testing import CliRunner

    from orchestrator.cli import cli

    os.environ["SPECDEPLOY_CATALOG"] = catalog
    result = CliRunner().invoke(cli, ["catalog", "add", str(SMALL), "--as", name])
    os._exit(result.exit_code if "Traceback" not in result.output else 99)


def test_twenty_rounds_of_sixteen_concurrent_adds_keep_every_entry(sandbox: Sandbox) -> None:
    """The acceptance (16 concurrent adds keep 16 entries, 20 times over). 320 interpreter
    start-ups would take minutes on a shared CI machine, so each round forks 16 children of this
    process that run the `catalog add` command in-process (`_forked_add`): the same lock,
    read-modify-write and rename, with the import cost paid once. Each round has a deadline."""
    from orchestrator.cli import cli
    from orchestrator.cli.catalog_cmd import COMMANDS  # imported before forking, once

    assert cli is not None and COMMANDS
    fork = multiprocessing.get_context("fork")
    for round_number in range(20):
        catalog = sandbox.root / f"round-{round_number:02d}" / "catalog.json"
        names = [f"acme/r{round_number:02d}-{i:02d}" for i in range(16)]
        children = [fork.Process(target=_forked_add, args=(str(catalog), n)) for n in names]
        for child in children:
            child.start()
        deadline = time.monotonic() + TIME_LIMIT_S
        for child in children:
            child.join(max(0.0, deadline - time.monotonic()))
        assert all(not c.is_alive() for c in children), f"round {round_number} hung"
        assert [c.exitcode for c in children] == [0] * 16, round_number
        stored = json.loads(catalog.read_text(encoding="utf-8"))["models"]
        assert sorted(stored) == names, (round_number, len(stored))
        assert sorted(p.name for p in catalog.parent.iterdir()) == [
            "catalog.json",
            "catalog.json.lock",
        ]


@pytest.mark.parametrize("name", ["a/..", "acme/" + "x" * 300, "acme/..", "acme/a--b"])
def test_an_id_the_hub_refuses_is_refused_and_nothing_is_written(
    sandbox: Sandbox, name: str
) -> None:
    assert sandbox.add("acme/good").returncode == 0
    before, outside_before = sandbox.catalog.read_bytes(), _outside(sandbox)
    run = sandbox.add(name)
    assert run.returncode == 2, run.output
    assert "is not a hub id" in run.stderr and "why:" in run.stderr and "fix:" in run.stderr
    assert len(run.stderr) < 2000  # a 300-character part is named by its length
    assert sandbox.catalog.read_bytes() == before and _outside(sandbox) == outside_before


def test_a_0644_catalog_stays_0644(sandbox: Sandbox) -> None:
    assert sandbox.add("acme/first").returncode == 0
    sandbox.catalog.chmod(0o644)
    assert sandbox.add("acme/second").returncode == 0
    assert stat.S_IMODE(sandbox.catalog.stat().st_mode) == 0o644
    assert sorted(sandbox.models()) == ["acme/first", "acme/second"]


def _full_disk(box: Sandbox, *args: str) -> Run:
    return specdeploy(*args, env=box.env, cwd=box.root, full_disk=True)


def test_a_full_disk_is_exit_1_and_leaves_the_catalog_and_no_temporary_file(
    sandbox: Sandbox,
) -> None:
    assert sandbox.add("acme/first").returncode == 0
    before, outside_before = sandbox.catalog.read_bytes(), _outside(sandbox)
    run = _full_disk(sandbox, "catalog", "add", str(SMALL), "--as", "acme/second")
    assert run.returncode == 1, run.output
    assert f"cannot write the user catalog {sandbox.catalog}: No space left on device" in (
        run.stderr
    )
    assert "why:" in run.stderr and "fix: free space" in run.stderr
    assert sandbox.catalog.read_bytes() == before and _outside(sandbox) == outside_before
    assert sorted(p.name for p in sandbox.catalog.parent.iterdir()) == [
        "catalog.json",
        "catalog.json.lock",
    ]


def test_shadowing_a_built_in_entry_is_said_at_add_and_in_validate(sandbox: Sandbox) -> None:
    added = sandbox.add("Qwen/Qwen3-8B")
    assert added.returncode == 0
    assert "Warning: Qwen/Qwen3-8B shadows the built-in catalog entry Qwen/Qwen3-8B" in (
        added.stderr
    )
    text = sandbox.run("validate", "builtin.yaml", "--offline")
    assert text.returncode == 0, text.output
    source = f"Qwen/Qwen3-8B: facts from the user catalog {sandbox.catalog}"
    assert source in text.stdout and "shadows the built-in catalog entry" in text.stdout
    document = json.loads(sandbox.run("validate", "builtin.yaml", "--offline", "--format",
                                      "json").stdout)  # fmt: skip
    assert any(
        f["rule"] == "checkpoint.user-catalog" and source in f["what"] for f in document["findings"]
    )
