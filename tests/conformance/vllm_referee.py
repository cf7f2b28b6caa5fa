"""vLLM 0.32.0 as a referee: parse a rendered `vllm serve` argv with vLLM's own code.

Runs inside the vLLM venv (.venv-vllm/bin/python), never imported by pytest. Reads one JSON
request per line on stdin (`{"argv": [...]}`, the tokens after `vllm serve`) and writes one JSON
result per line to the original stdout; vLLM's own logging goes to stderr. The steps are what
`vllm serve` does before it starts an engine (vllm/entrypoints/cli/serve.py, vLLM 0.32.0):
make_arg_parser -> parse_args -> validate_parsed_serve_args ->
AsyncEngineArgs.from_cli_args(args).create_engine_config()
(shared/reference/feasibility_vllm.md §3). A draft-length schedule
(num_speculative_tokens_per_batch_size) is only typed there; the engine core checks it when it
builds its scheduler, so a last stage makes the same call Scheduler.__init__ makes
(vllm/v1/core/sched/scheduler.py L307-L314): build_dynamic_sd_schedule_lookup with the resolved
max_num_seqs and num_speculative_tokens.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from typing import Any

# Keep a private handle on stdout for results, then send everything else (including C-level
# writes and vLLM's log handler) to stderr.
RESULTS = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: E402
from vllm.entrypoints.launchers.cli_args import (  # noqa: E402
    make_arg_parser,
    validate_parsed_serve_args,
)
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402
from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup  # noqa: E402


def referee(argv: list[str]) -> dict[str, Any]:
    """Parse, validate and build the engine config; report the first stage that refuses."""
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    stage = "parse"
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser.parse_args(argv)
        args.subparser = "serve"
        args.model = args.model_tag or args.model  # what `vllm serve MODEL` does
        stage = "validate"
        validate_parsed_serve_args(args)
        stage = "engine-config"
        config = AsyncEngineArgs.from_cli_args(args).create_engine_config()
        stage = "scheduler"
        lookup = scheduler_lookup(config)
    except SystemExit as exc:  # argparse: unknown flag, bad type or choice
        lines = errors.getvalue().strip().splitlines()  # usage text, then "vllm serve: error: ..."
        return {"ok": False, "stage": stage, "error": lines[-1] if lines else str(exc)}
    except Exception as exc:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"ok": False, "stage": stage, "error": last}
    return {"ok": True, "stage": "done", "resolved": {**summarize(config), "dynamic_sd": lookup}}


def scheduler_lookup(config: Any) -> list[int] | None:
    """The batch size -> draft length table the scheduler runs on (index 0 unused), built as
    Scheduler.__init__ builds it; None when the config carries no schedule."""
    spec = config.speculative_config
    if spec is None or not spec.num_speculative_tokens_per_batch_size:
        return None
    lookup: list[int] = build_dynamic_sd_schedule_lookup(
        spec.num_speculative_tokens_per_batch_size,
        vllm_max_batch_size=config.scheduler_config.max_num_seqs,
        vllm_num_speculative_tokens=config.num_speculative_tokens,
    )
    return lookup


def summarize(config: Any) -> dict[str, Any]:
    """The resolved values the tests assert on."""
    spec = config.speculative_config
    out: dict[str, Any] = {
        "model": config.model_config.model,
        "served_model_name": config.model_config.served_model_name,
        "max_model_len": config.model_config.max_model_len,
        "dtype": str(config.model_config.dtype),
        "tensor_parallel_size": config.parallel_config.tensor_parallel_size,
        "pipeline_parallel_size": config.parallel_config.pipeline_parallel_size,
        "gpu_memory_utilization": config.cache_config.gpu_memory_utilization,
        "kv_cache_dtype": str(config.cache_config.cache_dtype),
        "max_num_seqs": config.scheduler_config.max_num_seqs,
        "data_parallel_size": config.parallel_config.data_parallel_size,
        "enforce_eager": config.model_config.enforce_eager,
        "speculative": None,
    }
    if spec is not None:
        draft = spec.draft_model_config
        out["speculative"] = {
            "method": spec.method,
            "num_speculative_tokens": spec.num_speculative_tokens,
            "model": draft.model if draft is not None else spec.model,
            "prompt_lookup_min": spec.prompt_lookup_min,
            "prompt_lookup_max": spec.prompt_lookup_max,
            "draft_tensor_parallel_size": spec.draft_tensor_parallel_size,
            "num_speculative_tokens_per_batch_size": spec.num_speculative_tokens_per_batch_size,
        }
    return out


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            result = referee(json.loads(line)["argv"])
            RESULTS.write(json.dumps(result, default=str) + "\n")


if __name__ == "__main__":
    main()
