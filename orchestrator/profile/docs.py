"""Attribute docstrings of the profile models, read from source only when asked for.

Every profile field is documented by the string literal under it (STYLE §8.4). Pydantic can read
them at class creation (`use_attribute_docstrings`), but that parses the module source on every
start-up (about 80 ms of each CLI call); `specdeploy schema` is the only user of the text, so it
reads them here instead and puts them into the JSON Schema as field descriptions.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from pydantic import BaseModel


def field_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> the docstring written under it in the class body (own fields only)."""
    source = textwrap.dedent(inspect.getsource(model))
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for node, following in zip(body.body, body.body[1:], strict=False):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        value = following.value if isinstance(following, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            docs[node.target.id] = inspect.cleandoc(value.value)
    return docs


def models_of(root: type[BaseModel]) -> list[type[BaseModel]]:
    """`root` and every model reachable through its fields, each once."""
    seen: list[type[BaseModel]] = []
    pending = [root]
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            pending += [a for a in _annotations(field.annotation) if a not in seen]
    return seen


def documented_json_schema(root: type[BaseModel]) -> dict[str, Any]:
    """`root.model_json_schema()` with every field's attribute docstring as its description."""
    schema = root.model_json_schema()
    for model in models_of(root):
        target = schema if model is root else schema.get("$defs", {}).get(model.__name__)
        if target is None:
            continue
        for name, doc in field_docstrings(model).items():
            prop = target.get("properties", {}).get(name)
            if prop is not None:
                prop["description"] = doc
    return schema


def _annotations(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _annotations(arg)]
