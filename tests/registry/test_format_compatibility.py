"""Confluent's compatibility rules for JSON Schema and Protobuf, change by change: each case
is a schema data was written with, the schema that reads it, and the incompatible kinds
Confluent's diff reports (none: a compatible change). Protobuf cases compare .proto text
with .proto text and with the base64 descriptor Confluent's Python serializer registers."""

from __future__ import annotations

import base64
import json

import pytest

from kctl.runtime.registry.formats import incompatibilities, parse
from kctl.runtime.registry.protobuf import file_descriptor


def obj(properties: dict, required: list[str] | None = None, **more) -> dict:
    out: dict = {"type": "object", "properties": properties, **more}
    if required:
        out["required"] = required
    return out


STRING = {"type": "string"}
INTEGER = {"type": "integer"}
NULLABLE = {"oneOf": [{"type": "null"}, STRING]}

JSON_CASES = [
    ("a property changes its type", obj({"id": INTEGER}), obj({"id": STRING}),
     ["TYPE_CHANGED"]),
    ("integer widens to number", obj({"id": INTEGER}), obj({"id": {"type": "number"}}), []),
    ("number narrows to integer", obj({"id": {"type": "number"}}), obj({"id": INTEGER}),
     ["TYPE_NARROWED"]),
    ("an optional property added to a closed model",
     obj({"id": INTEGER}, additionalProperties=False),
     obj({"id": INTEGER, "memo": NULLABLE}, additionalProperties=False), []),
    ("a property added to an open model", obj({"id": INTEGER}),
     obj({"id": INTEGER, "memo": NULLABLE}), ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ("a property accepting anything added to an open model", obj({"id": INTEGER}),
     obj({"id": INTEGER, "extra": {}}), []),
    ("a required property added to a closed model",
     obj({"id": INTEGER}, additionalProperties=False),
     obj({"id": INTEGER, "memo": STRING}, ["memo"], additionalProperties=False),
     ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]),
    ("a required property with a default added to a closed model",
     obj({"id": INTEGER}, additionalProperties=False),
     obj({"id": INTEGER, "memo": {**STRING, "default": ""}}, ["memo"],
         additionalProperties=False), []),
    ("a property removed from an open model", obj({"id": INTEGER, "memo": STRING}),
     obj({"id": INTEGER}), []),
    ("a property removed from a closed model",
     obj({"id": INTEGER, "memo": STRING}, additionalProperties=False),
     obj({"id": INTEGER}, additionalProperties=False),
     ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    ("a property added that a partially open model covered",
     obj({"id": INTEGER}, additionalProperties=STRING),
     obj({"id": INTEGER, "memo": STRING}, additionalProperties=STRING), []),
    ("a property added that a partially open model did not cover",
     obj({"id": INTEGER}, additionalProperties=STRING),
     obj({"id": INTEGER, "n": INTEGER}, additionalProperties=STRING),
     ["TYPE_CHANGED", "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]),
    ("an optional property turns required", obj({"id": INTEGER}), obj({"id": INTEGER}, ["id"]),
     ["REQUIRED_ATTRIBUTE_ADDED"]),
    ("a required property turns optional", obj({"id": INTEGER}, ["id"]), obj({"id": INTEGER}),
     []),
    ("an open model closes", obj({"id": INTEGER}),
     obj({"id": INTEGER}, additionalProperties=False), ["ADDITIONAL_PROPERTIES_REMOVED"]),
    ("a closed model opens", obj({"id": INTEGER}, additionalProperties=False),
     obj({"id": INTEGER}), []),
    ("a string's maxLength falls", {"type": "string", "maxLength": 10},
     {"type": "string", "maxLength": 5}, ["MAX_LENGTH_DECREASED"]),
    ("a string's maxLength rises", {"type": "string", "maxLength": 5},
     {"type": "string", "maxLength": 10}, []),
    ("a minimum appears", INTEGER, {"type": "integer", "minimum": 0}, ["MINIMUM_ADDED"]),
    ("a pattern goes", {"type": "string", "pattern": "^a"}, STRING, []),
    ("an enum gains a value", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, []),
    ("an enum loses a value", {"enum": ["a", "b"]}, {"enum": ["a"]}, ["ENUM_ARRAY_NARROWED"]),
    ("a type becomes nullable", STRING, NULLABLE, []),
    ("a nullable type loses null", NULLABLE, STRING, ["TYPE_CHANGED"]),
    ("a oneOf loses a branch", {"oneOf": [STRING, INTEGER]}, {"oneOf": [STRING]},
     ["SUM_TYPE_NARROWED"]),
    ("an allOf gains a branch", {"allOf": [STRING]},
     {"allOf": [STRING, {"maxLength": 3}]}, ["PRODUCT_TYPE_EXTENDED"]),
    ("array items change type", {"type": "array", "items": STRING},
     {"type": "array", "items": INTEGER}, ["TYPE_CHANGED"]),
    ("uniqueItems appears", {"type": "array", "items": STRING},
     {"type": "array", "items": STRING, "uniqueItems": True}, ["UNIQUE_ITEMS_ADDED"]),
    ("a $ref's target changes type",
     {"definitions": {"id": INTEGER}, **obj({"id": {"$ref": "#/definitions/id"}})},
     {"definitions": {"id": STRING}, **obj({"id": {"$ref": "#/definitions/id"}})},
     ["TYPE_CHANGED"]),
    ("anything read by anything", True, {}, []),
    ("a nested object closes",
     obj({"a": obj({"x": INTEGER})}), obj({"a": obj({"x": INTEGER}, additionalProperties=False)}),
     ["ADDITIONAL_PROPERTIES_REMOVED"]),
]


@pytest.mark.parametrize(("written", "reading", "expected"),
                         [c[1:] for c in JSON_CASES], ids=[c[0] for c in JSON_CASES])
def test_json_schema_changes_follow_confluents_diff(written, reading, expected):
    found = incompatibilities(parse("JSON", json.dumps(reading)),
                              parse("JSON", json.dumps(written)))
    assert [f.split(" at ")[0] for f in found] == expected, found


def proto(body: str, package: str = "shop", imports: str = "") -> str:
    return f'syntax = "proto3";\npackage {package};\n{imports}\n{body}\n'


ORDER = "message Order {\n  int64 id = 1;\n  string note = 2;\n}"

PROTO_CASES = [
    ("a field added", proto(ORDER),
     proto("message Order {\n  int64 id = 1;\n  string note = 2;\n  bool paid = 3;\n}"), []),
    ("a field removed", proto(ORDER), proto("message Order {\n  int64 id = 1;\n}"), []),
    ("a field renamed", proto(ORDER),
     proto("message Order {\n  int64 id = 1;\n  string memo = 2;\n}"), []),
    ("int64 to int32: one wire group", proto(ORDER),
     proto("message Order {\n  int32 id = 1;\n  string note = 2;\n}"), []),
    ("string to bytes: one wire group", proto(ORDER),
     proto("message Order {\n  int64 id = 1;\n  bytes note = 2;\n}"), []),
    ("int64 to sint64", proto(ORDER),
     proto("message Order {\n  sint64 id = 1;\n  string note = 2;\n}"),
     ["FIELD_SCALAR_KIND_CHANGED"]),
    ("int64 to string", proto(ORDER),
     proto("message Order {\n  string id = 1;\n  string note = 2;\n}"),
     ["FIELD_SCALAR_KIND_CHANGED"]),
    ("a scalar becomes a message", proto(ORDER),
     proto("message Order {\n  int64 id = 1;\n  Note note = 2;\n}\nmessage Note { string t = 1; }"),
     ["FIELD_KIND_CHANGED"]),
    ("a message added", proto(ORDER), proto(ORDER + "\nmessage Refund { int64 id = 1; }"), []),
    ("a message removed", proto(ORDER + "\nmessage Refund { int64 id = 1; }"), proto(ORDER),
     ["MESSAGE_REMOVED"]),
    ("the package changed", proto(ORDER), proto(ORDER, package="store"), ["PACKAGE_CHANGED"]),
    ("a nested message's field changes type",
     proto("message Order {\n  Line line = 1;\n  message Line { int64 qty = 1; }\n}"),
     proto("message Order {\n  Line line = 1;\n  message Line { string qty = 1; }\n}"),
     ["FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"]),
    ("a field's message type renamed",
     proto("message Order {\n  Line line = 1;\n}\nmessage Line { int64 qty = 1; }"),
     proto("message Order {\n  Item line = 1;\n}\nmessage Item { int64 qty = 1; }"),
     ["FIELD_NAMED_TYPE_CHANGED", "MESSAGE_REMOVED"]),
    ("a map's value type changes",
     proto("message Order {\n  map<string, int64> tags = 1;\n}"),
     proto("message Order {\n  map<string, string> tags = 1;\n}"),
     ["FIELD_SCALAR_KIND_CHANGED"]),
    ("an enum gains a value",
     proto("message Order {\n  State s = 1;\n}\nenum State { NEW = 0; }"),
     proto("message Order {\n  State s = 1;\n}\nenum State { NEW = 0; PAID = 1; }"), []),
    ("an enum field becomes int32",
     proto("message Order {\n  State s = 1;\n}\nenum State { NEW = 0; }"),
     proto("message Order {\n  int32 s = 1;\n}\nenum State { NEW = 0; }"), []),
    ("a field leaves a oneof's last members",
     proto("message Order {\n  oneof pay {\n    string card = 1;\n    string iban = 2;\n  }\n}"),
     proto("message Order {\n  oneof pay {\n    string card = 1;\n  }\n}"),
     ["ONEOF_FIELD_REMOVED"]),
    ("a field joins a oneof",
     proto("message Order {\n  oneof pay {\n    string card = 1;\n  }\n}"),
     proto("message Order {\n  oneof pay {\n    string card = 1;\n    string iban = 2;\n  }\n}"),
     []),
    ("two fields moved into one new oneof",
     proto("message Order {\n  string card = 1;\n  string iban = 2;\n}"),
     proto("message Order {\n  oneof pay {\n    string card = 1;\n    string iban = 2;\n  }\n}"),
     ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]),
    ("one field moved into a new oneof",
     proto("message Order {\n  string card = 1;\n}"),
     proto("message Order {\n  oneof pay {\n    string card = 1;\n  }\n}"), []),
    ("a proto3 optional field is no oneof",
     proto("message Order {\n  string card = 1;\n}"),
     proto("message Order {\n  optional string card = 1;\n}"), []),
    ("a required field added (proto2)",
     'syntax = "proto2";\npackage shop;\nmessage Order {\n  optional int64 id = 1;\n}\n',
     'syntax = "proto2";\npackage shop;\nmessage Order {\n  optional int64 id = 1;\n'
     '  required string note = 2;\n}\n', ["REQUIRED_FIELD_ADDED"]),
]


@pytest.mark.parametrize(("written", "reading", "expected"),
                         [c[1:] for c in PROTO_CASES], ids=[c[0] for c in PROTO_CASES])
def test_protobuf_changes_follow_confluents_diff(written, reading, expected):
    found = incompatibilities(parse("PROTOBUF", reading), parse("PROTOBUF", written))
    assert sorted(f.split(":")[0] for f in found) == sorted(expected), found
    # the descriptor Confluent's Python serializer would register compares the same way
    described = base64.b64encode(file_descriptor(written).SerializeToString()).decode()
    found = incompatibilities(parse("PROTOBUF", reading), parse("PROTOBUF", described))
    assert sorted(f.split(":")[0] for f in found) == sorted(expected), found


def test_a_protobuf_reference_is_compiled_with_the_schema_that_imports_it():
    money = proto("message Amount {\n  int64 cents = 1;\n}", package="money")
    order = proto("message Order {\n  money.Amount total = 1;\n}", imports='import "money.proto";')
    parsed = parse("PROTOBUF", order, [("money.proto", money)])
    retyped = proto("message Amount {\n  string cents = 1;\n}", package="money")
    changed = parse("PROTOBUF", order, [("money.proto", retyped)])
    assert incompatibilities(parsed, parsed) == []
    assert [f.split(":")[0] for f in incompatibilities(changed, parsed)] == [
        "FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"]


def test_proto_text_that_does_not_compile_is_an_invalid_schema():
    from kctl.runtime.registry import RegistryError

    with pytest.raises(RegistryError) as bad:
        parse("PROTOBUF", proto("message Order {\n  Missing x = 1;\n}"))
    assert '"Missing" is not defined' in str(bad.value)


def test_a_json_schema_reference_is_compared_through_its_ref():
    address = {"type": "object", "properties": {"zip": INTEGER}}
    order = json.dumps(obj({"ship_to": {"$ref": "address.json"}}))
    parsed = parse("JSON", order, [("address.json", json.dumps(address))])
    retyped = parse("JSON", order, [("address.json", json.dumps(
        {"type": "object", "properties": {"zip": STRING}}))])
    assert incompatibilities(parsed, parsed) == []
    assert incompatibilities(retyped, parsed) == [
        "TYPE_CHANGED at #/properties/ship_to/properties/zip"]
