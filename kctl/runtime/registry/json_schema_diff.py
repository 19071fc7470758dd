"""Confluent's JSON Schema compatibility: the differences between the schema data was
written with (`original`) and the schema that reads it (`update`), each a compatible or an
incompatible kind, as Confluent's json diff names them.

A schema is seen as Confluent's validator library sees it: an object, array, string,
number (integer is a number that requires an integer), boolean, null, enum, const, not, a
combination (allOf, anyOf, oneOf; a list of types is an anyOf), `true`/`{}` (anything) or
`false` (nothing); a `$ref` is the schema it points at, in the same document or in one of
the schema's references (named as the reference is, or by its `$id`).

The rules that decide most changes:

- another kind of schema is TYPE_CHANGED, unless the update accepts anything or the
  original accepted nothing; integer to number is TYPE_EXTENDED, number to integer
  TYPE_NARROWED; a schema that becomes a oneOf/anyOf one branch of which reads it is
  SUM_TYPE_EXTENDED;
- an object's properties follow its content model: adding a property to an open model
  (no additionalProperties, no patternProperties) is incompatible unless the new property
  accepts anything, adding an optional one to a closed model is compatible, a required one
  only with a default; removing a property is compatible from an open model, incompatible
  from a closed one; a property that turns required is incompatible without a default;
  additionalProperties removed or narrowed is incompatible;
- bounds (length, items, properties, minimum, maximum, multipleOf), patterns, enums and
  uniqueItems may widen but not narrow; a oneOf/anyOf may gain branches, an allOf may not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["COMPATIBLE", "differences"]

COMPATIBLE = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED",
    "SCHEMA_REMOVED", "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED",
    "MIN_LENGTH_REMOVED", "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED",
    "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED",
    "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED",
    "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED",
    "MIN_PROPERTIES_REMOVED", "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
    "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED",
    "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED",
    "NOT_TYPE_NARROWED"})

_OBJECT_KEYS = ("properties", "additionalProperties", "required", "patternProperties",
                "minProperties", "maxProperties", "dependencies", "dependentRequired",
                "dependentSchemas")
_ARRAY_KEYS = ("items", "prefixItems", "additionalItems", "minItems", "maxItems",
               "uniqueItems")
_STRING_KEYS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_COMBINERS = ("allOf", "anyOf", "oneOf")


def _kind(schema: Any) -> str:
    if schema is True or schema == {}:
        return "empty"
    if schema is False:
        return "false"
    if not isinstance(schema, dict):
        return "empty"
    if any(k in schema for k in _COMBINERS) or isinstance(schema.get("type"), list):
        return "combined"
    if "enum" in schema:
        return "enum"
    if "const" in schema:
        return "const"
    if "not" in schema:
        return "not"
    t = schema.get("type")
    if t == "integer":
        return "number"
    if isinstance(t, str):
        return t
    for kind, keys in (("object", _OBJECT_KEYS), ("array", _ARRAY_KEYS),
                       ("string", _STRING_KEYS), ("number", _NUMBER_KEYS)):
        if any(k in schema for k in keys):
            return kind
    return "empty"


def _combination(schema: Any) -> tuple[str, list[Any]]:
    """A combined schema's criterion and branches (a list of types is an anyOf)."""
    for key in _COMBINERS:
        if key in schema:
            return key, list(schema[key])
    rest = {k: v for k, v in schema.items() if k != "type"}
    return "anyOf", [{**rest, "type": t} for t in schema["type"]]


class _Diff:
    def __init__(self, original_root: Any, update_root: Any,
                 documents: tuple[dict[str, Any], dict[str, Any]] = ({}, {})) -> None:
        self.roots = (original_root, update_root)
        self.documents = documents
        self.found: list[tuple[str, str]] = []
        self._seen: set[tuple[int, int]] = set()

    def add(self, kind: str, path: str) -> None:
        self.found.append((kind, path or "#/"))

    def sub(self) -> _Diff:
        d = _Diff(*self.roots, self.documents)
        d._seen = set(self._seen)
        return d

    @property
    def compatible(self) -> bool:
        return all(kind in COMPATIBLE for kind, _ in self.found)

    def _resolve(self, schema: Any, root: Any, documents: dict[str, Any]) -> Any:
        for _ in range(32):  # a $ref to a $ref, but not forever
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                return schema
            base, _, fragment = schema["$ref"].partition("#")
            if base:  # another document: one of the schema's references
                if base not in documents:
                    return {k: v for k, v in schema.items() if k != "$ref"} or True
                root = documents[base]
            node = root
            for part in fragment.split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                node = node.get(part) if isinstance(node, dict) else None
            schema = node if node is not None else True
        return schema

    def compare(self, original: Any, update: Any, path: str) -> None:
        if original is None and update is None:
            return
        if original is None:
            self.add("SCHEMA_ADDED", path)
            return
        if update is None:
            self.add("SCHEMA_REMOVED", path)
            return
        original = self._resolve(original, self.roots[0], self.documents[0])
        update = self._resolve(update, self.roots[1], self.documents[1])
        o_kind, u_kind = _kind(original), _kind(update)
        if o_kind != "combined" and u_kind == "combined":
            criterion, branches = _combination(update)
            if len(branches) == 1:
                sub = self.sub()
                sub.compare(original, branches[0], path)
                if sub.compatible:
                    self.found += sub.found
                    return
            elif criterion in ("anyOf", "oneOf"):
                for branch in branches:
                    sub = self.sub()
                    sub.compare(original, branch, path)
                    if sub.compatible:
                        self.found += sub.found
                        self.add("SUM_TYPE_EXTENDED", path)
                        return
        elif o_kind == "combined" and u_kind != "combined":
            _, branches = _combination(original)
            if len(branches) == 1:
                sub = self.sub()
                sub.compare(branches[0], update, path)
                if sub.compatible:
                    self.found += sub.found
                    return
        if o_kind != u_kind:
            if o_kind != "false" and u_kind != "empty":
                self.add("TYPE_CHANGED", path)
            return
        if not isinstance(original, dict) or not isinstance(update, dict):
            return
        key = (id(original), id(update))
        if key in self._seen:  # a recursive schema is compared once
            return
        self._seen.add(key)
        for attr, kind in (("$id", "ID_CHANGED"), ("title", "TITLE_CHANGED"),
                           ("description", "DESCRIPTION_CHANGED"),
                           ("default", "DEFAULT_CHANGED")):
            if original.get(attr) != update.get(attr):
                self.add(kind, path)
        compare: dict[str, Callable[[dict[str, Any], dict[str, Any], str], None]] = {
            "object": self._object, "array": self._array, "string": self._string,
            "number": self._number, "enum": self._enum, "const": self._const,
            "not": self._not, "combined": self._combined}
        if o_kind in compare:
            compare[o_kind](original, update, path)

    # --- bounds ---------------------------------------------------------------------

    def _bound(self, original: dict[str, Any], update: dict[str, Any], key: str,
               name: str, path: str, upper: bool) -> None:
        """An upper bound may rise or go, a lower one fall or go."""
        o, u = original.get(key), update.get(key)
        if isinstance(o, bool) or isinstance(u, bool):  # draft 4's exclusive flags
            if o != u:
                self.add(f"{name}_ADDED" if u else f"{name}_REMOVED", path)
            return
        if o == u:
            return
        if o is None:
            self.add(f"{name}_ADDED", path)
        elif u is None:
            self.add(f"{name}_REMOVED", path)
        elif (u > o) == upper:
            self.add(f"{name}_INCREASED" if upper else f"{name}_DECREASED", path)
        else:
            self.add(f"{name}_DECREASED" if upper else f"{name}_INCREASED", path)

    def _string(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        self._bound(original, update, "maxLength", "MAX_LENGTH", path, True)
        self._bound(original, update, "minLength", "MIN_LENGTH", path, False)
        o, u = original.get("pattern"), update.get("pattern")
        if o != u:
            self.add("PATTERN_ADDED" if o is None else "PATTERN_REMOVED" if u is None
                     else "PATTERN_CHANGED", path)

    def _number(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        self._bound(original, update, "maximum", "MAXIMUM", path, True)
        self._bound(original, update, "minimum", "MINIMUM", path, False)
        self._bound(original, update, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM", path, True)
        self._bound(original, update, "exclusiveMinimum", "EXCLUSIVE_MINIMUM", path, False)
        o, u = original.get("multipleOf"), update.get("multipleOf")
        if o != u:
            if o is None:
                self.add("MULTIPLE_OF_ADDED", path)
            elif u is None:
                self.add("MULTIPLE_OF_REMOVED", path)
            elif _divides(u, o):
                self.add("MULTIPLE_OF_REDUCED", path)
            elif _divides(o, u):
                self.add("MULTIPLE_OF_EXPANDED", path)
            else:
                self.add("MULTIPLE_OF_CHANGED", path)
        o_int, u_int = original.get("type") == "integer", update.get("type") == "integer"
        if o_int and not u_int:
            self.add("TYPE_EXTENDED", path)
        elif u_int and not o_int:
            self.add("TYPE_NARROWED", path)

    def _enum(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        o, u = _values(original["enum"]), _values(update["enum"])
        if o != u:
            self.add("ENUM_ARRAY_EXTENDED" if o <= u else "ENUM_ARRAY_NARROWED" if u <= o
                     else "ENUM_ARRAY_CHANGED", path)

    def _const(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        if original["const"] != update["const"]:
            self.add("CONST_CHANGED", path)

    def _not(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        sub = self.sub()
        sub.compare(update["not"], original["not"], f"{path}/not")
        self.add("NOT_TYPE_NARROWED" if sub.compatible else "NOT_TYPE_EXTENDED", path)

    # --- combinations ---------------------------------------------------------------

    def _combined(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        o_crit, o_branches = _combination(original)
        u_crit, u_branches = _combination(update)
        if o_crit != u_crit:
            if u_crit == "anyOf" or (u_crit == "oneOf" and len(o_branches) == 1) or (
                    u_crit == "allOf" and len(o_branches) == 1 and len(u_branches) == 1):
                self.add("COMBINED_TYPE_EXTENDED", path)
            else:
                self.add("COMBINED_TYPE_CHANGED", path)
                return
        o_set, u_set = _distinct(o_branches), _distinct(u_branches)
        if len(o_set) < len(u_set):
            self.add("PRODUCT_TYPE_EXTENDED" if u_crit == "allOf" else "SUM_TYPE_EXTENDED",
                     path)
        elif len(o_set) > len(u_set):
            self.add("PRODUCT_TYPE_NARROWED" if u_crit == "allOf" else "SUM_TYPE_NARROWED",
                     path)
        edges: dict[int, dict[int, list[tuple[str, str]]]] = {}
        for i, o in enumerate(o_set):
            for j, u in enumerate(u_set):
                sub = self.sub()
                sub.compare(o, u, f"{path}/{o_crit}/{i}")
                if sub.compatible:
                    edges.setdefault(i, {})[j] = sub.found
        matching = _match(edges)
        for i, j in matching.items():
            self.found += edges[i][j]
        if len(matching) < min(len(o_set), len(u_set)):
            self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", path)

    # --- objects --------------------------------------------------------------------

    def _object(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        o_props = original.get("properties") or {}
        u_props = update.get("properties") or {}
        o_req = set(original.get("required") or ())
        u_req = set(update.get("required") or ())
        for name in o_props:
            if name in u_props:
                if name in o_req and name not in u_req:
                    self.add("REQUIRED_ATTRIBUTE_REMOVED", f"{path}/required/{name}")
                elif name in u_req and name not in o_req:
                    self.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                             if _has_default(u_props[name]) else "REQUIRED_ATTRIBUTE_ADDED",
                             f"{path}/required/{name}")
        for name in sorted(o_props.keys() | u_props.keys()):
            where = f"{path}/properties/{name}"
            if name not in u_props:
                if _open(update):
                    self.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", where)
                    continue
                partial = _partial(update, name)
                if partial is not None:
                    sub = self.sub()
                    sub.compare(o_props[name], partial, where)
                    self.found += sub.found
                    self.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                             if sub.compatible else
                             "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                             where)
                else:
                    self.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL"
                             if o_props[name] is False
                             else "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
            elif name not in o_props:
                if _open(original):
                    self.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                             if _kind(u_props[name]) == "empty" and u_props[name] is not False
                             else "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)
                    continue
                partial = _partial(original, name)
                if partial is not None:
                    sub = self.sub()
                    sub.compare(partial, u_props[name], where)
                    self.found += sub.found
                    self.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                             if sub.compatible else
                             "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
                if name in u_req:
                    self.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                             if _has_default(u_props[name])
                             else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)
                else:
                    self.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)
            else:
                self.compare(o_props[name], u_props[name], where)
        self._dependencies(original, update, path)
        where = f"{path}/additionalProperties"
        o_permits = original.get("additionalProperties", True) is not False
        u_permits = update.get("additionalProperties", True) is not False
        o_schema, u_schema = _additional(original), _additional(update)
        if o_permits != u_permits:
            self.add("ADDITIONAL_PROPERTIES_ADDED" if u_permits
                     else "ADDITIONAL_PROPERTIES_REMOVED", where)
        elif o_schema is None and u_schema is not None:
            self.add("ADDITIONAL_PROPERTIES_NARROWED", where)
        elif u_schema is None and o_schema is not None:
            self.add("ADDITIONAL_PROPERTIES_EXTENDED", where)
        elif o_schema is not None:
            self.compare(o_schema, u_schema, where)
        self._bound(original, update, "maxProperties", "MAX_PROPERTIES", path, True)
        self._bound(original, update, "minProperties", "MIN_PROPERTIES", path, False)

    def _dependencies(self, original: dict[str, Any], update: dict[str, Any],
                      path: str) -> None:
        def split(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
            arrays = dict(schema.get("dependentRequired") or {})
            schemas = dict(schema.get("dependentSchemas") or {})
            for k, v in (schema.get("dependencies") or {}).items():
                (arrays if isinstance(v, list) else schemas)[k] = v
            return arrays, schemas

        (o_arr, o_sch), (u_arr, u_sch) = split(original), split(update)
        for name in sorted(o_arr.keys() | u_arr.keys()):
            where = f"{path}/dependencies/{name}"
            if name not in u_arr:
                self.add("DEPENDENCY_ARRAY_REMOVED", where)
            elif name not in o_arr:
                self.add("DEPENDENCY_ARRAY_ADDED", where)
            elif set(o_arr[name]) != set(u_arr[name]):
                o, u = set(o_arr[name]), set(u_arr[name])
                self.add("DEPENDENCY_ARRAY_EXTENDED" if o <= u else "DEPENDENCY_ARRAY_NARROWED"
                         if u <= o else "DEPENDENCY_ARRAY_CHANGED", where)
        for name in sorted(o_sch.keys() | u_sch.keys()):
            where = f"{path}/dependencies/{name}"
            if name not in u_sch:
                self.add("DEPENDENCY_SCHEMA_REMOVED", where)
            elif name not in o_sch:
                self.add("DEPENDENCY_SCHEMA_ADDED", where)
            else:
                self.compare(o_sch[name], u_sch[name], where)

    # --- arrays ---------------------------------------------------------------------

    def _array(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        self._bound(original, update, "maxItems", "MAX_ITEMS", path, True)
        self._bound(original, update, "minItems", "MIN_ITEMS", path, False)
        o_unique, u_unique = bool(original.get("uniqueItems")), bool(update.get("uniqueItems"))
        if o_unique != u_unique:
            self.add("UNIQUE_ITEMS_ADDED" if u_unique else "UNIQUE_ITEMS_REMOVED", path)
        o_tuple, u_tuple = _tuple_items(original), _tuple_items(update)
        if o_tuple is None and u_tuple is None:
            o_all, u_all = original.get("items"), update.get("items")
            if o_all is not None or u_all is not None:
                self.compare(True if o_all is None else o_all,
                             True if u_all is None else u_all, f"{path}/items")
            return
        o_tuple, u_tuple = o_tuple or [], u_tuple or []
        for i in range(max(len(o_tuple), len(u_tuple))):
            where = f"{path}/items/{i}"
            if i >= len(u_tuple):
                if _open_items(update):
                    self.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", where)
                else:
                    self.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL"
                             if o_tuple[i] is False
                             else "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
            elif i >= len(o_tuple):
                if _open_items(original):
                    self.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                             if _kind(u_tuple[i]) == "empty" and u_tuple[i] is not False
                             else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", where)
                else:
                    self.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", where)
            else:
                self.compare(o_tuple[i], u_tuple[i], where)
        o_add, u_add = _additional_items(original), _additional_items(update)
        where = f"{path}/additionalItems"
        if (o_add is not False) != (u_add is not False):
            self.add("ADDITIONAL_ITEMS_ADDED" if u_add is not False
                     else "ADDITIONAL_ITEMS_REMOVED", where)
        elif isinstance(o_add, dict) != isinstance(u_add, dict):
            self.add("ADDITIONAL_ITEMS_NARROWED" if isinstance(u_add, dict)
                     else "ADDITIONAL_ITEMS_EXTENDED", where)
        elif isinstance(o_add, dict):
            self.compare(o_add, u_add, where)


def _divides(small: Any, big: Any) -> bool:
    try:
        return bool(small) and math.isclose(big / small, round(big / small))
    except (TypeError, ZeroDivisionError):
        return False


def _values(values: Any) -> set[str]:
    import json

    return {json.dumps(v, sort_keys=True) for v in values or ()}


def _distinct(branches: list[Any]) -> list[Any]:
    import json

    seen: dict[str, Any] = {}
    for b in branches:
        seen.setdefault(json.dumps(b, sort_keys=True), b)
    return list(seen.values())


def _match(edges: dict[int, dict[int, Any]]) -> dict[int, int]:
    """A maximum matching of original branches to update branches (augmenting paths)."""
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in edges:
        augment(i, set())
    return {i: j for j, i in owner.items()}


def _has_default(schema: Any) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _additional(schema: dict[str, Any]) -> Any:
    """The schema of additional properties, None when it is not a schema."""
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _open(schema: dict[str, Any]) -> bool:
    """An open content model: any other property, of any kind, is allowed."""
    return not schema.get("patternProperties") and _additional(schema) is None and \
        schema.get("additionalProperties", True) is not False


def _partial(schema: dict[str, Any], name: str) -> Any:
    """The schema a partially open content model gives property `name`, if any."""
    import re

    for pattern, sub in (schema.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return sub
        except re.error:
            continue
    return _additional(schema)


def _tuple_items(schema: dict[str, Any]) -> list[Any] | None:
    if isinstance(schema.get("prefixItems"), list):
        return list(schema["prefixItems"])
    if isinstance(schema.get("items"), list):
        return list(schema["items"])
    return None


def _additional_items(schema: dict[str, Any]) -> Any:
    if "prefixItems" in schema:
        return schema.get("items", True)
    return schema.get("additionalItems", True)


def _open_items(schema: dict[str, Any]) -> bool:
    return _additional_items(schema) is True


def differences(original: Any, update: Any, original_documents: dict[str, Any] | None = None,
                update_documents: dict[str, Any] | None = None) -> list[str]:
    """The incompatible differences from `original` (the schema data was written with) to
    `update` (the schema that reads it); empty: compatible. The documents are each schema's
    references by name (and `$id`), for a `$ref` to another document."""
    diff = _Diff(original, update, (original_documents or {}, update_documents or {}))
    diff.compare(original, update, "#")
    return [f"{kind} at {where}" for kind, where in diff.found if kind not in COMPATIBLE]
