"""The schemas the imitation judges objects by, and the verdicts a real API server gives.

Built-in kinds: the Kubernetes 1.36 OpenAPI as kubernetes-validate ships it (the `$defs` of
`v1.36.0-local-strict/_definitions.json`, with `x-kubernetes-list-type` and list map keys).
Custom kinds: the `openAPIV3Schema` of each served version of a CustomResourceDefinition installed
into the imitation, with `metadata` judged as the built-in ObjectMeta.

Three verdicts, as recorded in ../shared/referees/kube-apiserver/README.md:

* `typed_errors`: server-side apply first builds a typed object (structured-merge-diff); a value
  of the wrong type, or a field the schema does not declare, fails there. The API server answers
  500 with no reason and no causes, on a CRD and on a built-in Deployment alike ("Server-side
  apply", rows `replicas: "two"`, `replcas`, the old LWS CRD; kubernetes/kubernetes#139253). The
  messages follow structured-merge-diff's typed/validate.go
  (https://github.com/kubernetes-sigs/structured-merge-diff/blob/1f3a4916aa78a1bc8a6d413ec7420d6b810e2839/typed/helpers.go).
* `value_errors`: the OpenAPI value checks of a CRD (required, enum, minimum/maximum, lengths,
  patterns, item and property counts), as 422 Invalid with one cause per field (rows `replicas:
  -1` and the HTTPRoute namespace of 70 characters). **CEL rules (`x-kubernetes-validations`) are
  not evaluated**: `cel_rules` counts them, and when the object already fails a schema check the
  imitation adds the API server's "some validation rules were not checked" cause, as recorded.
* `pruned_paths`: what a structural schema would drop from a create or update that is not an
  apply (an apply of an undeclared field is the 500 above instead).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate

#: The Kubernetes release whose built-in schemas the imitation serves (the recording's line).
K8S_SCHEMA_VERSION = "1.36.0"
_REF_PREFIXES = ("#/$defs/", "/api/_definitions.json#/$defs/")
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"


@functools.cache
def builtin_definitions() -> dict[str, Any]:
    """`$defs` of the Kubernetes OpenAPI that kubernetes-validate ships for K8S_SCHEMA_VERSION."""
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = root / f"v{K8S_SCHEMA_VERSION}-local-strict" / "_definitions.json"
    return dict(json.loads(path.read_text(encoding="utf-8"))["$defs"])


@functools.cache
def builtin_kinds() -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> definition name, for every built-in kind."""
    out = {}
    for name, node in builtin_definitions().items():
        for gvk in node.get("x-kubernetes-group-version-kind") or []:
            out[(gvk["group"], gvk["version"], gvk["kind"])] = name
    return out


@dataclass(frozen=True)
class Schema:
    """One node of a schema, with the definitions its `$ref`s point into."""

    node: Any
    builtin: bool
    """A built-in kind's node: Go maps and slices there are dropped when empty (omitempty)."""
    ref: str = ""
    """The definition this node came from, when it was a `$ref` (e.g. Quantity)."""

    @staticmethod
    def for_builtin(group: str, version: str, kind: str) -> Schema | None:
        name = builtin_kinds().get((group, version, kind))
        return None if name is None else _resolved({"$ref": f"#/$defs/{name}"}, builtin=True)

    @staticmethod
    def for_crd(open_api_v3: dict[str, Any]) -> Schema:
        node = dict(open_api_v3)
        properties = dict(node.get("properties") or {})
        properties["metadata"] = {"$ref": f"#/$defs/{OBJECT_META}"}
        properties.setdefault("apiVersion", {"type": "string"})
        properties.setdefault("kind", {"type": "string"})
        node["properties"] = properties
        node.setdefault("type", "object")
        return Schema(node, builtin=False)

    # -- shape ----------------------------------------------------------------------------------

    @property
    def types(self) -> set[str]:
        declared = self.node.get("type")
        if isinstance(declared, list):
            return {t for t in declared if t != "null"}
        return {declared} if isinstance(declared, str) else set()

    @property
    def shape(self) -> str:
        """struct | map | list | scalar | int-or-string | quantity | untyped"""
        if self.ref == QUANTITY:
            return "quantity"
        if self.ref == INT_OR_STRING or self.node.get("x-kubernetes-int-or-string"):
            return "int-or-string"
        types = self.types
        if "array" in types:
            return "list"
        if "object" in types:
            if "properties" in self.node:
                return "struct"
            extra = self.node.get("additionalProperties")
            if isinstance(extra, dict):
                return "map"
            if self.builtin or self.node.get("x-kubernetes-preserve-unknown-fields") or extra:
                return "untyped"
            return "struct"  # a CRD object without properties declares no field
        if types & {"string", "integer", "number", "boolean"}:
            return "scalar"
        if self.node.get("x-kubernetes-preserve-unknown-fields") or not types:
            return "untyped"
        return "untyped"

    @property
    def preserves_unknown(self) -> bool:
        return bool(self.node.get("x-kubernetes-preserve-unknown-fields"))

    @property
    def list_type(self) -> str:
        """atomic | set | map (lists are atomic unless their schema says otherwise)."""
        return str(self.node.get("x-kubernetes-list-type") or "atomic")

    @property
    def list_keys(self) -> tuple[str, ...]:
        return tuple(self.node.get("x-kubernetes-list-map-keys") or ())

    @property
    def map_atomic(self) -> bool:
        return self.node.get("x-kubernetes-map-type") == "atomic"

    def field(self, name: str) -> Schema | None:
        """The schema of a struct's field, a map's value, or None when it is not declared."""
        shape = self.shape
        if shape == "struct":
            child = (self.node.get("properties") or {}).get(name)
            if child is None:
                if self.preserves_unknown:
                    return Schema({}, self.builtin)
                return None
            return _resolved(child, self.builtin)
        if shape == "map":
            return _resolved(self.node["additionalProperties"], self.builtin)
        if shape == "untyped":
            return Schema({}, self.builtin)
        return None

    def items(self) -> Schema:
        found = self.node.get("items")
        return (
            _resolved(found, self.builtin) if isinstance(found, dict) else Schema({}, self.builtin)
        )

    def key_default(self, key: str) -> Any:
        """The default of a list map key field; Kubernetes defaults `protocol` to TCP in the
        OpenAPI the API server builds its typed schema from (the `+default="TCP"` markers of
        core/v1 ContainerPort and ServicePort), which kubernetes-validate's copy omits."""
        child = self.items().field(key)
        if child is not None and "default" in child.node:
            return child.node["default"]
        return "TCP" if key == "protocol" else None


def _resolved(node: Any, builtin: bool) -> Schema:
    ref = ""
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 32:
        target = str(node["$ref"])
        for prefix in _REF_PREFIXES:
            if target.startswith(prefix):
                ref = target[len(prefix) :]
                node = builtin_definitions()[ref]
                break
        else:
            raise KeyError(f"unresolvable $ref {target}")
        seen += 1
    return Schema(node if isinstance(node, dict) else {}, builtin, ref)


# -- structured-merge-diff paths ---------------------------------------------------------------

PathElement = str
"""One step of a field path as FieldsV1 spells it: `f:name`, `k:{"name":"engine"}`, `v:"x"`,
`i:0` (structured-merge-diff's fieldpath serialization)."""
Path_ = tuple[PathElement, ...]


def element_for(schema: Schema, index: int, item: Any) -> PathElement | str:
    """The path element of a list item, or an error message (a keyed item without its key)."""
    kind = schema.list_type
    if kind == "map" and schema.list_keys:
        if not isinstance(item, dict):
            return "associative list with keys may not have non-map elements"
        keys = {}
        for key in schema.list_keys:
            if key in item:
                keys[key] = item[key]
            elif schema.key_default(key) is not None:
                keys[key] = schema.key_default(key)
            else:
                return (
                    f'associative list with keys has an element that omits key field "{key}" '
                    "(and doesn't have default value)"
                )
        return "k:" + json.dumps(dict(sorted(keys.items())), separators=(",", ":"))
    if kind == "set":
        if isinstance(item, (dict, list)) or item is None:
            return "associative list without keys has an element that's a map type"
        return "v:" + json.dumps(item, separators=(",", ":"))
    return f"i:{index}"


def smd_path(path: Path_) -> str:
    """A path as structured-merge-diff prints it: `.spec.template.spec.containers[name="engine"].image`."""
    out = []
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            out.append("." + rest)
        elif kind == "k":
            keys = json.loads(rest)
            out.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]")
        elif kind == "v":
            out.append(f"[={rest}]")
        else:
            out.append(f"[{rest}]")
    return "".join(out)


# -- typed (500) ---------------------------------------------------------------------------------


def typed_errors(value: Any, schema: Schema, path: Path_ = ()) -> list[str]:
    """What building a typed object from `value` fails on, one `path: message` line each, in
    the order structured-merge-diff reports them."""
    errors: list[str] = []
    _typed(value, schema, path, errors)
    return errors


def _typed(value: Any, schema: Schema, path: Path_, errors: list[str]) -> None:
    if value is None:
        return
    shape = schema.shape
    where = smd_path(path)
    prefix = f"{where}: " if where else ""
    if shape in ("untyped",):
        return
    if shape == "int-or-string" or shape == "quantity":
        if isinstance(value, (dict, list, bool)):
            errors.append(f"{prefix}expected string or numeric, got {_go_type(value)}")
        return
    if shape == "scalar":
        message = _scalar_error(schema.types, value)
        if message:
            errors.append(prefix + message)
        return
    if shape in ("struct", "map"):
        if not isinstance(value, dict):
            errors.append(f"{prefix}expected map, got {_go_value(value)}")
            return
        for name, child in value.items():
            sub = schema.field(name)
            if sub is None:
                errors.append(f"{smd_path((*path, 'f:' + name))}: field not declared in schema")
                continue
            _typed(child, sub, (*path, "f:" + name), errors)
        return
    if shape == "list":
        if not isinstance(value, list):
            errors.append(f"{prefix}expected list, got {_go_value(value)}")
            return
        seen: set[str] = set()
        for index, item in enumerate(value):
            element = element_for(schema, index, item)
            if not element.startswith(("k:", "v:", "i:")):
                errors.append(f"{prefix}element {index}: {element}")
                continue
            if element in seen:
                errors.append(f"{prefix}duplicate entries for key {smd_path((element,))}")
            seen.add(element)
            _typed(item, schema.items(), (*path, element), errors)


def _scalar_error(types: set[str], value: Any) -> str:
    if types & {"integer", "number"} and not types & {"string"}:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"expected numeric (int or float), got {_go_type(value)}"
        return ""
    if "string" in types and not types & {"integer", "number", "boolean"}:
        if not isinstance(value, str):
            return f"expected string, got {_go_value(value)}"
        return ""
    if types == {"boolean"} and not isinstance(value, bool):
        return f"expected boolean, got {_go_value(value)}"
    return ""


def _go_type(value: Any) -> str:
    """Go's %T of a value decoded from JSON."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    return "<nil>"


def _go_value(value: Any) -> str:
    """Go's %#v of a structured-merge-diff value, for the 'expected string' messages."""
    shown = json.dumps(value) if isinstance(value, (str, dict, list)) else str(value).lower()
    return f"&value.valueUnstructured{{Value:{shown}}}"


# -- value checks (422) --------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldError:
    """One field.Error of k8s.io/apimachinery: its type, field path, value and detail.

    `message` is what Error() prints (`spec.replicas: Invalid value: -1: ...`), `body` what a
    StatusCause's message holds (the same without the field)."""

    type: str
    field: str
    body: str

    @property
    def message(self) -> str:
        return f"{self.field}: {self.body}"


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", field, f"Invalid value: {_shown(value)}: {detail}")


def required(field: str) -> FieldError:
    return FieldError("FieldValueRequired", field, "Required value")


def too_long(field: str, limit: int) -> FieldError:
    # The 1.36 wording, as recorded ("Too long: may not be more than 63 bytes").
    return FieldError("FieldValueTooLong", field, f"Too long: may not be more than {limit} bytes")


def not_supported(field: str, value: Any, allowed: list[Any]) -> FieldError:
    choices = ", ".join(json.dumps(v) for v in allowed)
    return FieldError(
        "FieldValueNotSupported",
        field,
        f"Unsupported value: {_shown(value)}: supported values: {choices}",
    )


def too_many(field: str, count: int, limit: int) -> FieldError:
    return FieldError(
        "FieldValueTooMany", field, f"Too many: {count}: must have at most {limit} items"
    )


def _shown(value: Any) -> str:
    """field.Error's rendering of a bad value: strings quoted, numbers and booleans bare,
    null as null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True)


def value_errors(value: Any, schema: Schema, field: str = "") -> list[FieldError]:
    """kube-openapi's checks of a custom resource against its schema (apiextensions-apiserver's
    ValidateCustomResource): each object's properties first, then its required fields, the order
    the recorded 422 lists them in."""
    out: list[FieldError] = []
    _values(value, schema, field, out)
    return out


def _values(value: Any, schema: Schema, field: str, out: list[FieldError]) -> None:
    node = schema.node
    if value is None:
        return
    shape = schema.shape
    label = field or "<nil>"
    if shape == "scalar":
        type_error = _json_type_error(schema.types, value)
        if type_error:
            out.append(
                invalid(
                    label, value, f"{label} in body must be of type {type_error}: {_shown(value)}"
                )
            )
            return
    if "enum" in node and value not in node["enum"]:
        out.append(not_supported(label, value, list(node["enum"])))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _numbers(value, node, label, out)
    if isinstance(value, str):
        _strings(value, node, label, out)
    if isinstance(value, list):
        if "maxItems" in node and len(value) > node["maxItems"]:
            out.append(too_many(label, len(value), int(node["maxItems"])))
        if "minItems" in node and len(value) < node["minItems"]:
            out.append(
                invalid(
                    label,
                    len(value),
                    f"{label} in body should have at least {node['minItems']} items",
                )
            )
        items = schema.items()
        for index, item in enumerate(value):
            _values(item, items, f"{field}[{index}]", out)
    if isinstance(value, dict) and shape in ("struct", "map"):
        if "maxProperties" in node and len(value) > node["maxProperties"]:
            out.append(too_many(label, len(value), int(node["maxProperties"])))
        if "minProperties" in node and len(value) < node["minProperties"]:
            out.append(
                invalid(
                    label,
                    len(value),
                    f"{label} in body should have at least {node['minProperties']} properties",
                )
            )
        for name, child in value.items():
            sub = schema.field(name)
            if sub is None or (field == "" and name == "metadata"):
                continue  # undeclared: pruned or refused elsewhere; ObjectMeta: its own checks
            joined = f"{field}.{name}" if field else name
            if shape == "map":
                joined = f"{field}[{name}]"
            _values(child, sub, joined, out)
        for name in node.get("required") or []:
            if name not in value or value[name] is None:
                out.append(required(f"{field}.{name}" if field else name))
    for option in node.get("allOf") or []:
        _values(value, Schema(option, schema.builtin), field, out)


def _json_type_error(types: set[str], value: Any) -> str:
    if not types:
        return ""
    if isinstance(value, bool):
        return "" if "boolean" in types else sorted(types)[0]
    if isinstance(value, int):
        return "" if types & {"integer", "number"} else sorted(types)[0]
    if isinstance(value, float):
        if "number" in types or ("integer" in types and value.is_integer()):
            return ""
        return sorted(types)[0]
    if isinstance(value, str):
        return "" if "string" in types else sorted(types)[0]
    return ""


def _numbers(value: float, node: dict[str, Any], label: str, out: list[FieldError]) -> None:
    checks = (
        ("minimum", "exclusiveMinimum", lambda v, m: v < m, lambda v, m: v <= m,
         "greater than or equal to", "greater than"),
        ("maximum", "exclusiveMaximum", lambda v, m: v > m, lambda v, m: v >= m,
         "less than or equal to", "less than"),
    )  # fmt: skip
    for key, exclusive, fails, fails_exclusive, words, words_exclusive in checks:
        if key not in node:
            continue
        bound = node[key]
        if node.get(exclusive) and fails_exclusive(value, bound):
            out.append(
                invalid(
                    label, value, f"{label} in body should be {words_exclusive} {_number(bound)}"
                )
            )
        elif not node.get(exclusive) and fails(value, bound):
            out.append(invalid(label, value, f"{label} in body should be {words} {_number(bound)}"))
    multiple = node.get("multipleOf")
    if multiple and not math.isclose(value / multiple, round(value / multiple)):
        out.append(
            invalid(label, value, f"{label} in body should be a multiple of {_number(multiple)}")
        )


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _strings(value: str, node: dict[str, Any], label: str, out: list[FieldError]) -> None:
    if "maxLength" in node and len(value) > node["maxLength"]:
        out.append(too_long(label, int(node["maxLength"])))
    if "minLength" in node and len(value) < node["minLength"]:
        out.append(
            invalid(
                label, value, f"{label} in body should be at least {node['minLength']} chars long"
            )
        )
    pattern = node.get("pattern")
    if pattern and re.search(pattern, value) is None:
        out.append(invalid(label, value, f"{label} in body should match '{pattern}'"))


def cel_rules(schema: Schema) -> int:
    """How many CEL rules (`x-kubernetes-validations`) a CRD schema carries: not evaluated here."""
    return sum(len(n.get("x-kubernetes-validations") or []) for n in _nodes(schema.node))


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


#: The cause the API server adds when CEL rules were skipped because the object already failed
#: a schema check (recorded: the HTTPRoute row of "Server-side apply").
CEL_SKIPPED = FieldError(
    "FieldValueInvalid",
    "<nil>",
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation",
)


# -- pruning -------------------------------------------------------------------------------------


def pruned_paths(value: Any, schema: Schema, field: str = "") -> list[str]:
    """Fields a structural schema drops (not declared, no x-kubernetes-preserve-unknown-fields),
    as `spec.foo` paths; apiVersion, kind and metadata of the object itself are kept."""
    out: list[str] = []
    _prune(value, schema, field, out, top=True)
    return out


def _prune(value: Any, schema: Schema, field: str, out: list[str], *, top: bool = False) -> None:
    shape = schema.shape
    if isinstance(value, dict) and shape in ("struct", "map"):
        for name, child in value.items():
            joined = f"{field}.{name}" if field else name
            if top and name in ("apiVersion", "kind", "metadata"):
                continue
            sub = schema.field(name)
            if sub is None:
                out.append(joined)
                continue
            _prune(child, sub, joined, out)
    elif isinstance(value, list) and shape == "list":
        for index, item in enumerate(value):
            _prune(item, schema.items(), f"{field}[{index}]", out)


def prune(value: Any, schema: Schema, paths: list[str]) -> Any:
    """`value` without the fields `pruned_paths` named."""
    drop = set(paths)
    return _without(value, schema, "", drop, top=True)


def _without(value: Any, schema: Schema, field: str, drop: set[str], *, top: bool) -> Any:
    if isinstance(value, dict) and schema.shape in ("struct", "map"):
        out = {}
        for name, child in value.items():
            joined = f"{field}.{name}" if field else name
            if joined in drop:
                continue
            if top and name in ("apiVersion", "kind", "metadata"):
                out[name] = child
                continue
            sub = schema.field(name)
            out[name] = child if sub is None else _without(child, sub, joined, drop, top=False)
        return out
    if isinstance(value, list) and schema.shape == "list":
        return [
            _without(item, schema.items(), f"{field}[{i}]", drop, top=False)
            for i, item in enumerate(value)
        ]
    return value
