"""The GPU catalog: memory as NVML reports it, bandwidth, dense TFLOPS and the node label value.

Data lives in `gpus.yaml` beside this module, each row with its source.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from typing import Any, Final

from orchestrator.datafiles import load_yaml
from orchestrator.errors import ProfileError

MIB: Final = 1024**2
GIB: Final = 1024**3
#: GiB that CUDA reports less than NVML on the same card (context and driver reservations), so the
#: total that vLLM's `gpu_memory_utilization` multiplies (torch.cuda.mem_get_info) is lower than
#: nvidia-smi's. Observed pairs: H100 81559 MiB vs 79.22 GiB (https://github.com/vllm-project/vllm/pull/10511 log), RTX 3090
#: 24576 MiB vs 23.58 GiB (https://github.com/vllm-project/vllm/issues/10517), RTX 5090 32607 MiB vs 31.37 GiB (https://github.com/vllm-project/vllm/issues/14452),
#: RTX PRO 4500 32623 MiB vs 31.38 GiB (https://github.com/vllm-project/vllm/pull/51590). Differences 0.42-0.48 GiB.
CUDA_RESERVED_GIB: Final = 0.45
#: Node label GPU Feature Discovery sets from the NVML product name
#: (https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/docs/gpu-feature-discovery/README.md#L220).
NVIDIA_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"


@dataclass(frozen=True)
class Gpu:
    """One GPU model as the catalog knows it."""

    name: str
    memory_mib: int
    """Total memory as NVML / nvidia-smi reports it."""
    bandwidth_tbps: float
    bf16_tflops: float | None
    fp8_tflops: float | None
    label_key: str
    label_value: str
    source: str
    aliases: tuple[str, ...] = ()
    compute_capability: tuple[int, int] | None = None
    """NVIDIA compute capability (major, minor), e.g. (8, 9) for an L4; None on other vendors."""
    gfx_arch: str | None = None
    """AMD LLVM target (e.g. "gfx942"); None on NVIDIA."""
    compute_capability_source: str = ""
    """Where the compute capability (or gfx target) was read."""
    nvlink: bool = False
    """Every GPU of a tensor-parallel group is joined by NVLink (SXM/NVSwitch boards, H100 NVL
    bridged pairs); False for PCIe-only cards. Collective buffers depend on it."""

    @property
    def memory_gib(self) -> float:
        return self.memory_mib * MIB / GIB

    @property
    def usable_gib(self) -> float:
        """What CUDA reports as total: the base engines multiply their memory fraction by."""
        return self.memory_gib - CUDA_RESERVED_GIB

    @property
    def supports_fp8(self) -> bool:
        return self.fp8_tflops is not None

    @property
    def arch_name(self) -> str:
        """How users and engine logs name the architecture: "sm89", "gfx942", or "unknown"."""
        if self.compute_capability is not None:
            return f"sm{self.compute_capability[0]}{self.compute_capability[1]}"
        return self.gfx_arch or "unknown"


@functools.cache
def gpu_catalog() -> dict[str, Gpu]:
    """Every GPU the catalog knows, by canonical name, in catalog order."""
    raw: dict[str, dict[str, Any]] = load_yaml("orchestrator.memory", "gpus.yaml")
    return {name: _gpu(name, row) for name, row in raw.items()}


def find_gpu(name: str) -> Gpu:
    """The catalog entry for `name` (case-insensitive; aliases allowed), or a ProfileError."""
    catalog = gpu_catalog()
    wanted = name.strip().lower()
    for gpu in catalog.values():
        if wanted == gpu.name.lower() or wanted in (alias.lower() for alias in gpu.aliases):
            return gpu
    close = difflib.get_close_matches(name, list(catalog), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    raise ProfileError(
        f"hardware.gpu: {name!r} is not in the GPU catalog",
        why="the memory budget needs the GPU's memory size",
        fix=f"{hint}set hardware.gpu to one of the names `specdeploy gpus` lists",
    )


def _gpu(name: str, row: dict[str, Any]) -> Gpu:
    return Gpu(
        name=name,
        memory_mib=int(row["memory_mib"]),
        bandwidth_tbps=float(row["bandwidth_tbps"]),
        bf16_tflops=_opt_float(row.get("bf16_tflops")),
        fp8_tflops=_opt_float(row.get("fp8_tflops")),
        label_key=str(row.get("label_key", NVIDIA_PRODUCT_LABEL)),
        label_value=str(row["label_value"]),
        source=str(row["source"]),
        aliases=tuple(str(a) for a in row.get("aliases", ())),
        compute_capability=_capability(row.get("compute_capability")),
        gfx_arch=None if row.get("gfx_arch") is None else str(row["gfx_arch"]),
        compute_capability_source=str(row.get("compute_capability_source", "")),
        nvlink=bool(row.get("nvlink", False)),
    )


def _capability(value: Any) -> tuple[int, int] | None:
    """Parse "8.9" into (8, 9); the YAML writes it as a string so that 12.0 reads as (12, 0)."""
    if value is None:
        return None
    major, _, minor = str(value).partition(".")
    return int(major), int(minor or 0)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)
