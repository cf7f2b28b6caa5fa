"""Engine modules: each profile setting lands on the right flag for the pinned release."""

from __future__ import annotations

import json

import pytest
import yaml

from orchestrator.engines import ENGINES
from orchestrator.engines.base import EngineLaunch, LaunchSpec
from orchestrator.engines.capabilities import release_for
from orchestrator.profile.schema import Profile
from tests.support import make_profile


def launch(
    profile: Profile, *, draft: str | None = "Qwen/Qwen3-0.6B", model_type: str | None = None
) -> EngineLaunch:
    spec = LaunchSpec(
        profile=profile,
        release=release_for(profile.engine.name, profile.engine.version),
        target_model=profile.target.model,
        draft_model=draft if profile.proposer.model else None,
        memory_fraction=profile.serving.gpu_memory_fraction,
        served_model_name=profile.target.model,
        target_model_type=model_type,
    )
    return ENGINES[profile.engine.name].launch(spec)


def flag(argv: tuple[str, ...], name: str) -> str:
    return argv[argv.index(name) + 1]


class TestVllm:
    def test_speculative_config_is_explicit_json(self) -> None:
        argv = launch(make_profile()).argv
        assert argv[:3] == ("vllm", "serve", "Qwen/Qwen3-8B")
        assert json.loads(flag(argv, "--speculative-config")) == {
            "method": "draft_model",
            "model": "Qwen/Qwen3-0.6B",
            "num_speculative_tokens": 4,
        }

    def test_baseline_has_no_speculative_flags(self) -> None:
        argv = launch(make_profile().as_baseline()).argv
        assert "--speculative-config" not in argv

    def test_a_draft_length_schedule_is_a_list_of_three_lists(self) -> None:
        schedule = [[1, 8, 4], [9, 64, 2], [65, 256, 0]]
        proposer = {
            "method": "draft_model",
            "model": "Qwen/Qwen3-0.6B",
            "num_speculative_tokens": 4,
            "num_speculative_tokens_per_batch_size": schedule,
        }
        profile = make_profile(proposer=proposer)
        rendered = flag(launch(profile).argv, "--speculative-config")
        assert json.loads(rendered) == {
            "method": "draft_model",
            "model": "Qwen/Qwen3-0.6B",
            "num_speculative_tokens": 4,
            "num_speculative_tokens_per_batch_size": schedule,
        }
        assert '"num_speculative_tokens_per_batch_size": [[1, 8, 4], [9, 64, 2], [65, 256, 0]]' in (
            rendered
        )
        # The baseline twin differs only in the speculative flag: no schedule anywhere.
        baseline = launch(profile.as_baseline()).argv
        assert not any("per_batch_size" in token for token in baseline)

    def test_without_a_schedule_the_key_is_not_rendered(self) -> None:
        config = json.loads(flag(launch(make_profile()).argv, "--speculative-config"))
        assert "num_speculative_tokens_per_batch_size" not in config

    def test_serving_fields_map_to_flags(self) -> None:
        profile = make_profile(
            hardware={"gpu": "H100-80GB", "tensor_parallel_size": 2, "pipeline_parallel_size": 1},
            serving={
                "max_model_len": 4096,
                "max_concurrency": 7,
                "gpu_memory_fraction": 0.85,
                "kv_cache_dtype": "fp8",
            },
            target={"model": "Qwen/Qwen3-8B", "revision": "abc123", "quantization": "fp8"},
        )
        argv = launch(profile).argv
        assert flag(argv, "--tensor-parallel-size") == "2"
        assert flag(argv, "--max-model-len") == "4096"
        assert flag(argv, "--max-num-seqs") == "7"
        assert flag(argv, "--gpu-memory-utilization") == "0.85"
        assert flag(argv, "--kv-cache-dtype") == "fp8"
        assert flag(argv, "--revision") == "abc123"
        assert flag(argv, "--quantization") == "fp8"

    def test_ngram_window_and_draft_revision(self) -> None:
        ngram = make_profile(
            proposer={
                "method": "ngram",
                "num_speculative_tokens": 3,
                "ngram": {"min_window": 2, "max_window": 5},
            }
        )
        config = json.loads(flag(launch(ngram).argv, "--speculative-config"))
        assert config == {
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_min": 2,
            "prompt_lookup_max": 5,
        }
        eagle = make_profile(
            proposer={
                "method": "eagle3",
                "model": "org/head",
                "revision": "r1",
                "num_speculative_tokens": 3,
            }
        )
        config = json.loads(flag(launch(eagle, draft="org/head").argv, "--speculative-config"))
        assert config["method"] == "eagle3" and config["revision"] == "r1"

    def test_mtp_is_deepseek_mtp_with_target_before_unified_name(self) -> None:
        old = make_profile(
            engine={"name": "vllm", "version": "0.10.1"},
            proposer={"method": "mtp", "num_speculative_tokens": 1},
        )
        config = json.loads(flag(launch(old, model_type="mimo").argv, "--speculative-config"))
        assert config == {
            "method": "deepseek_mtp",
            "model": "Qwen/Qwen3-8B",
            "num_speculative_tokens": 1,
        }
        new = make_profile(proposer={"method": "mtp", "num_speculative_tokens": 1})
        assert (
            json.loads(flag(launch(new, model_type="mimo").argv, "--speculative-config"))["method"]
            == "mtp"
        )

    @pytest.mark.parametrize("version", ["0.10.1", "0.32.0"])
    def test_mtp_loads_its_layers_at_the_pinned_target_revision(self, version: str) -> None:
        profile = make_profile(
            engine={"name": "vllm", "version": version},
            target={"model": "deepseek-ai/DeepSeek-V3", "revision": "abc123"},
            proposer={"method": "mtp", "num_speculative_tokens": 1},
        )
        argv = launch(profile, model_type="deepseek_v3").argv
        assert flag(argv, "--revision") == "abc123"
        assert json.loads(flag(argv, "--speculative-config"))["revision"] == "abc123"
        unpinned = make_profile(proposer={"method": "mtp", "num_speculative_tokens": 1})
        config = json.loads(flag(launch(unpinned).argv, "--speculative-config"))
        assert "revision" not in config

    def test_attention_data_parallel_is_data_parallel_ranks_of_smaller_tp(self) -> None:
        profile = make_profile(
            hardware={
                "tensor_parallel_size": 8,
                "attention_data_parallel_size": 4,
                "expert_parallel": True,
            },
            serving={"max_concurrency": 30},
        )
        argv = launch(profile).argv
        assert flag(argv, "--tensor-parallel-size") == "2"
        assert flag(argv, "--data-parallel-size") == "4"
        assert "--enable-expert-parallel" in argv
        assert flag(argv, "--max-num-seqs") == "8"  # per data-parallel rank: ceil(30 / 4)

    def test_extra_args_are_appended_verbatim(self) -> None:
        profile = make_profile(serving={"extra_args": ["--enable-prefix-caching", "--seed", "7"]})
        assert launch(profile).argv[-3:] == ("--enable-prefix-caching", "--seed", "7")

    def test_image_defaults_to_release_and_can_be_overridden(self) -> None:
        assert launch(make_profile()).image == "vllm/vllm-openai:v0.32.0"
        custom = make_profile(engine={"name": "vllm", "version": "0.32.0", "image": "reg/vllm:x"})
        assert launch(custom).image == "reg/vllm:x"


SGLANG = {"name": "sglang", "version": "0.5.23"}


class TestSglang:
    def test_standalone_chain(self) -> None:
        profile = make_profile(
            engine=SGLANG, sglang={"cuda_graph_max_bs": 8, "mem_fraction_static": 0.7}
        )
        argv = launch(profile).argv
        assert argv[:5] == (
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "Qwen/Qwen3-8B",
        )
        assert flag(argv, "--speculative-algorithm") == "STANDALONE"
        assert flag(argv, "--speculative-num-steps") == "4"
        assert flag(argv, "--speculative-eagle-topk") == "1"
        assert flag(argv, "--speculative-num-draft-tokens") == "5"
        assert flag(argv, "--mem-fraction-static") == "0.7"
        assert flag(argv, "--cuda-graph-max-bs-decode") == "8"  # renamed in 0.5.14
        older = make_profile(
            engine={"name": "sglang", "version": "0.5.13"}, sglang={"cuda_graph_max_bs": 8}
        )
        assert flag(launch(older).argv, "--cuda-graph-max-bs") == "8"
        assert "--disable-overlap-schedule" not in argv

    def test_tree_drafting_disables_overlap_when_asked(self) -> None:
        profile = make_profile(
            engine=SGLANG,
            sglang={"eagle_topk": 4, "num_draft_tokens": 8, "disable_overlap_schedule": True},
        )
        argv = launch(profile).argv
        assert flag(argv, "--speculative-eagle-topk") == "4"
        assert flag(argv, "--speculative-num-draft-tokens") == "8"
        assert "--disable-overlap-schedule" in argv

    def test_sglang_adaptive_renders_its_slots_and_sizes_for_the_longest(self) -> None:
        slot = {"batch_size": 8, "candidate_steps": [3, 1], "ema_alpha": 0.5}
        profile = make_profile(
            engine=SGLANG,
            proposer={"method": "mtp", "num_speculative_tokens": 1},
            sglang={"adaptive": {"slots": [slot, {"batch_size": 1, "candidate_steps": [1, 5]}]}},
        )
        rendered = launch(profile)
        argv = rendered.argv
        assert flag(argv, "--speculative-num-steps") == "1"  # where every slot starts
        assert flag(argv, "--speculative-num-draft-tokens") == "2"
        assert "--speculative-adaptive" in argv
        assert flag(argv, "--speculative-adaptive-config").endswith("/sglang-adaptive.json")
        document = json.loads(rendered.config_files["sglang-adaptive.json"])
        assert document == {  # slots by batch size; knobs not set are SGLang's defaults
            "1": {"candidate_steps": [1, 5]},
            "8": {"candidate_steps": [3, 1], "ema_alpha": 0.5},
        }
        # SGLang sizes its speculative buffers for the longest candidate: 5 steps + 1
        slots = ENGINES["sglang"].memory.state_slots(profile)
        assert slots.extra_conv_positions == 6 and slots.copies == 7
        default = make_profile(
            engine=SGLANG,
            proposer={"method": "mtp", "num_speculative_tokens": 3},
            sglang={"adaptive": {}},
        )
        plain = launch(default)
        assert "--speculative-adaptive" in plain.argv and not plain.config_files
        assert "--speculative-adaptive-config" not in plain.argv
        assert ENGINES["sglang"].memory.state_slots(default).extra_conv_positions == 8  # 7 + 1

    def test_mtp_uses_target_as_draft(self) -> None:
        profile = make_profile(
            engine=SGLANG, proposer={"method": "mtp", "num_speculative_tokens": 1}
        )
        argv = launch(profile).argv
        assert flag(argv, "--speculative-algorithm") == "NEXTN"
        assert flag(argv, "--speculative-draft-model-path") == "Qwen/Qwen3-8B"
        assert "--speculative-draft-model-revision" not in argv

    def test_mtp_draft_is_loaded_at_the_pinned_target_revision(self) -> None:
        profile = make_profile(
            engine=SGLANG,
            target={"model": "Qwen/Qwen3-8B", "revision": "abc123"},
            proposer={"method": "mtp", "num_speculative_tokens": 1},
        )
        argv = launch(profile).argv
        assert flag(argv, "--revision") == "abc123"
        assert flag(argv, "--speculative-draft-model-revision") == "abc123"

    @pytest.mark.parametrize(
        ("version", "expected"),
        [
            ("0.5.23", ["--attn-dp-size", "8", "--ep-size", "8"]),
            ("0.5.21", ["--dp-size", "8", "--enable-dp-attention", "--ep-size", "8"]),
            (
                "0.4.9",
                ["--dp-size", "8", "--enable-dp-attention", "--ep-size", "8", "--enable-ep-moe"],
            ),
        ],
    )
    def test_attention_data_parallel_and_experts_per_release(
        self, version: str, expected: list[str]
    ) -> None:
        profile = make_profile(
            engine={"name": "sglang", "version": version},
            hardware={
                "tensor_parallel_size": 8,
                "attention_data_parallel_size": 8,
                "expert_parallel": True,
            },
            serving={"max_concurrency": 64},
        )
        argv = list(launch(profile).argv)
        start = argv.index(expected[0])
        assert argv[start : start + len(expected)] == expected
        assert flag(launch(profile).argv, "--max-running-requests") == "64"  # the replica's total

    def test_ngram_disables_overlap(self) -> None:
        profile = make_profile(
            engine=SGLANG, proposer={"method": "ngram", "num_speculative_tokens": 4}
        )
        argv = launch(profile).argv
        assert flag(argv, "--speculative-algorithm") == "NGRAM"
        assert "--speculative-num-steps" not in argv
        assert "--disable-overlap-schedule" in argv

    def test_baseline_has_no_speculative_flags(self) -> None:
        argv = launch(make_profile(engine=SGLANG).as_baseline()).argv
        assert not [a for a in argv if a.startswith("--speculative-")]


TRT = {"name": "trtllm", "version": "1.2.1"}


def trt_yaml(profile: Profile, draft: str | None = "org/head") -> dict[str, object]:
    result = launch(profile, draft=draft)
    (content,) = result.config_files.values()
    data: dict[str, object] = yaml.safe_load(content)
    return data


class TestTrtllm:
    def test_eagle3_yaml(self) -> None:
        profile = make_profile(
            engine=TRT,
            proposer={"method": "eagle3", "model": "org/head", "num_speculative_tokens": 4},
        )
        data = trt_yaml(profile)
        # <= 1.2 parses only "Eagle" (the PyTorch backend's EAGLE-3 path); "Eagle3" from 1.3.0rc21
        assert data["speculative_config"] == {
            "decoding_type": "Eagle",
            "max_draft_len": 4,
            "speculative_model_dir": "org/head",
        }
        assert data["kv_cache_config"] == {"free_gpu_memory_fraction": 0.9}
        argv = launch(profile, draft="org/head").argv
        assert argv[:2] == ("trtllm-serve", "Qwen/Qwen3-8B")
        assert flag(argv, "--config").endswith("extra-llm-api-config.yaml")  # 1.2.0 on
        newer = make_profile(
            engine={"name": "trtllm", "version": "1.3.0rc21"},
            proposer={"method": "eagle3", "model": "org/head", "num_speculative_tokens": 4},
        )
        assert trt_yaml(newer)["speculative_config"]["decoding_type"] == "Eagle3"  # type: ignore[index]

    def test_config_flag_name_follows_release(self) -> None:
        profile = make_profile(
            engine={"name": "trtllm", "version": "1.0.0"},
            proposer={"method": "ngram", "num_speculative_tokens": 3},
        )
        argv = launch(profile).argv
        assert "--extra_llm_api_options" in argv and "--config" not in argv
        newer = make_profile(
            engine={"name": "trtllm", "version": "1.2.0"},
            proposer={"method": "ngram", "num_speculative_tokens": 3},
        )
        assert "--config" in launch(newer).argv

    def test_ngram_and_draft_target_disable_overlap(self) -> None:
        ngram = make_profile(
            engine=TRT,
            proposer={"method": "ngram", "num_speculative_tokens": 3, "ngram": {"max_window": 3}},
        )
        data = trt_yaml(ngram, draft=None)
        assert data["disable_overlap_scheduler"] is True
        assert data["speculative_config"] == {
            "decoding_type": "NGram",
            "max_draft_len": 3,
            "max_matching_ngram_size": 3,
        }
        draft = make_profile(engine=TRT)
        assert (
            trt_yaml(draft, draft="Qwen/Qwen3-0.6B")["speculative_config"]["decoding_type"]
            == "DraftTarget"
        )  # type: ignore[index]

    def test_mtp_depth_field_follows_release(self) -> None:
        old = make_profile(engine=TRT, proposer={"method": "mtp", "num_speculative_tokens": 2})
        assert trt_yaml(old, draft=None)["speculative_config"] == {
            "decoding_type": "MTP",
            "num_nextn_predict_layers": 2,
        }
        new = make_profile(
            engine={"name": "trtllm", "version": "1.3.0rc21"},
            proposer={"method": "mtp", "num_speculative_tokens": 2},
        )
        assert trt_yaml(new, draft=None)["speculative_config"] == {
            "decoding_type": "MTP",
            "max_draft_len": 2,
        }

    def test_cli_flags_and_yaml_agree(self) -> None:
        profile = make_profile(
            engine=TRT,
            hardware={"gpu": "H100-80GB", "tensor_parallel_size": 4},
            serving={"max_model_len": 8192, "max_concurrency": 12},
        )
        data = trt_yaml(profile, draft="Qwen/Qwen3-0.6B")
        argv = launch(profile).argv
        assert int(flag(argv, "--tp_size")) == data["tensor_parallel_size"] == 4
        assert int(flag(argv, "--max_seq_len")) == data["max_seq_len"] == 8192
        assert int(flag(argv, "--max_batch_size")) == data["max_batch_size"] == 12

    def test_baseline_yaml_has_no_speculative_config(self) -> None:
        assert "speculative_config" not in trt_yaml(
            make_profile(engine=TRT).as_baseline(), draft=None
        )


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_launch_is_deterministic(engine: str) -> None:
    versions = {"vllm": "0.32.0", "sglang": "0.5.23", "trtllm": "1.2.1"}
    profile = make_profile(engine={"name": engine, "version": versions[engine]})
    assert launch(profile) == launch(profile)
