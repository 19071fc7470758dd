"""Schema evolution at FileSource: the widening lattice (properties, no Spark) and the
stories of a json or csv stream whose shape changes as it arrives."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from file_support import OffsetStore, Reporter, ReportingContext, SourceContext, expand
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from kctl.api import DataError, SourceRecord, Struct, Type
from kctl.api.paths import ALLOWED_PATHS_PROP
from kctl.connectors.file import FileSourceConnector, FileSourceTask
from kctl.connectors.file.evolution import (
    STRING,
    Conflict,
    emitted,
    evolve,
    json_line_types,
    json_type,
    widen,
)

# --- the lattice ----------------------------------------------------------------------------

_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                    st.integers(-10**30, 10**30), st.floats(allow_nan=False), st.text(max_size=3))
_value = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)),
    max_leaves=6)
_object = st.dictionaries(st.sampled_from("uvw"), _value, max_size=3)


def _sorted(t):
    """The type with struct fields in name order: joins differ only in field order."""
    if isinstance(t, StructType):
        return StructType([StructField(f.name, _sorted(f.dataType), True)
                           for f in sorted(t.fields, key=lambda f: f.name)])
    if isinstance(t, ArrayType):
        return ArrayType(_sorted(t.elementType), True)
    return t


def _join(a, b, mode="error"):
    try:
        return widen(a, b, mode)
    except Conflict:
        return None


@settings(max_examples=300, deadline=None)
@given(_object, _object, _object)
def test_widening_is_a_join(x, y, z):
    """Idempotent, commutative and associative (up to field order), an upper bound of
    both sides, and a conflict either way round or neither."""
    a, b, c = json_type(x), json_type(y), json_type(z)
    assert widen(a, a) == a
    ab, ba = _join(a, b), _join(b, a)
    assert (ab is None) == (ba is None)
    if ab is None:
        return
    assert _sorted(ab) == _sorted(ba)
    assert widen(ab, a) == ab and widen(ab, b) == ab  # it holds both
    left, right = _join(ab, c), _join(a, _join(b, c) or StructType([]))
    if left is not None and _join(b, c) is not None:
        assert right is not None and _sorted(left) == _sorted(right)


@settings(max_examples=300, deadline=None)
@given(st.lists(_object, min_size=1, max_size=6), st.sampled_from(["error", STRING]))
def test_a_stream_evolves_monotonically_and_each_line_fits_its_version(objects, mode):
    """Every version holds the one before it; every line that does not conflict fits the
    version it starts or falls in; with string, objects never conflict."""
    lines = [json.dumps(o) for o in objects]
    evo = evolve(None, json_line_types(lines), mode)
    for (_, older), (_, newer) in zip(evo.versions, evo.versions[1:], strict=False):
        assert widen(newer, older, mode) == newer
    if mode == STRING:
        assert evo.conflicts == {}
    bounds = [i for i, _ in evo.versions[1:]] + [len(lines)]
    for (start, schema), stop in zip(evo.versions, bounds, strict=True):
        for i in range(start, stop):
            if i not in evo.conflicts:
                assert widen(schema, json_type(objects[i]), mode) == schema


def test_the_numeric_ladder():
    assert widen(IntegerType(), LongType()) == LongType()
    assert widen(LongType(), DoubleType()) == DoubleType()
    assert widen(DecimalType(10, 2), DecimalType(5, 4)) == DecimalType(12, 4)
    assert widen(LongType(), DecimalType(25, 0)) == DecimalType(25, 0)
    assert widen(LongType(), DecimalType(38, 20)) == DoubleType()  # beyond 38 digits
    assert json_type(10**25) == DecimalType(26, 0)
    with pytest.raises(Conflict, match=r"field 'a\.b' is string in this line but bigint"):
        widen(json_type({"a": {"b": 1}}), json_type({"a": {"b": "x"}}))
    with pytest.raises(Conflict, match=r"field 'l\[\]\.x' is struct<y:bigint>"):
        widen(json_type({"l": [{"x": 1}]}), json_type({"l": [{"x": {"y": 1}}]}))
    assert widen(LongType(), StructType([]), STRING) == StringType()


def test_fields_only_ever_null_are_left_out_until_they_carry_a_value():
    t = json_type({"a": 1, "gone": None, "empty": [], "n": {"z": None}})
    assert emitted(t).simpleString() == "struct<a:bigint,empty:array<string>,n:struct<>>"
    assert "gone" in emitted(widen(t, json_type({"gone": 2.5}))).fieldNames()


# --- stories --------------------------------------------------------------------------------

pytest_spark = pytest.mark.spark

EVOLVING = [
    {"id": 1, "v": 4},
    {"id": 2, "v": 5, "tags": [{"k": "a"}]},
    {"id": 3, "v": 4.5, "tags": [{"k": "b", "w": 2}]},  # a decimal: v widens to double
    {"id": 4, "v": 6, "who": {"name": "ann"}},  # a new nested field
    {"id": 5, "who": {"name": "bob", "age": 41}},  # v missing, who grows
    {"id": 6, "v": 7.25, "who": {"name": "cy", "age": 7}, "note": "last"},
]


def start_task(engine, path: Path, reporter: Reporter | None = None, **props: str
               ) -> FileSourceTask:
    props = {"topic": "t", "poll.interval.ms": "20", "path": str(path), "format": "json",
             **props}
    task = FileSourceTask()
    ctx = ReportingContext(engine, OffsetStore(), props, reporter) if reporter else \
        SourceContext(engine, OffsetStore(), props)
    task.initialize(ctx)
    task.start(props)
    return task


def drain(task: FileSourceTask) -> list[SourceRecord]:
    out: list[SourceRecord] = []
    while batch := expand(task.poll()):
        out.extend(batch)
    return out


def as_dicts(records):
    return [{k: v for k, v in r.value.to_dict().items() if v is not None}
            if isinstance(r.value, Struct) else r.value for r in records]


def _without_nulls(v):
    if isinstance(v, Struct):
        v = v.to_dict()
    if isinstance(v, dict):
        return {k: _without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_without_nulls(x) for x in v]
    return v


@pytest_spark
@pytest.mark.parametrize("rows_per_batch", ["1", "2", "100"])
def test_an_evolving_json_stream_arrives_whole_whatever_the_batches(engine, tmp_path,
                                                                    rows_per_batch):
    """Ints then decimals, a new field, a nested field growing, a missing field: every
    line becomes a record; records before a change keep their values and types (4 stays
    4), each change is a new schema version, and the task never stops."""
    f = tmp_path / "events.json"
    f.write_text("".join(json.dumps(r) + "\n" for r in EVOLVING[:2]))
    task = start_task(engine, f, **{"batch.max.rows": rows_per_batch})
    first = drain(task)
    with open(f, "a") as fh:  # later lines, later polls
        fh.write("".join(json.dumps(r) + "\n" for r in EVOLVING[2:]))
    records = first + drain(task)
    assert [_without_nulls(r.value.to_dict()) for r in records] == EVOLVING
    v = [(r.value.get("v"), r.value_schema.field("v").schema.type) for r in records]
    assert v[0] == (4, Type.INT64) and type(v[0][0]) is int
    assert v[2] == (4.5, Type.FLOAT64) and v[3] == (6.0, Type.FLOAT64)
    versions = [r.value_schema.version for r in records]
    assert versions == sorted(versions) and versions[-1] > versions[0] >= 1
    last = records[-1].value_schema
    assert last.field("who").schema.field("age").schema.type is Type.INT64
    assert last.field("tags").schema.value_schema.field("w").schema.optional
    assert all(f.schema.optional for f in last.fields)


@pytest_spark
def test_csv_columns_widen_as_values_arrive(engine, tmp_path):
    f = tmp_path / "m.csv"
    f.write_text("id,v\n1,4\n2,5\n")
    task = start_task(engine, f, format="csv")
    records = drain(task)
    with open(f, "a") as fh:
        fh.write("3,4.5\n4,3000000000\n")
    records += drain(task)
    assert [r.value.get("v") for r in records] == [4, 5, 4.5, 3e9]
    assert records[0].value_schema.field("v").schema.type is Type.INT32
    assert records[2].value_schema.field("v").schema.type is Type.FLOAT64
    assert records[2].value_schema.version == records[0].value_schema.version + 1


@pytest_spark
def test_a_conflict_names_the_field_and_both_types_and_is_never_malformed(engine, tmp_path):
    f = tmp_path / "c.json"
    f.write_text('{"id": 1, "n": {"x": 1}}\n{"id": 2, "n": 3}\n[1, 2]\n{"id": 4}\n')
    reporter = Reporter()
    task = start_task(engine, f, reporter, **{"errors.tolerance": "all"})
    records = drain(task)
    assert [r.value.get("id") for r in records] == [1, 4]
    [(_, first), (_, second)] = reporter.reports
    assert str(first).startswith(f"The json line 2 in {f} conflicts with the schema: field "
                                 "'n' is bigint in this line but struct<x:bigint> in the schema")
    assert "the line is array<bigint>, not an object" in str(second)
    with pytest.raises(DataError, match="field 'n' is bigint"):
        drain(start_task(engine, f))  # no reporter: errors.tolerance=none


@pytest_spark
def test_a_given_schema_stays_as_given_and_names_a_value_that_does_not_fit(engine, tmp_path):
    f = tmp_path / "g.json"
    f.write_text('{"id": 1, "v": 2}\n{"id": 2, "v": 2.5, "new": 1}\n')
    reporter = Reporter()
    task = start_task(engine, f, reporter, schema="id BIGINT, v BIGINT",
                      **{"errors.tolerance": "all"})
    assert as_dicts(drain(task)) == [{"id": 1, "v": 2}]
    [(_, error)] = reporter.reports
    assert "field 'v' is double in this line but bigint in the schema" in str(error)


def test_a_skipped_symlink_is_warned_once_per_file(tmp_path, caplog):
    """A file a symlink leads outside file.connector.allowed.paths is warned about when
    first listed, by the task and by the connector, not at every listing."""
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.log").write_text("x\n")
    os.symlink(outside / "secret.log", inside / "link.log")
    (inside / "ok.log").write_text("y\n")
    props = {"path": str(inside), "topic": "t", "format": "text", "poll.interval.ms": "1",
             ALLOWED_PATHS_PROP: str(inside)}
    connector = FileSourceConnector()
    connector.start(props)
    task = FileSourceTask()
    task.initialize(SourceContext(None, OffsetStore(), props))
    with caplog.at_level(logging.WARNING, "kctl.connectors.file"):
        task.start(props)
        lines = []
        for _ in range(3):
            assert connector._wanted(4) == 1  # ok.log only
            task._scan()
            lines += [r.value for r in expand(task.poll())]
        os.symlink(outside / "secret.log", inside / "link2.log")
        for _ in range(3):
            connector._wanted(4)
            task._scan()
    task.stop()
    assert lines == ["y"]
    warned = sorted(r.getMessage().split(":")[0] for r in caplog.records
                    if "Skipping" in r.getMessage())
    assert warned == sorted([f"Skipping {inside / 'link.log'}"] * 2 +
                            [f"Skipping {inside / 'link2.log'}"] * 2)  # the connector's, the task's


@pytest_spark
def test_a_field_only_ever_null_joins_the_schema_with_its_first_value(engine, tmp_path):
    """Spark would have inferred such a field as a string, and a later number would have
    conflicted with it; here it is left out until it carries a value."""
    f = tmp_path / "n.json"
    f.write_text('{"a": null}\n{"a": null, "b": {"c": null}}\n')
    task = start_task(engine, f)
    records = drain(task)
    with open(f, "a") as fh:
        fh.write('{"a": 3, "b": {"c": [1]}}\n')
    records += drain(task)
    assert [_without_nulls(r.value.to_dict()) for r in records] == \
        [{}, {"b": {}}, {"a": 3, "b": {"c": [1]}}]
    assert records[0].value_schema.field("a") is None  # only ever null so far
    assert records[2].value_schema.field("a").schema.type is Type.INT64
