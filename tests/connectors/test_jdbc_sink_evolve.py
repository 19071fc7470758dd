"""JdbcSink follows a value schema that evolves: auto.evolve widens a column where the
database can without loss (integer -> bigint -> numeric or double, a decimal's digits, a
number become text), and without auto.evolve the task fails naming the table and column."""

from __future__ import annotations

import decimal
from typing import Any

import pytest
from test_jdbc_sink import TOPIC, TP, q, start_task

from kctl.api import Schema, SchemaBuilder, SinkRecord, Struct, Type
from kctl.api.arrow import PRECISION_PARAM
from kctl.api.data import (
    DECIMAL,
    INT64_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    decimal_schema,
)
from kctl.connectors.jdbc._sink_tables import DbColumn, wider_type
from kctl.connectors.jdbc.sink import JdbcSinkError

pytestmark = pytest.mark.spark


def versioned(v: Schema, version: int) -> Schema:
    return SchemaBuilder.struct().version(version).field("id", INT64_SCHEMA) \
        .field("v", v).build()


def put(task, offset: int, schema: Schema, value: Any) -> None:
    task.put([SinkRecord(TOPIC, 0, None, None, schema,
                         Struct(schema, {"id": offset, "v": value}), kafka_offset=offset)])
    task.flush({})


def values(db) -> list:
    return [r[0] for r in db.query(f"SELECT {q(db, 'v')} FROM {q(db, TOPIC)} ORDER BY "
                                   f"{q(db, 'id')}")]


def column_type(db) -> str:
    if db.url.startswith("jdbc:sqlite"):
        return ""
    rows = db.query("SELECT data_type FROM information_schema.columns WHERE table_name = "
                    f"'{TOPIC}' AND column_name = 'v'")
    return str(rows[0][0]).lower()


def decimal_field(precision: int, scale: int) -> Schema:
    """A decimal field as FileSource's inference gives one: its precision a parameter."""
    return Schema(Type.BYTES, True, name=DECIMAL, version=1,
                  parameters={"scale": str(scale), PRECISION_PARAM: str(precision)})


INT32, INT64 = OPTIONAL_INT32_SCHEMA, OPTIONAL_INT64_SCHEMA
FLOAT64, STRING = OPTIONAL_FLOAT64_SCHEMA, OPTIONAL_STRING_SCHEMA


def test_an_integer_column_widens_as_the_stream_does(engine, jdbc_db):
    """int -> bigint everywhere; then a double: PostgreSQL's bigint becomes a numeric
    (a double would lose a bigint beyond 2**53), MariaDB refuses naming the column, and
    SQLite's columns take any value. Rows written before keep their values."""
    task, _ = start_task(engine, jdbc_db, **{"auto.evolve": "true"})
    task.open([TP])
    put(task, 1, versioned(INT32, 1), 4)
    put(task, 2, versioned(INT64, 2), 3_000_000_000)
    assert column_type(jdbc_db) in ("bigint", "")
    dialect = jdbc_db.url.split(":")[1]
    if dialect == "mariadb":
        with pytest.raises(JdbcSinkError, match=r"Table orders column v is bigint, which does "
                                                r"not hold the field's float64 values, and "
                                                r"mariadb cannot widen it without loss"):
            put(task, 3, versioned(FLOAT64, 3), 4.5)
        task.stop()
        return
    put(task, 3, versioned(FLOAT64, 3), 4.5)
    assert column_type(jdbc_db) in ("numeric", "")
    assert [decimal.Decimal(str(v)) for v in values(jdbc_db)] == \
        [4, 3_000_000_000, decimal.Decimal("4.5")]
    put(task, 4, versioned(STRING, 4), "four")  # schema.conflict=string at the source
    assert values(jdbc_db)[-1] == "four" and values(jdbc_db)[0] in ("4", 4)
    task.stop()


def test_a_decimal_column_grows_its_digits(engine, postgres_db):
    task, _ = start_task(engine, postgres_db, **{"auto.evolve": "true"})
    task.open([TP])
    postgres_db.query(f"CREATE TABLE {TOPIC} (id BIGINT, v NUMERIC(5,2))")
    wide = SchemaBuilder.struct().field("id", INT64_SCHEMA).field("v", decimal_field(12, 4)).build()
    task.put([SinkRecord(TOPIC, 0, None, None, wide,
                         Struct(wide, {"id": 1, "v": decimal.Decimal("12345678.1234")}),
                         kafka_offset=1)])
    task.flush({})
    assert values(postgres_db) == [decimal.Decimal("12345678.1234")]
    assert postgres_db.query("SELECT numeric_precision, numeric_scale FROM "
                             "information_schema.columns WHERE column_name = 'v'") == [(12, 4)]
    task.stop()


def test_without_auto_evolve_a_column_too_narrow_fails_naming_table_and_column(
        engine, postgres_db):
    task, _ = start_task(engine, postgres_db)
    task.open([TP])
    put(task, 1, versioned(INT32, 1), 4)
    with pytest.raises(JdbcSinkError, match=r"Table orders column v is integer, which does "
                                            r"not hold the field's int64 values, and "
                                            r"auto\.evolve is false \(it would widen the "
                                            r"column to BIGINT\)"):
        put(task, 2, versioned(INT64, 2), 3_000_000_000)
    task.stop()
    assert values(postgres_db) == [4]


@pytest.mark.parametrize(("dialect", "have", "field", "wider"), [
    ("postgresql", ("integer", None, None), INT64, "BIGINT"),
    ("postgresql", ("bigint", None, None), INT64, None),
    ("postgresql", ("integer", None, None), FLOAT64, "DOUBLE PRECISION"),
    ("postgresql", ("bigint", None, None), FLOAT64, "NUMERIC"),
    ("mariadb", ("bigint", None, None), FLOAT64, ""),
    ("mariadb", ("int", None, None), INT64, "BIGINT"),
    ("postgresql", ("numeric", 5, 2), decimal_schema(4, True), "NUMERIC"),
    ("mariadb", ("decimal", 5, 2), decimal_field(10, 4), "DECIMAL(10,4)"),
    ("mariadb", ("decimal", 12, 4), decimal_field(10, 2), None),
    ("postgresql", ("numeric", None, None), decimal_schema(9, True), None),
    ("postgresql", ("double precision", None, None), FLOAT64, None),
    ("postgresql", ("bigint", None, None), STRING, "TEXT"),
    ("mariadb", ("double", None, None), STRING, "LONGTEXT"),
    ("postgresql", ("text", None, None), INT64, None),
])
def test_which_columns_widen_and_to_what(dialect, have, field, wider):
    assert wider_type(dialect, DbColumn("v", *have, True), field) == wider
