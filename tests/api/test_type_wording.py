"""Messages name a type with the article it takes: "an array", "a struct"."""

from __future__ import annotations

import pytest

from kctl.api import SchemaBuilder
from kctl.api.data import INT32_SCHEMA as INT32
from kctl.api.data import a
from kctl.connectors.jdbc._common import dialect_for
from kctl.connectors.jdbc._sink_sql import UnsupportedType, column_type
from kctl.errors import DataError


def test_a_nested_field_is_named_with_its_article_when_jdbc_sink_refuses_it():
    with pytest.raises(UnsupportedType, match="Field 'tags' is an array: JdbcSink"):
        column_type(dialect_for("jdbc:sqlite::memory:"), SchemaBuilder.array(INT32).build(),
                    field="tags")


def test_looking_up_a_field_on_a_scalar_schema_says_which_kind_it_is():
    with pytest.raises(DataError, match="on an int32 schema"):
        INT32.field("x")
    assert [a(w) for w in ("array", "map", "struct", "int8", "boolean")] == \
        ["an array", "a map", "a struct", "an int8", "a boolean"]
