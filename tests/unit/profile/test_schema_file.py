"""profile.schema.json (for editors) is exactly what `specdeploy schema` prints, and every profile
field is documented."""

from __future__ import annotations

import json

from click.testing import CliRunner
from pydantic import BaseModel

from orchestrator.cli import cli
from orchestrator.profile.schema import Profile
from tests.support import REPO_ROOT


def test_published_schema_is_current() -> None:
    printed = json.loads(CliRunner().invoke(cli, ["schema"]).stdout)
    published = json.loads((REPO_ROOT / "profile.schema.json").read_text())
    assert printed == published, "run `specdeploy schema > profile.schema.json`"


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    seen.add(model)
    for field in model.model_fields.values():
        for arg in (field.annotation, *getattr(field.annotation, "__args__", ())):
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in seen:
                _models(arg, seen)
    return seen


def test_every_field_has_a_docstring() -> None:
    for model in _models(Profile, set()):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} needs an attribute docstring"
