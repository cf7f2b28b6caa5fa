"""Fields that reach URLs and Kubernetes objects (issue 19 §4): a revision that climbs out of the
hub path or carries a newline into KServe's model.uri, and object names with spaces, `$( )` or
newlines, are refused at load (exit 3, the field and the value shown escaped, what/why/fix);
URLs are built with each path segment quoted. Each case runs the real CLI under the memory cap
and deadline of `capped_cli`, with no traceback, and changes nothing but the directory named."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from tests.hostile.capped_cli import specdeploy
from tests.hostile.loopback_servers import status_server
from tests.hostile.test_hostile_profiles import BASE
from tests.support import REPO_ROOT

#: (section replacing BASE's line of the same key, field path, text the message must hold)
REFUSED = {
    "target-revision-dotdot": (
        'target: {model: Qwen/Qwen3-8B, revision: "main/../../../../internal"}',
        "target.revision", "'main/../../../../internal' holds '..'",
    ),
    "target-revision-newline-subshell": (
        'target: {model: Qwen/Qwen3-8B, revision: "main\\n$(touch pwned)"}',
        "target.revision", "'main\\n$(touch pwned)' holds '\\n'",
    ),
    "proposer-revision-space": (
        "proposer: {method: draft_model, model: Qwen/Qwen3-0.6B, revision: 'v 1'}",
        "proposer.revision", "'v 1' holds ' '",
    ),
    "proposer-revision-nel": (
        'proposer: {method: draft_model, model: Qwen/Qwen3-0.6B, revision: "main\\x85x"}',
        "proposer.revision", "holds '\\x85'",
    ),
    "revision-leading-dash": (
        "target: {model: Qwen/Qwen3-8B, revision: --help}", "target.revision", "starts with '-'",
    ),
    "revision-lock": (
        "target: {model: Qwen/Qwen3-8B, revision: main.lock}", "target.revision", "'.lock'",
    ),
    "revision-reflog": (
        "target: {model: Qwen/Qwen3-8B, revision: 'main@{1}'}", "target.revision", "'@{'",
    ),
    "revision-long": (
        "target: {model: Qwen/Qwen3-8B, revision: " + "a" * 5000 + "}",
        "target.revision", "at most 255 characters",
    ),
    "policy-gateway-space": (
        "policy: {mode: static, gateway: {name: 'my gateway'}}",
        "policy.gateway.name", "'my gateway' is not a valid Gateway name",
    ),
    "policy-gateway-subshell": (
        "policy: {mode: static, gateway: {name: '$(id)'}}",
        "policy.gateway.name", "'$(id)' is not a valid Gateway name",
    ),
    "policy-gateway-namespace-newline": (
        'policy: {mode: static, gateway: {name: gw, namespace: "infra\\n"}}',
        "policy.gateway.namespace", "'infra\\n' is not a valid namespace name",
    ),
    "policy-gateway-section-dots": (
        "policy: {mode: static, gateway: {name: gw, section_name: 'a..b'}}",
        "policy.gateway.section_name", "is not a valid Gateway listener name",
    ),
    "deploy-gateway-newline": (
        'deploy: {gateway: "infra/gw\\n"}', "deploy.gateway", "is not a valid Gateway name",
    ),
    "deploy-gateway-two-slashes": (
        "deploy: {gateway: a/b/c}", "deploy.gateway", "more than one '/'",
    ),
    "namespace-too-long": (
        "metadata: {name: hostile, namespace: " + "n" * 64 + "}",
        "metadata.namespace", "of at most 63 characters",
    ),
    "storage-class-upper": (
        "deploy: {model_cache: {storage_class: Fast-SSD}}",
        "deploy.model_cache.storage_class", "not a valid StorageClass name",
    ),
    "secret-dotdot": (
        "deploy: {hf_token_secret: a..b}", "deploy.hf_token_secret", "not a valid Secret name",
    ),
}  # fmt: skip


def _profile(section: str) -> str:
    key = section.split(":", 1)[0]
    kept = [line for line in BASE.splitlines() if not line.startswith(f"{key}:")]
    return "\n".join([*kept, section]) + "\n"


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_validate_refuses_with_the_field_and_the_value_escaped(tmp_path: Path, case: str) -> None:
    section, field, expected = REFUSED[case]
    path = tmp_path / "p.yaml"
    path.write_text(_profile(section))
    before = _tree(tmp_path)
    run = specdeploy("validate", str(path), "--offline")
    assert run.returncode == 3, run.output
    assert f"{field}: " in run.output and expected in run.output, run.output
    assert "why:" in run.output and "fix:" in run.output
    assert "\n$(touch" not in run.output  # the newline is shown escaped, never printed
    assert len(max(run.output.splitlines(), key=len)) < 600  # a 5000-character value is cut
    assert _tree(tmp_path) == before
    assert not (REPO_ROOT / "pwned").exists() and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("platform", ["kubernetes", "kserve", "kaito"])
def test_render_never_emits_a_hostile_revision(tmp_path: Path, platform: str) -> None:
    section, _, _ = REFUSED["target-revision-newline-subshell"]
    path = tmp_path / "p.yaml"
    path.write_text(_profile(section))
    out = tmp_path / "out"
    run = specdeploy("render", str(path), "--out", str(out), "--platform", platform, "--offline")
    assert run.returncode == 3, run.output
    assert "target.revision" in run.output
    assert not out.exists()
    assert sorted(_tree(tmp_path)) == ["p.yaml"]


def test_a_legal_slashed_revision_renders_verbatim_into_kserve(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(_profile("target: {model: Qwen/Qwen3-8B, revision: refs/pr/1}"))
    out = tmp_path / "out"
    run = specdeploy("render", str(path), "--out", str(out), "--platform", "kserve", "--offline")
    assert run.returncode == 0, run.output
    (service,) = (out / "k8s").glob("llminferenceservice-*.yaml")
    assert "uri: hf://Qwen/Qwen3-8B:refs/pr/1\n" in service.read_text()


@pytest.mark.parametrize(
    ("revision", "path"),
    [
        ("refs/pr/1", "/acme/x/resolve/refs%2Fpr%2F1/config.json"),
        ("main/../../../../internal", "/acme/x/resolve/main%2F..%2F..%2F..%2F..%2Finternal/"),
        ("..", "/acme/x/resolve/%2E%2E/config.json"),
        ("main?x=1#y", "/acme/x/resolve/main%3Fx%3D1%23y/config.json"),
    ],
)
def test_the_hub_check_quotes_the_revision_as_one_segment(
    tmp_path: Path, revision: str, path: str
) -> None:
    """`inspect --revision` takes the value unvalidated: quoting alone keeps it in its segment."""
    with status_server(503) as (url, seen):
        env = {"HF_ENDPOINT": url, "HF_HUB_OFFLINE": "", "HF_HOME": str(tmp_path / "hf")}
        run = specdeploy("inspect", "acme/x", "--revision", revision, env=env, cwd=tmp_path)
    assert run.returncode == 4, run.output
    assert len(seen) == 1 and seen[0].startswith(f"HEAD {path}"), seen
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # HF_HOME not even created


SCHEMA = json.loads((REPO_ROOT / "profile.schema.json").read_text())
#: Revisions git and the hub accept, and values the loader refuses: the JSON Schema (editors, the
#: CRD) must agree with the loader on every one.
GOOD_REVISIONS = ["main", "refs/pr/1", "v1.0", "b968826", "a" * 40, "f" * 64, "release-2024.01"]
BAD_REVISIONS = ["a..b", "x\n", "a b", "-x", "/x", "x/", "x.", "a.lock", "a.lock/b", "@", "a@{1}",
                 "a//b", "a/.b", "x~1", "x^", "a:b", "a?", "a*", "a[", "a\\b", "\x85", "é"]  # fmt: skip


@pytest.mark.parametrize("value", GOOD_REVISIONS + BAD_REVISIONS)
def test_the_json_schema_and_the_loader_agree_on_revisions(value: str) -> None:
    from orchestrator.profile.schema import REVISION_CHARS, REVISION_NOT, TargetSpec

    schema = {"$defs": SCHEMA["$defs"], **SCHEMA["$defs"]["TargetSpec"]}
    by_schema = jsonschema.Draft202012Validator(schema).is_valid(
        {"model": "a/b", "revision": value}
    )
    try:
        TargetSpec(model="a/b", revision=value)
        by_loader = True
    except ValueError:
        by_loader = False
    assert by_schema == by_loader == (value in GOOD_REVISIONS)
    # The published patterns are the ones the loader uses (one source of truth).
    assert re.fullmatch(REVISION_CHARS, "main") and REVISION_NOT in json.dumps(SCHEMA).replace(
        "\\\\", "\\"
    )
