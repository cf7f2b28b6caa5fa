"""How KServe starts vLLM, run under bash with a stub `vllm`: the speculative config (and every
other flag) reaches vLLM as the single tokens specdeploy rendered.

tests/fixtures/platforms/kserve/vllm-launch.reproduction.yaml is specdeploy's own minimal
reproduction of the `main` container command of KServe v0.20.0's default LLMInferenceServiceConfig
(its header names the upstream lines): `bash -c` with an `eval "exec vllm serve ... $@"` that joins
the container's args and splits and unquotes them again. KServe renders its config templates with
Go text/template over the config's JSON form (pkg/controller/v1alpha2/llmisvc/config_merge.go
ReplaceVariables, v0.20.0); `render_config` below does the same for the four actions the script
uses. The container's `args` follow the script's trailing `--`, so they become `$@`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.emitters.kserve import KserveEmitter
from tests.support import REPO_ROOT, write_profile
from tests.unit.emitters.conftest import PLATFORM_FIXTURES, ParseVllm
from tests.unit.manifests.conftest import valid_plan

TEMPLATE = PLATFORM_FIXTURES / "kserve" / "vllm-launch.reproduction.yaml"
STUB = """#!/bin/sh
for a in "$@"; do printf '%s\\0' "$a"; done > "$RECORD"
"""


def render_config(command: list[str], spec: dict[str, Any], namespace: str) -> list[str]:
    """Go text/template over the JSON of the command, as KServe's ReplaceVariables does."""
    text = json.dumps(command)
    tensor = (spec.get("parallelism") or {}).get("tensor")
    text = re.sub(
        r"\{\{ if and \.Spec\.Parallelism \.Spec\.Parallelism\.Tensor \}\}(.*?)\{\{ end \}\}",
        lambda m: m.group(1) if tensor else "",
        text,
    )
    values = {
        "{{ .Spec.Model.Name }}": spec["model"]["name"],
        "{{ .ObjectMeta.Namespace }}": namespace,
        "{{ .Spec.Parallelism.Tensor }}": str(tensor),
        # terminationGracePeriodSeconds unset: the function's default (15)
        "{{ shutdownTimeout .Spec.Template 15 }}": "15",
    }
    for action, value in values.items():
        text = text.replace(action, json.dumps(value)[1:-1])
    assert "{{" not in text, f"an action the test does not render: {text[text.index('{{') :][:80]}"
    return list(json.loads(text))


def run_main_container(body: dict[str, Any], tmp_path: Path) -> list[str]:
    """Run the template's command with the LLMInferenceService's args; the argv `vllm` got."""
    spec = body["spec"]
    main = spec["template"]["containers"][0]
    command = render_config(yaml.safe_load(TEMPLATE.read_text()), spec, "team")
    # The kubelet turns `$$` into `$` in command and args (our args escape every `$`).
    args = [token.replace("$$", "$") for token in main["args"]]
    stub_dir = tmp_path / "bin"
    stub_dir.mkdir()
    (stub_dir / "vllm").write_text(STUB)
    (stub_dir / "vllm").chmod(0o755)
    record = tmp_path / "argv"
    env = {"PATH": f"{stub_dir}:{os.environ['PATH']}", "RECORD": str(record)}
    subprocess.run([*command, *args], env=env, check=True, capture_output=True, timeout=30)
    return record.read_bytes().decode().split("\0")[:-1]


def speculative_service(plan: Any) -> dict[str, Any]:
    return next(m.body for m in KserveEmitter().emit(plan) if m.name == plan.profile.metadata.name)


@pytest.mark.parametrize(
    "profile", ["vllm-qwen3-4b-draft.yaml", "vllm-qwen3-8b-ngram.yaml", "vllm-mimo-7b-mtp.yaml"]
)
def test_vllm_receives_the_launch_flags_intact(profile: str, tmp_path: Path) -> None:
    plan = valid_plan(REPO_ROOT / "profiles" / profile)
    body = speculative_service(plan)
    received = run_main_container(body, tmp_path)
    name = body["spec"]["model"]["name"]
    kserve_own = [
        "serve",
        "/mnt/models",
        "--served-model-name",
        name,
        f"publishers/team/models/{name}",
        "--port",
        "8000",
        "--disable-access-log-for-endpoints",
        "/health,/metrics,/ping",
        "--shutdown-timeout",
        "15",
        "--tensor-parallel-size",
        str(plan.profile.hardware.tensor_parallel_size),
    ]
    ours = [t for t in _without(plan.launch_for(container=True).argv[3:])]
    assert received == kserve_own + ours
    # One --served-model-name, the template's: with a second the last wins, and vLLM would stop
    # answering to the publishers/... name KServe advertises and routes on.
    assert received.count("--served-model-name") == 1
    assert [t for t in received if t.startswith("--")] == list(
        dict.fromkeys(t for t in received if t.startswith("--"))
    ), "a flag reaches vLLM twice"
    spec_flag = received.index("--speculative-config")
    assert json.loads(received[spec_flag + 1])["method"] in ("draft_model", "ngram", "mtp")


def test_quotes_spaces_and_dollars_in_extra_args_survive_eval(tmp_path: Path) -> None:
    tricky = ["--chat-template", '{% if x %}it\'s "$HOME" `id` {{ y }}{% endif %}']
    plan = valid_plan(write_profile(tmp_path, serving={"extra_args": tricky}))
    received = run_main_container(speculative_service(plan), tmp_path)
    assert received[-2:] == tricky


def test_vllm_parses_the_same_speculative_config_as_the_launch(
    tmp_path: Path, parse_vllm: ParseVllm
) -> None:
    plan = valid_plan(REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml")
    received = run_main_container(speculative_service(plan), tmp_path)
    launch = list(plan.launch_for(container=True).argv[2:])
    via_kserve, direct = parse_vllm([received[1:], launch])
    assert "error" not in via_kserve, via_kserve
    assert via_kserve["speculative_config"] == direct["speculative_config"]
    assert via_kserve["speculative_config"] == {
        "method": "draft_model",
        "model": "Qwen/Qwen3-0.6B",
        "num_speculative_tokens": 5,
    }
    for key in ("max_model_len", "max_num_seqs", "gpu_memory_utilization"):
        assert via_kserve[key] == direct[key], key
    name = speculative_service(plan)["spec"]["model"]["name"]
    assert via_kserve["served_model_name"] == [name, f"publishers/team/models/{name}"]
    assert via_kserve["model_tag"] == "/mnt/models"  # the storage initializer's copy


def test_a_raw_json_argument_would_not_survive(tmp_path: Path) -> None:
    """Why the args are shell-quoted: unquoted, the template's eval splits the JSON."""
    plan = valid_plan(REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml")
    body = speculative_service(plan)
    main = body["spec"]["template"]["containers"][0]
    main["args"] = list(plan.launch_for(container=True).argv[3:])
    received = run_main_container(body, tmp_path)
    assert (
        '{"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 5}'
        not in received
    )


def _without(tokens: tuple[str, ...]) -> list[str]:
    from orchestrator.emitters.kserve import TEMPLATE_FLAGS
    from orchestrator.emitters.platform import drop_options

    return drop_options(tokens, TEMPLATE_FLAGS)
