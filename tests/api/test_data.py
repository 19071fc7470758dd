"""Schemas and structs validate what connectors put in them."""

import pytest

from kctl.api import SchemaBuilder, Struct, Type
from kctl.api import data as d
from kctl.errors import DataError


def person_schema():
    return (SchemaBuilder.struct().name("Person")
            .field("name", d.STRING_SCHEMA)
            .field("age", d.OPTIONAL_INT32_SCHEMA)
            .field("tags", SchemaBuilder.array(d.STRING_SCHEMA).optional().build())
            .field("country", SchemaBuilder(Type.STRING).optional().default_value("NL").build())
            .build())


def test_struct_put_get_defaults_and_to_dict():
    s = Struct(person_schema()).put("name", "ann").put("tags", ["x"])
    assert s.get("country") == "NL" and s.get_without_default("country") is None
    assert s.to_dict() == {"name": "ann", "age": None, "tags": ["x"], "country": "NL"}
    s.validate()


def test_struct_rejects_wrong_types_and_missing_required_fields():
    s = Struct(person_schema())
    with pytest.raises(DataError, match="age"):
        s.put("age", "old")
    with pytest.raises(DataError, match="out of range"):
        s.put("age", 2**40)
    with pytest.raises(DataError, match="name"):
        s.validate()
    with pytest.raises(DataError, match="not a field"):
        s.put("nope", 1)


def test_nested_arrays_and_maps_are_validated_per_element():
    m = SchemaBuilder.map(d.STRING_SCHEMA, d.INT64_SCHEMA).build()
    d.validate_value(m, {"a": 1})
    with pytest.raises(DataError, match=r"\['b'\]"):
        d.validate_value(m, {"b": "x"})
    arr = SchemaBuilder.array(d.INT8_SCHEMA).build()
    with pytest.raises(DataError, match=r"\[1\]"):
        d.validate_value(arr, [1, 300])


def test_schemas_compare_by_value():
    assert person_schema() == person_schema()
    assert hash(person_schema()) == hash(person_schema())
    assert Struct(person_schema(), {"name": "a"}) == Struct(person_schema(), {"name": "a"})


def test_duplicate_field_rejected():
    with pytest.raises(DataError, match="duplicate"):
        SchemaBuilder.struct().field("a", d.STRING_SCHEMA).field("a", d.STRING_SCHEMA)


def test_a_struct_schema_can_default_to_a_struct_of_its_own_fields():
    """Kafka's Flatten and TimestampConverter tests build optional structs whose default is
    a Struct: the default is made from the schema before the default was set."""
    shape = SchemaBuilder.struct().field("a", d.INT32_SCHEMA).optional()
    default = Struct(shape.build()).put("a", 7)
    schema = shape.default_value(default).build()
    assert schema.default.get("a") == 7
    other = Struct(SchemaBuilder.struct().field("b", d.INT32_SCHEMA).build()).put("b", 1)
    with pytest.raises(DataError, match="default: struct schema does not match"):
        SchemaBuilder.struct().field("a", d.INT32_SCHEMA).default_value(other).build()
