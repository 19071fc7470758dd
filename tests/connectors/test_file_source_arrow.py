"""FileSource reads json batches with Arrow's reader when Spark's schema allows it, and
gives Spark every batch Arrow cannot vouch for: whichever reads a batch, the records, the
malformed lines reported and the offsets are the same, to the sign of a zero."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from file_support import OffsetStore, Reporter, ReportingContext, expand
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kctl.api import DataError, Struct
from kctl.connectors.file import FileSourceTask
from kctl.connectors.file.parsing import _read_alike

pytestmark = pytest.mark.spark


class SparkOnly(FileSourceTask):
    """Every batch through Spark's json reader, as before Arrow's took the common case."""

    def _read_by_arrow(self, spark, texts, lines, ddl):
        return None


class Counting(FileSourceTask):
    """Counts the batches Arrow's reader took."""

    def __init__(self) -> None:
        super().__init__()
        self.by_arrow = 0

    def _read_by_arrow(self, spark, texts, lines, ddl):
        read = super()._read_by_arrow(spark, texts, lines, ddl)
        self.by_arrow += read is not None
        return read


def run(engine, task: FileSourceTask, path: Path, **props: str) -> list[tuple]:
    """Everything the task produced, in order: ("ok", value repr, offset) for a record,
    ("bad", line, offset) for a line the errant record reporter got."""
    props = {"topic": "lines", "poll.interval.ms": "20", "path": str(path), "format": "json",
             **props}
    reporter = Reporter()
    task.initialize(ReportingContext(engine, OffsetStore(), props, reporter))
    task.start(props)
    out: list[tuple] = []
    try:
        while True:
            before = len(reporter.reports)
            records = expand(task.poll())
            out += [("bad", r.value, r.source_offset) for r, _ in reporter.reports[before:]]
            out += [("ok", repr(r.value.to_dict() if isinstance(r.value, Struct) else r.value),
                     r.source_offset) for r in records]
            if not records and len(reporter.reports) == before:
                return out
    except DataError as e:  # e.g. no schema can be inferred from the first lines
        return [*out, ("failed", str(e).replace(str(path), "PATH"))]
    finally:
        task.stop()


def both(engine, lines: list[str], **props: str) -> tuple[list[tuple], Counting]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "in.json"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        counting = Counting()
        fast = run(engine, counting, path, **props)
        slow = run(engine, SparkOnly(), path, **props)
    assert fast == slow
    return fast, counting


def test_plain_lines_are_read_by_arrow_and_equal_sparks(engine):
    lines = [json.dumps({"id": i, "name": f"n{i}", "score": i / 3, "ok": i % 2 == 0,
                         "tags": ["a", str(i)], "at": {"x": i, "y": -i / 7}})
             for i in range(500)]
    out, task = both(engine, lines, **{"batch.max.rows": "100"})
    assert task.by_arrow == 5  # the first batch too: its lines only inferred the schema
    assert len(out) == 500 and all(kind == "ok" for kind, _, _ in out)


def test_a_batch_arrow_cannot_vouch_for_goes_to_spark_with_the_same_result(engine):
    """A type conflict, a malformed line, two objects on a line, a new field, the integer
    -0 in a double column: each batch holding one is Spark's, and the rest stay Arrow's."""
    good = [json.dumps({"id": i, "x": i + 0.5}) for i in range(12)]
    odd = ['{"id": "seven", "x": 1.5}', '{"id": 3', '{"id": 1}{"id": 2}', '{"id": 4, "new": 1}',
           '{"id": 5, "x": -0}', '{"id": 6, "x": -0.0}']
    lines = [line for pair in zip(good[:6], odd, strict=True) for line in pair] + good[6:]
    out, task = both(engine, lines, **{"batch.max.rows": "2"})
    # Arrow's: the new field's batch, once Arrow's inference widened the schema with it,
    # the -0.0 pair (a double's own -0.0) and the last six lines, two a batch
    assert task.by_arrow == 5
    assert [kind for kind, _, _ in out].count("bad") == 2  # the string id, the cut line


def test_a_given_schema_ignores_unknown_fields_either_way(engine):
    lines = [json.dumps({"id": i, "extra": {"deep": i}}) for i in range(10)]
    out, task = both(engine, lines, schema="id BIGINT, missing STRING")
    assert task.by_arrow == 1
    assert out[0][1] == repr({"id": 0, "missing": None})


def test_types_arrow_does_not_read_alike_stay_with_spark(engine):
    lines = [json.dumps({"id": i, "at": "2026-11-27T10:00:00Z"}) for i in range(10)]
    out, task = both(engine, lines, schema="id INT, at TIMESTAMP")
    assert task.by_arrow == 0 and len(out) == 10
    assert not _read_alike(pa.timestamp("us")) and not _read_alike(pa.int32())
    assert _read_alike(pa.struct([("a", pa.list_(pa.float64()))]))


# --- properties -----------------------------------------------------------------------------

_finite = st.floats(allow_nan=False, allow_infinity=False)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                    st.integers(-2**70, 2**70), _finite, st.text(max_size=8))
_value = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)),
    max_leaves=6)
_number_text = st.sampled_from(["-0", "-0.0", "0e0", "1E400", "-1e-400", "1.5e3", "12345678901234567890",
                                "0.1", "5", "-7"])


@st.composite
def json_lines(draw) -> list[str]:
    """Lines of a few fields, mostly of one json kind each (so Spark infers a schema Arrow
    can read) with now and then a value of another kind, a number written oddly, or
    something that is not a json object at all."""
    kind = st.sampled_from(["int", "float", "str", "bool", "list", "obj"])
    kinds = {"id": draw(kind), **draw(st.dictionaries(st.sampled_from(["name", "v", "s", "l"]),
                                                      kind, max_size=3))}
    typical = {"int": st.integers(-2**63, 2**63 - 1), "float": _finite, "str": st.text(max_size=10),
               "bool": st.booleans(), "list": st.lists(st.integers(-9, 9), max_size=3),
               "obj": st.fixed_dictionaries({"a": st.integers(-9, 9), "b": st.text(max_size=3)})}
    lines = []
    for _ in range(draw(st.integers(1, 30))):
        shape = draw(st.sampled_from(["typical"] * 8 + ["odd", "number", "raw"]))
        row = {k: draw(typical[kind]) for k, kind in kinds.items() if draw(st.booleans()) or k == "id"}
        if shape == "odd":
            row[draw(st.sampled_from(sorted(kinds)))] = draw(_value)
        line = json.dumps(row, ensure_ascii=draw(st.booleans()))
        if shape == "number":
            line = line[:-1] + (", " if row else "") + f'"num": {draw(_number_text)}}}'
        elif shape == "raw":
            line = draw(st.sampled_from(["{", "[1]", '{"id": 1}{"id": 2}', "nope", '{"id": NaN}']))
        lines.append(line)
    return lines


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=json_lines(), rows=st.sampled_from(["3", "100"]))
def test_any_lines_give_what_spark_alone_gives(engine, lines, rows):
    both(engine, lines, **{"batch.max.rows": rows})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=json_lines())
def test_any_lines_with_a_given_schema_give_what_spark_alone_gives(engine, lines):
    both(engine, lines, schema="id BIGINT, name STRING, v DOUBLE, s ARRAY<BIGINT>, "
                               "l STRUCT<a: BIGINT, b: STRING>, num DOUBLE")
