"""Render, then parse, then check: Jinja2 templates -> YAML -> Manifest objects.

Templates live in `<repo>/templates/kubernetes` (shipped in the wheel as
`orchestrator/_templates`); `templates_dir()` is the one place that finds them. Templates only lay
out values decided in Python (`manifests/context.py`); `render_template` refuses a missing value.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any, Final

import jinja2
import markupsafe
import yaml
from jinja2.utils import htmlsafe_json_dumps

from orchestrator.emitters.base import Manifest, ManifestError


def templates_dir() -> Path:
    """The templates directory: the repo checkout's, else the copy inside the installed wheel."""
    package_root = Path(__file__).resolve().parent.parent
    for candidate in (package_root.parent / "templates", package_root / "_templates"):
        if (candidate / "kubernetes").is_dir():
            return candidate
    raise FileNotFoundError(f"no templates/kubernetes beside {package_root}")


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir() / "kubernetes"),
        undefined=jinja2.StrictUndefined,  # a misspelt value is an error, not an empty string
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["tojson"] = _tojson
    return env


def _tojson(value: Any) -> markupsafe.Markup:
    """Jinja's tojson (JSON is YAML; `<>&'` escaped), but a missing value is an UndefinedError
    naming it instead of a TypeError from the JSON encoder. Text stays UTF-8: JSON's ASCII escapes
    spell a character outside the Basic Multilingual Plane as a surrogate pair, which YAML reads
    as two lone surrogates that kubectl refuses. The few characters YAML may not carry raw
    (DEL, C1 controls, U+FFFE/U+FFFF) are escaped, each a single code point."""
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    text = htmlsafe_json_dumps(value, sort_keys=True, ensure_ascii=False)
    return markupsafe.Markup(_NOT_YAML_PRINTABLE.sub(_escape, str(text)))


#: Characters JSON leaves raw with ensure_ascii=False that YAML 1.1 does not carry as themselves:
#: those outside its printable set, and its line breaks NEL, LS and PS, which a double-quoted
#: scalar folds into a space (https://yaml.org/spec/1.1/#c-printable, #b-char). All are in the
#: BMP, so \uXXXX spells each one.
_NOT_YAML_PRINTABLE: Final = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def render_template(template: str, **values: Any) -> list[Manifest]:
    """Render templates/kubernetes/<template>.yaml.j2 and parse every document it produced."""
    source = f"templates/kubernetes/{template}.yaml.j2"
    try:
        text = _environment().get_template(f"{template}.yaml.j2").render(**values)
    except jinja2.UndefinedError as exc:
        raise ManifestError(f"{source} uses a value the context does not have: {exc}") from exc
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source} produced invalid YAML: {exc}") from exc
    return [Manifest.parse(doc, source=source) for doc in documents if doc is not None]
