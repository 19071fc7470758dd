"""FileSink writes decimals exactly (issue 23, finding 1): every precision and scale Spark
holds (38 digits) goes into parquet, json and csv with every digit; wider ones (PostgreSQL's
numeric(p > 38)) as their exact text; and a value wider than its declared type is that
record's error for the DLQ instead of the failure of its file ("Decimal type with precision
29 does not fit into precision inferred from first array element: 38")."""

from __future__ import annotations

import csv
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from file_support import SinkContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kctl.api import SchemaBuilder, SinkRecord, Struct, TopicPartition
from kctl.api.arrow import PRECISION_PARAM
from kctl.api.data import INT64_SCHEMA, Schema, decimal_schema
from kctl.connectors.file import FileSinkTask
from kctl.connectors.file.sink import committed_files

pytestmark = pytest.mark.spark

PROPS = settings(max_examples=10, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow, HealthCheck.data_too_large])


class Reporter:
    def __init__(self) -> None:
        self.reported: list[tuple[SinkRecord, BaseException]] = []

    def report(self, record: SinkRecord, error: BaseException) -> None:
        self.reported.append((record, error))


class Context(SinkContext):
    def __init__(self, engine: Any, configs: dict[str, str], reporter: Reporter) -> None:
        super().__init__(engine, configs)
        self.reporter = reporter

    def errant_record_reporter(self) -> Reporter:
        return self.reporter


def decimal_type(precision: int, scale: int) -> Schema:
    base = decimal_schema(scale, True)
    return Schema(base.type, optional=True, name=base.name, version=base.version,
                  parameters={"scale": str(scale), PRECISION_PARAM: str(precision)})


def value_of(unscaled: int, scale: int) -> decimal.Decimal:
    return decimal.Decimal((1 if unscaled < 0 else 0, tuple(map(int, str(abs(unscaled)))),
                            -scale))


def write(engine: Any, root: Path, fmt: str, schema: Schema, values: list[Any],
          reporter: Reporter) -> list[Any]:
    """The values written as one file, read back as Decimals (None: the row's n was null)."""
    tp = TopicPartition("nums", 0)
    props = {"topics": "nums", "path": str(root), "format": fmt}
    task = FileSinkTask()
    task.initialize(Context(engine, props, reporter))
    task.start(props)
    task.open([tp])
    task.put([SinkRecord("nums", 0, None, None, schema, Struct(schema, {"id": i, "n": v}),
                         kafka_offset=i) for i, v in enumerate(values)])
    task.flush({})
    task.stop()
    out: list[Any] = []
    for _, _, path in committed_files(str(root), tp):
        if fmt == "parquet":
            out += pq.read_table(path).column("n").to_pylist()
        elif fmt == "json":
            out += [json.loads(line, parse_float=decimal.Decimal).get("n")
                    for line in Path(path).read_text().splitlines()]
        else:
            with open(path) as fh:
                out += [r["n"] or None for r in csv.DictReader(fh)]
    return [None if v is None else decimal.Decimal(str(v)) for v in out]


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_decimals_of_every_precision_are_written_with_every_digit(engine, tmp_path_factory, fmt):
    @PROPS
    @given(st.integers(1, 60).flatmap(lambda p: st.tuples(
        st.just(p), st.integers(0, p),
        st.lists(st.integers(-(10 ** p) + 1, 10 ** p - 1) | st.sampled_from(
            [10 ** p - 1, -(10 ** p) + 1]), min_size=1, max_size=6))))
    def check(case: tuple[int, int, list[int]]) -> None:
        precision, scale, unscaled = case
        schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
                  .field("n", decimal_type(precision, scale)).build())
        values = [value_of(u, scale) for u in unscaled]
        reporter = Reporter()
        got = write(engine, tmp_path_factory.mktemp(fmt), fmt, schema, values, reporter)
        assert got == values
        assert reporter.reported == []

    check()


def test_finding_1_a_decimal_wider_than_its_type_is_the_records_error(engine, tmp_path):
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("n", decimal_type(38, 10)).build())
    values = [decimal.Decimal("1234567890123456789012345678.0123456789"),
              decimal.Decimal("-99999999999999999999999999999.9999999999"),  # 39 digits
              decimal.Decimal("-9999999999999999999999999999.9999999999")]
    reporter = Reporter()
    got = write(engine, tmp_path, "parquet", schema, values, reporter)
    assert got == [values[0], values[2]]
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    assert "does not fit decimal128(38, 10)" in str(reporter.reported[0][1])
