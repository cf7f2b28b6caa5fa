"""Parse `vllm serve` arguments with vLLM 0.32.0's own parser (run inside .venv-vllm, never
imported by pytest).

Reads a JSON list of argvs (the tokens after `vllm serve`) on stdin and prints, for each, what
vLLM's parser made of the settings specdeploy manages, or the parser's error. Only parsing: no
engine config is built, so no model files are needed (vllm/entrypoints/cli/serve.py, v0.32.0:
make_arg_parser -> parse_args).

With `--engine-args`, the parser is the engine's alone, as Dynamo's vLLM worker builds it for the
tokens its own parser leaves (dynamo/vllm/args.py parse_args, ai-dynamo 1.4.0:
`FlexibleArgumentParser(add_help=False)`, `AsyncEngineArgs.add_cli_args(..., async_args_only=
False)`, `parse_args`): no positional model, no server flags. Parsing only here too
(`AsyncEngineArgs.from_cli_args` may look a model up on the hub).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

RESULTS = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: E402
from vllm.entrypoints.launchers.cli_args import make_arg_parser  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

ENGINE_ARGS = sys.argv[1:] == ["--engine-args"]
FIELDS = (
    "model_tag",
    "model",
    "served_model_name",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_model_len",
    "max_num_seqs",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "dtype",
    "revision",
    "trust_remote_code",
    "enforce_eager",
    "speculative_config",
    "chat_template",
)


def parser() -> FlexibleArgumentParser:
    if ENGINE_ARGS:
        engine = FlexibleArgumentParser(add_help=False)
        AsyncEngineArgs.add_cli_args(engine, async_args_only=False)
        return engine
    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def parse(argv: list[str]) -> dict[str, object]:
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser().parse_args(argv)
    except SystemExit:
        lines = errors.getvalue().strip().splitlines()
        return {"error": lines[-1] if lines else "parse error"}
    return {name: getattr(args, name, None) for name in FIELDS}


RESULTS.write(json.dumps([parse(argv) for argv in json.load(sys.stdin)], default=str))
RESULTS.close()
