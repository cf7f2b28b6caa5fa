"""Server-side apply as the API server does it, and what the server does with what it stores.

* Field sets per manager, serialized as `metadata.managedFields` entries (`manager`,
  `operation` Apply or Update, `apiVersion`, `time`, `fieldsType: FieldsV1`, `fieldsV1`, and
  `subresource` for a status writer), sorted by operation, time and manager as the API server
  sorts them. After another manager's forced apply, its entry stays beside ours (recorded:
  ../shared/referees/kube-apiserver/README.md, "What the server does with what it stores").
* Merge by the schema's list types: keyed lists (`x-kubernetes-list-type: map`) merge item by
  item, sets by value, everything else is replaced (structured-merge-diff's merge).
* Conflicts: a field the apply changes that another manager owns, unless forced, with the path
  structured-merge-diff prints (`.spec.template.spec.containers[name="engine"].image`) and the
  manager as printManager prints it (recorded: the 409 row of "Server-side apply"; the format of
  https://github.com/kubernetes/kubernetes/blob/5079825b846339ffdeca51b6abdc71c48b20234b/staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/conflict.go).
* Stored form of a built-in kind: empty Go slices and maps are dropped (`omitempty`; recorded:
  "a Deployment applied with `initContainers: []` and `env: []` comes back without them"), nulls
  are dropped, quantities are canonical (`1` -> "1", `0.5` -> "500m", `2048Mi` -> "2Gi"), and the
  defaults of apps/v1 and core/v1 the API server sets are filled in. Custom kinds keep empty lists.
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from typing import Any

from tests.kube.schema import Path_, Schema, element_for, smd_path

#: Fields of an applied configuration no manager owns (the field manager strips them).
_UNOWNED: frozenset[Path_] = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        *(
            ("f:metadata", f"f:{name}")
            for name in (
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "managedFields",
                "selfLink",
            )
        ),
    }
)


def strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_nulls(v) for v in value if v is not None]
    return value


# -- field sets ----------------------------------------------------------------------------------


def field_set(value: Any, schema: Schema, path: Path_ = ()) -> set[Path_]:
    """The fields an applied configuration sets (structured-merge-diff's ToFieldSet): leaves,
    keyed and set list items themselves, and empty maps and lists as leaves."""
    out: set[Path_] = set()
    _collect(value, schema, path, out)
    return {p for p in out if p not in _UNOWNED and p != ("f:metadata",) and p}


def _collect(value: Any, schema: Schema, path: Path_, out: set[Path_]) -> None:
    shape = schema.shape
    if (
        isinstance(value, dict)
        and shape in ("struct", "map", "untyped")
        and not (shape == "map" and schema.map_atomic)
    ):
        if not value or shape == "untyped":
            out.add(path)
            return
        for name, child in value.items():
            sub = schema.field(name) or Schema({}, schema.builtin)
            _collect(child, sub, (*path, f"f:{name}"), out)
        return
    if isinstance(value, list) and shape == "list" and schema.list_type != "atomic" and value:
        for index, item in enumerate(value):
            element = element_for(schema, index, item)
            item_path = (*path, element)
            out.add(item_path)
            if element.startswith("k:"):
                _collect_children(item, schema.items(), item_path, out)
        return
    out.add(path)


def _collect_children(item: Any, schema: Schema, path: Path_, out: set[Path_]) -> None:
    if isinstance(item, dict):
        for name, child in item.items():
            _collect(
                child, schema.field(name) or Schema({}, schema.builtin), (*path, f"f:{name}"), out
            )


def value_at(obj: Any, path: Path_, schema: Schema) -> tuple[bool, Any]:
    """(found, value) at a field path."""
    node, current = obj, schema
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            if not isinstance(node, dict) or rest not in node:
                return False, None
            node = node[rest]
            current = current.field(rest) or Schema({}, current.builtin)
            continue
        if not isinstance(node, list):
            return False, None
        found = _item(node, element, current)
        if found is None:
            return False, None
        node = node[found]
        current = current.items()
    return True, node


def _item(items: list[Any], element: str, schema: Schema) -> int | None:
    if element.startswith("i:"):
        index = int(element[2:])
        return index if index < len(items) else None
    for index, item in enumerate(items):
        if element_for(schema, index, item) == element:
            return index
    return None


def remove(obj: Any, path: Path_, schema: Schema) -> None:
    """Remove the field or list item at `path` from `obj` (in place), and parents it empties."""
    if not path:
        return
    found, parent = value_at(obj, path[:-1], schema)
    if not found:
        return
    parent_schema = _schema_at(path[:-1], schema)
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif isinstance(parent, list):
        index = _item(parent, last, parent_schema)
        if index is not None:
            parent.pop(index)
    else:
        return
    if parent in ({}, []) and len(path) > 1:
        remove(obj, path[:-1], schema)


def _schema_at(path: Path_, schema: Schema) -> Schema:
    current = schema
    for element in path:
        if element.startswith("f:"):
            current = current.field(element[2:]) or Schema({}, current.builtin)
        else:
            current = current.items()
    return current


# -- merge ---------------------------------------------------------------------------------------


def merge(live: Any, applied: Any, schema: Schema) -> Any:
    """`applied` merged onto `live` by the schema's list and map types."""
    shape = schema.shape
    if (
        isinstance(applied, dict)
        and isinstance(live, dict)
        and shape in ("struct", "map")
        and not (shape == "map" and schema.map_atomic)
    ):
        out = dict(live)
        for name, child in applied.items():
            sub = schema.field(name) or Schema({}, schema.builtin)
            out[name] = merge(live.get(name), child, sub)
        return out
    if (
        isinstance(applied, list)
        and isinstance(live, list)
        and shape == "list"
        and schema.list_type != "atomic"
    ):
        out_list = [copy.deepcopy(item) for item in live]
        keys = [element_for(schema, i, item) for i, item in enumerate(out_list)]
        for index, item in enumerate(applied):
            element = element_for(schema, index, item)
            if element in keys:
                at = keys.index(element)
                out_list[at] = merge(out_list[at], item, schema.items())
            else:
                out_list.append(copy.deepcopy(item))
                keys.append(element)
        return out_list
    return copy.deepcopy(applied)


# -- conflicts -----------------------------------------------------------------------------------


def conflicts(
    live: Any, applied: Any, applied_set: set[Path_], managers: list[dict[str, Any]], me: str,
    schema: Schema,
) -> list[tuple[dict[str, Any], Path_]]:  # fmt: skip
    """(the other manager's entry, path) for each field the apply changes that another manager
    owns."""
    out = []
    for entry in managers:
        if entry["manager"] == me and entry["operation"] == "Apply":
            continue
        theirs = from_fields_v1(entry.get("fieldsV1") or {})
        for path in sorted(applied_set & theirs):
            if path[-1].startswith(("k:", "v:")):
                continue  # a list item itself: its fields conflict, not the item
            before = value_at(live, path, schema)
            after = value_at(applied, path, schema)
            if before != after:
                out.append((entry, path))
    return out


def print_manager(entry: dict[str, Any]) -> str:
    """printManager of conflict.go: an Update manager with its apiVersion and time."""
    shown = json.dumps(entry["manager"])
    if entry.get("subresource"):
        shown = f'{shown} with subresource "{entry["subresource"]}"'
    if entry.get("operation") == "Update":
        if entry.get("time"):
            return f"{shown} using {entry['apiVersion']} at {entry['time']}"
        return f"{shown} using {entry['apiVersion']}"
    return shown


def conflict_status(found: list[tuple[dict[str, Any], Path_]]) -> dict[str, Any]:
    """The 409 Conflict Status of NewConflictError / getConflictMessage."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {print_manager(entry)}",
            "field": smd_path(path),
        }
        for entry, path in found
    ]
    if len(found) == 1:
        entry, path = found[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {print_manager(entry)}: {smd_path(path)}"
        )
    else:
        by_manager: dict[str, list[str]] = {}
        for entry, path in found:
            by_manager.setdefault(print_manager(entry), []).append(smd_path(path))
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {manager}:")
            lines += [f"- {p}" for p in by_manager[manager]]
        message = f"Apply failed with {len(found)} conflicts: " + "\n".join(lines)
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Conflict",
        "details": {"causes": causes},
        "code": 409,
    }


# -- updates (not apply) ---------------------------------------------------------------------------


def changed_paths(old: Any, new: Any, schema: Schema) -> tuple[set[Path_], set[Path_]]:
    """(paths set or changed by an update, paths it removed), over both objects' field sets."""
    before = field_set(old, schema) if old is not None else set()
    after = field_set(new, schema)
    changed = {p for p in after if value_at(old, p, schema) != value_at(new, p, schema)}
    removed = {p for p in before - after if not value_at(new, p, schema)[0]}
    return changed, removed


# -- FieldsV1 ------------------------------------------------------------------------------------


def to_fields_v1(paths: set[Path_]) -> dict[str, Any]:
    trie: dict[str, Any] = {}
    for path in sorted(paths):
        node = trie
        for element in path:
            node = node.setdefault(element, {})
        if path and path[-1].startswith("k:"):
            node.setdefault(".", {})
    return trie


def from_fields_v1(trie: dict[str, Any], prefix: Path_ = ()) -> set[Path_]:
    out: set[Path_] = set()
    for key, child in trie.items():
        if key == ".":
            out.add(prefix)
            continue
        path = (*prefix, key)
        if not child:
            out.add(path)
        else:
            out |= from_fields_v1(child, path)
    return out


# -- the stored form ---------------------------------------------------------------------------------


def stored_form(obj: Any, schema: Schema) -> Any:
    """What the API server stores for what it was given: nulls dropped, quantities canonical, and
    on built-in kinds empty Go slices and maps dropped (omitempty)."""
    return _stored(obj, schema, omit_empty=True)


def canonical(obj: Any, schema: Schema) -> Any:
    """Quantities in canonical form, nulls dropped; empty lists and maps kept (an applied
    configuration still owns them)."""
    return _stored(obj, schema, omit_empty=False)


def _stored(value: Any, schema: Schema, *, omit_empty: bool) -> Any:
    shape = schema.shape
    if shape == "quantity" and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return canonical_quantity(value)
    if isinstance(value, dict):
        out = {}
        for name, child in value.items():
            if child is None:
                continue
            sub = schema.field(name) or Schema({}, schema.builtin)
            kept = _stored(child, sub, omit_empty=omit_empty)
            if omit_empty and schema.builtin and kept in ({}, []) and sub.shape in ("map", "list"):
                continue  # omitempty on a Go map or slice
            out[name] = kept
        return out
    if isinstance(value, list):
        items = schema.items()
        return [_stored(item, items, omit_empty=omit_empty) for item in value if item is not None]
    return value


_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


class BadQuantity(ValueError):
    pass


def parse_quantity(text: str | float) -> tuple[Fraction, str]:
    """(value, format: "binary" | "decimal") of a resource.Quantity."""
    if isinstance(text, (int, float)):
        return Fraction(str(text)), "decimal"
    raw = text.strip()
    for suffix, power in _BINARY.items():
        if raw.endswith(suffix):
            return _number(raw[: -len(suffix)], text) * (2**power), "binary"
    for exponent_mark in ("e", "E"):
        if exponent_mark in raw and raw[-1:].isdigit():
            mantissa, _, exponent = raw.partition(exponent_mark)
            return _number(mantissa, text) * Fraction(10) ** int(exponent), "decimal"
    suffix = raw[-1:] if raw[-1:] in _DECIMAL and raw[-1:] else ""
    number = raw[: -len(suffix)] if suffix else raw
    return _number(number, text) * Fraction(10) ** _DECIMAL[suffix], "decimal"


def _number(text: str, whole: str | float) -> Fraction:
    if not text or not all(c.isdigit() or c in ".+-" for c in text):
        raise BadQuantity(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' ({whole!r})"
        )
    try:
        return Fraction(text)
    except ValueError:
        raise BadQuantity(f"unable to parse quantity's suffix ({whole!r})") from None


def canonical_quantity(text: str | float) -> str:
    """resource.Quantity.String(): the canonical form the API server stores."""
    try:
        value, form = parse_quantity(text)
    except BadQuantity:
        return str(text)
    if value == 0:
        return "0"
    if form == "binary" and (value.denominator != 1 or abs(value) < 1024):
        form = "decimal"
    if form == "binary":
        for suffix, power in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
            scaled = value / 2**power
            if scaled.denominator == 1:
                return f"{scaled.numerator}{suffix}"
        return str(value.numerator)
    for suffix, exponent in sorted(_DECIMAL.items(), key=lambda kv: -kv[1]):
        scaled = value / Fraction(10) ** exponent
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    scaled = value * 10**9  # finer than nano: the API server rounds up to n
    return f"{-(-scaled.numerator // scaled.denominator)}n"
