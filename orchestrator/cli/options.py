"""Options shared by several commands, defined once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

profile_argument = click.Path(exists=True, dir_okay=False, path_type=Path)


def format_option(fn: F) -> F:
    return click.option(
        "--format",
        "output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Output format.",
    )(fn)


def strict_option(fn: F) -> F:
    return click.option("--strict", is_flag=True, help="Treat warnings as errors.")(fn)


def offline_option(fn: F) -> F:
    return click.option(
        "--offline",
        is_flag=True,
        envvar="HF_HUB_OFFLINE",
        help="Never contact the model hub (also set by HF_HUB_OFFLINE=1).",
    )(fn)


def ignore_option(fn: F) -> F:
    return click.option(
        "--ignore",
        multiple=True,
        metavar="RULE",
        help="Skip a rule by id (repeatable); `specdeploy explain RULE` says what it checks.",
    )(fn)


def platform_options(fn: F) -> F:
    """--platform NAME and --platform-option KEY=VALUE (repeatable)."""
    from orchestrator.emitters.base import EMITTER_CLASSES

    fn = click.option(
        "--platform-option",
        "platform_option",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_key_values,
        help="A platform setting (repeatable), e.g. kserve api-version=v1alpha1.",
    )(fn)
    return click.option(
        "--platform",
        type=click.Choice(list(EMITTER_CLASSES)),
        default="kubernetes",
        show_default=True,
        help="Render or apply the deployment as this platform's own objects.",
    )(fn)


def _key_values(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", ctx, param)
        out[key] = setting
    return out
