"""Parse `vllm serve` arguments with vLLM 0.32.0's own parser (run inside .venv-vllm, never
imported by pytest).

Reads a JSON list of argvs (the tokens after `vllm serve`) on stdin and prints, for each, what
vLLM's parser made of the settings specdeploy manages, or the parser's error. Only parsing: no
engine config is built, so no model files are needed (vllm/entrypoints/cli/serve.py, v0.32.0:
make_arg_parser -> parse_args).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

RESULTS = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

from vllm.entrypoints.launchers.cli_args import make_arg_parser  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

FIELDS = (
    "model_tag",
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


def parse(argv: list[str]) -> dict[str, object]:
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser.parse_args(argv)
    except SystemExit:
        lines = errors.getvalue().strip().splitlines()
        return {"error": lines[-1] if lines else "parse error"}
    return {name: getattr(args, name, None) for name in FIELDS}


RESULTS.write(json.dumps([parse(argv) for argv in json.load(sys.stdin)], default=str))
RESULTS.close()
