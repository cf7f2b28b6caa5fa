"""A TensorRT-LLM referee that needs no TensorRT-LLM: what one release accepts, from its fixture.

tests/fixtures/trtllm/<version>.json holds, per release, the fields of the LLM-API option models
(all `extra="forbid"`), the `DecodingBaseConfig.from_dict` keys and the `trtllm-serve serve`
options, read in that release's own source (see the README there). `judge(launch)` checks every
argv token and every key of the options YAML against it, and the values TensorRT-LLM validates
or silently changes: what the release's validators refuse, the hub id it cannot download, the
flag and the YAML disagreeing, and a `max_seq_len` prompt the engine would reject (#9277).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from orchestrator.engines.base import EngineLaunch
from orchestrator.engines.capabilities import parse_version

FIXTURES = Path(__file__).parents[1] / "fixtures" / "trtllm"
SPECULATIVE = "DecodingBaseConfig.from_dict"
#: trtllm-serve flag -> the YAML key it sets (serve.py get_llm_args); both must agree.
FLAG_TO_YAML = {
    "--tensor_parallel_size": "tensor_parallel_size",
    "--tp_size": "tensor_parallel_size",
    "--pipeline_parallel_size": "pipeline_parallel_size",
    "--pp_size": "pipeline_parallel_size",
    "--max_batch_size": "max_batch_size",
    "--max_seq_len": "max_seq_len",
    "--max_num_tokens": "max_num_tokens",
    "--free_gpu_memory_fraction": "kv_cache_config.free_gpu_memory_fraction",
    "--kv_cache_free_gpu_memory_fraction": "kv_cache_config.free_gpu_memory_fraction",
    "--revision": "revision",
    "--trust_remote_code": "trust_remote_code",
    "--enable_chunked_prefill": "enable_chunked_prefill",
}


def releases() -> list[str]:
    """Versions with a fixture, oldest first."""
    return sorted((p.stem for p in FIXTURES.glob("*.json")), key=parse_version)


@functools.cache
def fixture(version: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{version}.json").read_text()))


@dataclass
class Verdict:
    """What the release would do with a launch: refusals, plus the settings it would run with."""

    problems: list[str] = field(default_factory=list)
    model: str | None = None
    flags: dict[str, str | bool] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    """The YAML as loaded; `effective(key)` folds the flags in."""
    yaml_overrides_flags: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems

    def effective(self, dotted: str) -> Any:
        """A setting as the engine sees it: the YAML's value, else the flag's, else None."""
        in_yaml = _lookup(self.options, dotted)
        in_flags = [v for f, v in self.flags.items() if FLAG_TO_YAML.get(f) == dotted]
        if in_yaml is not None and (self.yaml_overrides_flags or not in_flags):
            return in_yaml
        return in_flags[0] if in_flags else in_yaml


class Referee:
    """One release's rules."""

    def __init__(self, version: str) -> None:
        self.version = version
        data = fixture(version)
        self.args: dict[str, Any] = data["llm_args"]
        self.serve: dict[str, Any] = data["serve"]

    # --- argv ------------------------------------------------------------------------------------

    def check_argv(self, argv: list[str], verdict: Verdict) -> None:
        """click's view of `trtllm-serve [serve] MODEL [OPTIONS]` at this release."""
        if not argv or argv[0] != "trtllm-serve":
            verdict.problems.append(f"argv[0] is {argv[:1]}, not trtllm-serve")
            return
        tokens = argv[2:] if argv[1:2] == ["serve"] else argv[1:]
        options: dict[str, str] = self.serve["options"]
        aliases: dict[str, str] = self.serve["aliases"]
        i = 0
        while i < len(tokens):
            token = tokens[i]
            i += 1
            if not token.startswith("-"):
                if verdict.model is None:
                    verdict.model = token
                else:
                    verdict.problems.append(f"argv: unexpected extra argument {token!r}")
                continue
            name, eq, value = token.partition("=")
            canonical = aliases.get(name, name)
            kind = options.get(canonical)
            if kind is None:
                verdict.problems.append(
                    f"argv: no such option {name} in trtllm-serve {self.version}"
                )
                continue
            if name in verdict.flags:
                verdict.problems.append(f"argv: {name} given twice")
            if kind == "flag":
                if eq:
                    verdict.problems.append(f"argv: {name} is a flag and takes no value")
                verdict.flags[name] = True
                continue
            if not eq:
                if i >= len(tokens):
                    verdict.problems.append(f"argv: {name} requires an argument")
                    continue
                value = tokens[i]
                i += 1
            choices = self.serve["choices"].get(canonical)
            if choices is not None and value not in choices:
                verdict.problems.append(f"argv: {name} {value!r} is not one of {choices}")
            verdict.flags[name] = value
        if verdict.model is None:
            verdict.problems.append("argv: missing argument MODEL")

    def config_flag_value(self, verdict: Verdict) -> str | None:
        names = ("--config", "--extra_llm_api_options")
        given = [verdict.flags[n] for n in names if n in verdict.flags]
        return str(given[0]) if given else None

    # --- YAML ------------------------------------------------------------------------------------

    def accepted(self, model: str) -> set[str]:
        """Keys a model accepts: its fields, its bases' fields and validation aliases."""
        spec = self.args["models"][model]
        keys = set(spec["fields"]) | set(spec.get("aliases", {}))
        return keys | (self.accepted(spec["base"]) if "base" in spec else set())

    def nested(self, model: str) -> dict[str, str]:
        spec = self.args["models"][model]
        inherited = self.nested(spec["base"]) if "base" in spec else {}
        return {**inherited, **spec.get("nested", {})}

    def check_options(self, options: Any, verdict: Verdict) -> None:
        if not isinstance(options, dict):
            verdict.problems.append(f"YAML: top level is {type(options).__name__}, not a mapping")
            return
        verdict.options = options
        self._check_model(self.args["root"], options, "", verdict)

    def _check_model(self, model: str, data: dict[str, Any], path: str, verdict: Verdict) -> None:
        accepted = self.accepted(model)
        nested = self.nested(model)
        for key, value in data.items():
            where = f"YAML {path}{key}"
            if key not in accepted:
                verdict.problems.append(
                    f"{where}: {model} at {self.version} has no such field (extra='forbid')"
                )
            elif nested.get(key) == SPECULATIVE:
                self._check_speculative(value, f"{path}{key}.", verdict)
            elif key in nested:
                if not isinstance(value, dict):
                    verdict.problems.append(f"{where}: {nested[key]} needs a mapping")
                else:
                    self._check_model(nested[key], value, f"{path}{key}.", verdict)
            elif isinstance(value, dict):
                verdict.problems.append(
                    f"{where}: a mapping for an option model the {self.version} fixture does not "
                    "transcribe; transcribe it before rendering it"
                )

    def _check_speculative(self, value: Any, path: str, verdict: Verdict) -> None:
        if not isinstance(value, dict):
            verdict.problems.append(f"YAML {path[:-1]}: needs a mapping")
            return
        data = dict(value)
        decoding = data.pop("decoding_type", None)
        model = self.args["decoding_types"].get(decoding)
        if model is None:
            keys = sorted(self.args["decoding_types"])
            verdict.problems.append(
                f"YAML {path}decoding_type: {decoding!r} is not a from_dict key at {self.version} "
                f"({keys})"
            )
            return
        if model not in self.args["models"]:
            verdict.problems.append(f"YAML {path}: {model} is not transcribed in the fixture")
            return
        self._check_model(model, data, path, verdict)
        self._check_requirements(str(decoding), data, path, verdict)

    def _check_requirements(
        self, decoding: str, data: dict[str, Any], path: str, verdict: Verdict
    ) -> None:
        defaults = self.args["field_defaults"]
        for need in self.args["requires"].get(decoding, []):
            if need == "speculative_model":
                draft = data.get("speculative_model", data.get("speculative_model_dir"))
                if not draft:
                    verdict.problems.append(f"YAML {path}: {decoding} needs speculative_model_dir")
                elif not self.args["speculative_model_hub_id"] and not _is_local(str(draft)):
                    verdict.problems.append(
                        f"YAML {path}speculative_model_dir: {draft!r} is not a local directory; "
                        f"{self.version} does not download a hub id (NVIDIA/TensorRT-LLM#10099)"
                    )
                continue
            key = need.removesuffix(">0")
            number = data.get(key, defaults.get(key))
            if not isinstance(number, int) or number <= 0:
                verdict.problems.append(
                    f"YAML {path}{key}: {decoding} needs it > 0, the launch leaves it at {number!r}"
                )
        if decoding == "MTP" and "max_draft_len" in data:
            verdict.problems.append(
                f"YAML {path}max_draft_len: replaced by num_nextn_predict_layers at {self.version}"
            )

    # --- the whole launch ------------------------------------------------------------------------

    def judge(self, launch: EngineLaunch) -> Verdict:
        verdict = Verdict(yaml_overrides_flags=bool(self.args["yaml_overrides_flags"]))
        self.check_argv(list(launch.argv), verdict)
        config = self.config_flag_value(verdict)
        if config is not None:
            path = PurePosixPath(config)
            content = launch.config_files.get(path.name)
            if str(path.parent) != launch.config_dir or content is None:
                verdict.problems.append(f"argv: config file {config} is not one the launch writes")
            else:
                self.check_options(yaml.safe_load(content), verdict)
        self._check_agreement(verdict)
        self._check_longest_prompt(verdict)
        return verdict

    def _check_agreement(self, verdict: Verdict) -> None:
        for flag, value in verdict.flags.items():
            key = FLAG_TO_YAML.get(flag)
            in_yaml = _lookup(verdict.options, key) if key else None
            if in_yaml is not None and str(in_yaml) != str(value) and value is not True:
                verdict.problems.append(f"{flag} {value} disagrees with YAML {key}: {in_yaml}")
            if value is True and in_yaml is False:
                verdict.problems.append(f"{flag} disagrees with YAML {key}: false")

    def _check_longest_prompt(self, verdict: Verdict) -> None:
        """PyTorch backend, chunked prefill off: a prompt longer than max_num_tokens is refused
        ("The sum of prompt length ... should not exceed max_num_tokens", #9277)."""
        if verdict.effective("enable_chunked_prefill"):
            return
        seq = verdict.effective("max_seq_len")
        tokens = verdict.effective("max_num_tokens") or self.args["max_num_tokens_default"]
        if seq is None:
            verdict.problems.append("max_seq_len is not set; specdeploy always renders it")
        elif tokens is None:
            verdict.problems.append(
                f"max_num_tokens is not set and its {self.version} default was not read"
            )
        elif int(tokens) < int(seq) - 1:
            verdict.problems.append(
                f"max_num_tokens {tokens} < longest prompt {int(seq) - 1} (max_seq_len {seq}) "
                "with chunked prefill off: longer prompts are refused (#9277)"
            )


def _lookup(options: dict[str, Any], dotted: str) -> Any:
    value: Any = options
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _is_local(path: str) -> bool:
    return PurePosixPath(path).is_absolute()
