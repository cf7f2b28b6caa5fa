"""Engine stage: the registry of engines. Each engine module turns a LaunchSpec into an
EngineLaunch and owns the rest of its engine's behaviour (see `orchestrator.engines.base`)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Final

from orchestrator.engines.base import Engine, EngineLaunch, LaunchSpec
from orchestrator.engines.names import ENGINE_NAMES

#: Engine name -> (module, class). An explicit table; a module is imported on first use, so a
#: vLLM profile never builds TensorRT-LLM's option models (CLI start-up time).
ENGINE_CLASSES: Final[Mapping[str, tuple[str, str]]] = {
    "vllm": ("orchestrator.engines.vllm", "VllmEngine"),
    "sglang": ("orchestrator.engines.sglang", "SglangEngine"),
    "trtllm": ("orchestrator.engines.trtllm", "TrtllmEngine"),
}


class _Engines(Mapping[str, Engine]):
    """ENGINES[name] -> the engine instance, created once."""

    def __init__(self) -> None:
        self._loaded: dict[str, Engine] = {}

    def __getitem__(self, name: str) -> Engine:
        if name not in self._loaded:
            if name not in ENGINE_CLASSES:  # the profile schema admits only known names
                raise KeyError(f"no engine {name!r}; known: {', '.join(ENGINE_NAMES)}")
            module, cls = ENGINE_CLASSES[name]
            self._loaded[name] = getattr(importlib.import_module(module), cls)()
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(ENGINE_CLASSES)

    def __len__(self) -> int:
        return len(ENGINE_CLASSES)


ENGINES: Final[Mapping[str, Engine]] = _Engines()

__all__ = ["ENGINES", "ENGINE_CLASSES", "Engine", "EngineLaunch", "LaunchSpec"]
