"""A registry of named implementations whose modules load on first use (CLI start-up time): an
explicit table of name -> (module, class), never import-time registration."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyRegistry(Mapping[str, T], Generic[T]):
    """REGISTRY[name] -> the instance of that name's class, created once."""

    def __init__(self, what: str, classes: Mapping[str, tuple[str, str]]) -> None:
        self._what = what
        self._classes = classes
        self._loaded: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        if name not in self._loaded:
            if name not in self._classes:
                raise KeyError(f"no {self._what} {name!r}; known: {', '.join(self._classes)}")
            module, cls = self._classes[name]
            self._loaded[name] = getattr(importlib.import_module(module), cls)()
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)
