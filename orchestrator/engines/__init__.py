"""Engine stage: the registry of engines. Each engine module turns a LaunchSpec into an
EngineLaunch and owns the rest of its engine's behaviour (see `orchestrator.engines.base`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from orchestrator.engines.base import Engine, EngineLaunch, LaunchSpec
from orchestrator.registry import LazyRegistry

#: Engine name -> (module, class). An explicit table; a module is imported on first use, so a
#: vLLM profile never builds TensorRT-LLM's option models (CLI start-up time).
ENGINE_CLASSES: Final[Mapping[str, tuple[str, str]]] = {
    "vllm": ("orchestrator.engines.vllm", "VllmEngine"),
    "sglang": ("orchestrator.engines.sglang", "SglangEngine"),
    "trtllm": ("orchestrator.engines.trtllm", "TrtllmEngine"),
}


ENGINES: Final[Mapping[str, Engine]] = LazyRegistry("engine", ENGINE_CLASSES)

__all__ = ["ENGINES", "ENGINE_CLASSES", "Engine", "EngineLaunch", "LaunchSpec"]
