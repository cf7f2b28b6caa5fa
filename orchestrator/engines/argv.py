"""Small helpers engine modules use to spell argv tokens the same way."""

from __future__ import annotations


def optional_flag(flag: str, value: str | None) -> list[str]:
    """[flag, value], or nothing when the value is unset."""
    return [] if value is None else [flag, value]


def fraction(value: float) -> str:
    """A memory fraction as the shortest decimal of at most 3 places ("0.9", "0.864")."""
    return f"{value:.3f}".rstrip("0").rstrip(".")
