"""What the container receives equals what the profile says, for every character: the kubelet's
`$(VAR)` expansion (reproduced from the kubelet's own algorithm) turns the rendered command back
into the launch argv, a secret reference written in the profile is never expanded, and text
outside the Basic Multilingual Plane survives the YAML as UTF-8 (not as lone surrogates)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.emitters.base import canonical_yaml
from orchestrator.emitters.kubernetes import manifests_for
from tests.support import write_profile
from tests.unit.manifests.conftest import valid_plan

#: What the pod's environment holds when the kubelet expands command and args.
POD_ENV = {"HF_TOKEN": "hf_SECRETSECRETSECRET", "LWS_LEADER_ADDRESS": "leader.svc"}


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's expansion of `$(VAR)` in command/args, as
    https://github.com/kubernetes/kubernetes/blob/v1.33.0/third_party/forked/golang/expansion/expand.go
    does it: `$$` -> `$`; `$(NAME)` -> the value, or kept as written when NAME is undefined;
    an unterminated `$(` and `$x` stay as they are."""
    out: list[str] = []
    checkpoint = cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            rest = text[cursor + 1 :]
            if rest[0] == "$":
                read, advance = "$", 1
            elif rest[0] == "(":
                close = rest.find(")", 1)
                if close == -1:
                    read, advance = "$(", 1
                else:
                    name = rest[1:close]
                    read, advance = env.get(name, f"$({name})"), close + 1
            else:
                read, advance = "$" + rest[0], 1
            out.append(read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def container(manifest_body: dict[str, Any]) -> dict[str, Any]:
    spec = manifest_body["spec"]
    if manifest_body["kind"] == "LeaderWorkerSet":
        spec = spec["leaderWorkerTemplate"]["leaderTemplate"]
    else:
        spec = spec["template"]
    return dict(spec["spec"]["containers"][0])


def received(tmp_path: Path, extra: list[str], **sections: Any) -> tuple[list[str], list[str]]:
    """(what the container receives after the kubelet, the launch argv), through the YAML file."""
    plan = valid_plan(write_profile(tmp_path, serving={"extra_args": extra}, **sections))
    workload = next(m for m in manifests_for(plan) if m.kind in ("Deployment", "LeaderWorkerSet"))
    reread = yaml.safe_load(canonical_yaml(workload.body).encode("utf-8"))
    command = [kubelet_expand(token, POD_ENV) for token in container(reread)["command"]]
    return command, list(plan.launch_for(container=True).argv)


#: Arguments that are not flags (a leading '-' would be checked as a flag by other rules), without
#: NUL (no command-line argument can hold one; the profile schema refuses it) or lone surrogates
#: (not text: no YAML file, and so no profile, can hold one).
ARGUMENT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=12,
).filter(lambda s: not s.startswith("-"))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(extra=st.lists(ARGUMENT, min_size=1, max_size=3))
def test_the_container_receives_the_launch_argv_for_every_character(
    tmp_path: Path, extra: list[str]
) -> None:
    command, argv = received(tmp_path, extra)
    assert command == argv
    assert argv[-len(extra) :] == extra


def test_a_secret_reference_in_the_profile_is_never_expanded(tmp_path: Path) -> None:
    extra = ["$(HF_TOKEN)", "$$(HF_TOKEN)", "$$$(HF_TOKEN)", "a$b", "$"]
    command, argv = received(tmp_path, extra)
    assert command == argv and command[-5:] == extra
    assert not any(POD_ENV["HF_TOKEN"] in token for token in command)


def test_yaml_line_breaks_inside_an_argument_survive(tmp_path: Path) -> None:
    extra = ["a\x85b", "c\u2028d\u2029e", "f\x7fg"]
    command, argv = received(tmp_path, extra)
    assert command == argv and command[-3:] == extra


def test_text_outside_the_basic_multilingual_plane_is_written_as_utf8(tmp_path: Path) -> None:
    plan = valid_plan(write_profile(tmp_path, serving={"extra_args": ["prompt=😀𝔘"]}))
    text = "".join(canonical_yaml(m.body) for m in manifests_for(plan))
    assert "prompt=😀𝔘" in text
    assert "\\uD83D" not in text.upper() and "\\U0001F600" not in text.upper()


def test_a_multi_node_leader_runs_the_launch_argv(tmp_path: Path) -> None:
    """vLLM's leader wraps the launch in `sh -c '... && exec ARGV'`: after the kubelet, the shell
    still gets the launch argv, quoted."""
    extra = ["$(HF_TOKEN)", "x y", "it's"]
    plan = valid_plan(
        write_profile(
            tmp_path, serving={"extra_args": extra}, hardware={"tensor_parallel_size": 16}
        )
    )
    workload = next(m for m in manifests_for(plan) if m.kind == "LeaderWorkerSet")
    script = kubelet_expand(container(workload.body)["command"][-1], POD_ENV)
    assert shlex.split(script.split("&& exec ", 1)[1]) == list(plan.launch_for(container=True).argv)
