"""profile.schema.json (for editors) is exactly what `specdeploy schema` prints, and every profile
field is documented."""

from __future__ import annotations

import json

from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.profile.docs import field_docstrings, models_of
from orchestrator.profile.schema import Profile, ProposerSpec
from tests.support import REPO_ROOT


def test_published_schema_is_current() -> None:
    printed = json.loads(CliRunner().invoke(cli, ["schema"]).stdout)
    published = json.loads((REPO_ROOT / "profile.schema.json").read_text())
    assert printed == published, "run `specdeploy schema > profile.schema.json`"


def test_every_field_has_a_docstring() -> None:
    for model in models_of(Profile):
        docs = field_docstrings(model)
        for name in model.model_fields:
            assert docs.get(name), f"{model.__name__}.{name} needs an attribute docstring"


def test_schema_descriptions_come_from_the_docstrings() -> None:
    schema = json.loads(CliRunner().invoke(cli, ["schema"]).stdout)
    method = schema["$defs"]["ProposerSpec"]["properties"]["method"]["description"]
    assert method == field_docstrings(ProposerSpec)["method"]
