"""FileSource stories: lines and Parquet files become records, and a restart resumes at
exactly the next line, because offsets say where each file continues."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from file_support import (
    ConnectorContext,
    OffsetStore,
    Reporter,
    ReportingContext,
    SourceContext,
    expand,
)
from support.clock import FakeClock

from kctl.api import DataError, SourceRecord, Struct, Type, partition_key
from kctl.connectors.file import FileSourceConnector, FileSourceTask
from kctl.connectors.file.source import CONFIG_DEF
from kctl.connectors.file.tracking import file_id
from kctl.errors import ValidationError
from kctl.testing import ConnectorHarness, assert_delivered

pytestmark = pytest.mark.spark

TEXT = {"topic": "lines", "poll.interval.ms": "20", "value.converter": "StringConverter"}
JSON_VALUES = {"topic": "lines", "poll.interval.ms": "20", "value.converter": "JsonConverter",
               "value.converter.schemas.enable": "false"}


def start_task(engine, store: OffsetStore, **props: str) -> FileSourceTask:
    props = {"topic": "lines", "poll.interval.ms": "20", **props}
    task = FileSourceTask()
    task.initialize(SourceContext(engine, store, props))
    task.start(props)
    return task


def poll(task: FileSourceTask) -> list[SourceRecord]:
    """One poll, with columnar batches taken apart into the records they stand for."""
    return expand(task.poll())


def drain(task: FileSourceTask, store: OffsetStore | None = None) -> list[SourceRecord]:
    """Poll until a poll comes back empty; ack everything like the runtime would."""
    out: list[SourceRecord] = []
    while True:
        batch = poll(task)
        if not batch:
            return out
        if store is not None:
            store.ack(batch)
        out.extend(batch)


def values(records: list[SourceRecord]) -> list:
    return [r.value.to_dict() if isinstance(r.value, Struct) else r.value for r in records]


def write(path: Path, text: str, mode: str = "w") -> Path:
    with open(path, mode, encoding="utf-8") as fh:
        fh.write(text)
    return path


# --- text ---------------------------------------------------------------------------------


def test_text_lines_become_string_records_with_line_exact_offsets(engine, tmp_path):
    f = write(tmp_path / "a.txt", "alpha\nbeta\r\n\ngamma\n")
    store = OffsetStore()
    task = start_task(engine, store, path=str(tmp_path), format="text")
    recs = drain(task, store)
    assert values(recs) == ["alpha", "beta", "", "gamma"]
    assert all(r.value_schema.type is Type.STRING and r.topic == "lines" for r in recs)
    assert recs[0].source_partition == {"file": file_id(os.stat(f))}
    assert recs[0].source_offset["path"] == str(f)
    assert [r.source_offset["line"] for r in recs] == [1, 2, 3, 4]
    assert recs[-1].source_offset["position"] == os.path.getsize(f)
    assert store.batched_reads == 1  # offsets of all files were read in one call


def test_restart_resumes_exactly_after_the_last_committed_line(engine, tmp_path):
    lines = [f"line {i}" for i in range(50)]
    write(tmp_path / "a.txt", "".join(x + "\n" for x in lines))
    config = {"path": str(tmp_path / "*.txt"), "format": "text", "batch.max.rows": "7", **TEXT}
    with ConnectorHarness(FileSourceConnector, config, spark=engine,
                          worker={"exactly.once.source.support": "disabled"}) as h:
        h.start()
        h.poll()
        h.commit()  # the first seven lines' offsets
        h.poll()  # seven more written, not committed: the crash comes before the commit
        h.restart_tasks(crash=True)
        h.run_until(lambda: h.poll() == 0 and len(h.written("lines")) >= 57)
        d = assert_delivered(lines, [r.value for r in h.written("lines")],
                             duplicates_allowed=True)
        assert d.duplicated == dict.fromkeys(lines[7:14], 1)  # exactly the uncommitted ones


def test_only_complete_lines_are_read_and_appends_are_picked_up(engine, tmp_path):
    f = write(tmp_path / "grow.txt", "one\ntw")
    store = OffsetStore()
    task = start_task(engine, store, path=str(f), format="text")
    assert values(drain(task, store)) == ["one"]
    write(f, "o\nthree\nfo", "a")
    assert values(drain(task, store)) == ["two", "three"]
    write(f, "ur\n", "a")
    assert values(drain(task, store)) == ["four"]


@pytest.mark.parametrize("change", ["a file renamed in", "lines appended"])
def test_an_idle_task_sees_a_change_long_before_its_next_listing(engine, tmp_path, change):
    """poll.interval.ms is how often `path` is listed; in between, an idle poll watches the
    directory and its open files and returns as soon as one changes."""
    (tmp_path / "in").mkdir()
    f = write(tmp_path / "in" / "1.txt", "a\n")
    store = OffsetStore()
    task = start_task(engine, store, path=str(tmp_path / "in"), format="text",
                      **{"poll.interval.ms": "600000"})
    assert values(poll(task)) == ["a"]
    # a directory's mtime moves in the kernel's coarse ticks (4-10 ms): set it back, so the
    # rename below changes it however fast this runs (a change in the same tick as the
    # last is seen at the next listing)
    os.utime(tmp_path / "in", ns=(0, 0))
    idle: list = []
    looking = threading.Event()  # the idle poll took its first look: change things now
    look = task._changes
    task._changes = lambda: (look(), looking.set())[0]  # type: ignore[method-assign]
    waiting = threading.Thread(target=lambda: idle.append(task.poll()))
    waiting.start()
    assert looking.wait(30)
    if change == "lines appended":
        write(f, "b\n", "a")
    else:
        os.rename(write(tmp_path / "2.txt", "b\n"), tmp_path / "in" / "2.txt")
    waiting.join(30)
    assert not waiting.is_alive() and idle == [[]]
    assert values(poll(task)) == ["b"]
    task.stop()


def test_new_files_are_discovered(engine, tmp_path):
    write(tmp_path / "1.txt", "a\n")
    write(tmp_path / ".hidden", "never\n")
    task = start_task(engine, OffsetStore(), path=str(tmp_path), format="text")
    assert values(drain(task)) == ["a"]
    write(tmp_path / "2.txt", "b\nc\n")
    assert values(drain(task)) == ["b", "c"]


def test_batch_max_rows_bounds_every_poll(engine, tmp_path):
    for n in range(3):
        write(tmp_path / f"{n}.txt", "".join(f"{n}-{i}\n" for i in range(10)))
    task = start_task(engine, OffsetStore(), path=str(tmp_path), format="text",
                      **{"batch.max.rows": "4"})
    seen = []
    while batch := poll(task):
        assert len(batch) <= 4
        seen.extend(values(batch))
    assert sorted(seen) == sorted(f"{n}-{i}" for n in range(3) for i in range(10))
    for n in range(3):  # each file's lines stay in order
        mine = [v for v in seen if v.startswith(f"{n}-")]
        assert mine == [f"{n}-{i}" for i in range(10)]


def test_batch_max_bytes_bounds_every_poll_and_a_longer_line_still_passes(engine, tmp_path):
    lines = [f"{i:02d}-" + "x" * (i % 7 * 10) for i in range(40)]
    lines.insert(17, "L" * 500)  # longer than the whole budget: a poll of its own
    write(tmp_path / "a.txt", "".join(line + "\n" for line in lines))
    store = OffsetStore()
    task = start_task(engine, store, path=str(tmp_path), format="text",
                      **{"batch.max.bytes": "100"})
    seen: list[str] = []
    while batch := poll(task):
        got = values(batch)
        assert len(got) == 1 or sum(len(v) + 1 for v in got) <= 100, got
        seen.extend(got)
        store.ack(batch)
    assert seen == lines
    # the stored position is exact: a restarted task reads only what is appended
    write(tmp_path / "a.txt", "new\n", "a")
    again = start_task(engine, store, path=str(tmp_path), format="text",
                       **{"batch.max.bytes": "100"})
    assert values(drain(again, store)) == ["new"]


# --- json ---------------------------------------------------------------------------------


def test_json_lines_are_parsed_by_spark_into_structs(engine, tmp_path):
    rows = [{"id": i, "name": f"n{i}", "tags": ["x", "y"][: i % 3], "nested": {"ok": i % 2 == 0}}
            for i in range(30)]
    write(tmp_path / "a.json", "".join(json.dumps(r) + "\n" for r in rows))
    store = OffsetStore()
    task = start_task(engine, store, path=str(tmp_path), format="json")
    recs = drain(task, store)
    assert values(recs) == rows
    schema = recs[0].value_schema
    assert schema.type is Type.STRUCT
    assert schema.field("id").schema.type is Type.INT64
    assert schema.field("tags").schema.type is Type.ARRAY
    assert schema.field("nested").schema.field("ok").schema.type is Type.BOOLEAN


def test_json_with_a_given_schema(engine, tmp_path):
    write(tmp_path / "a.json", '{"id": 1, "name": "a", "extra": 9}\n{"id": 2}\n')
    task = start_task(engine, OffsetStore(), path=str(tmp_path), format="json",
                      schema="id INT, name STRING")
    recs = drain(task)
    assert values(recs) == [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
    assert recs[0].value_schema.field("id").schema.type is Type.INT32


def test_json_fields_that_appear_later_widen_the_inferred_schema(engine, tmp_path):
    """Inference samples the first lines; a field first seen later (even in a later batch,
    beyond the sample) is added to the schema instead of being dropped."""
    rows = [{"id": i} for i in range(1500)] + [{"id": 1500, "late": "here", "n": {"x": 1}}]
    write(tmp_path / "a.json", "".join(json.dumps(r) + "\n" for r in rows))
    store = OffsetStore()
    task = start_task(engine, store, path=str(tmp_path), format="json",
                      **{"batch.max.rows": "1200"})
    recs = drain(task, store)
    assert len(recs) == 1501
    assert values(recs)[-1] == {"id": 1500, "late": "here", "n": {"x": 1}}
    assert values(recs)[0] == {"id": 0}
    assert recs[0].value_schema.field("late") is None  # the first batch had no such field
    schema = recs[-1].value_schema
    assert schema.field("late").schema.optional and schema.field("n").schema.type is Type.STRUCT
    # a widened field whose later value does not fit its type is malformed, not cast away
    write(tmp_path / "a.json", json.dumps({"id": 1501, "n": "not-a-struct"}) + "\n", "a")
    with pytest.raises(DataError, match="line 1502"):
        drain(task, store)


def test_a_malformed_json_line_fails_the_task_naming_file_and_line(engine, tmp_path):
    f = write(tmp_path / "bad.json", '{"id": 1}\n{"id": 2}\n{"id": oops\n{"id": 4}\n')
    config = {"path": str(tmp_path), "format": "json", "schema": "id INT", **JSON_VALUES}
    with ConnectorHarness(FileSourceConnector, config, spark=engine) as h:
        h.start()
        h.run_until(lambda: h.task_state().value == "FAILED")
        assert str(f) in h.task_trace() and "line 3" in h.task_trace()
        # what precedes the bad line still flows, and its offsets were committed: a restart
        # meets the bad line again, and nothing after it was skipped
        assert [r.value for r in h.written("lines")] == [{"id": 1}, {"id": 2}]
        assert h.source_offsets()[partition_key({"file": file_id(os.stat(f))})]["line"] == 2


def test_with_errors_tolerated_bad_lines_go_to_the_dlq_in_file_order(engine, tmp_path):
    f = write(tmp_path / "bad.json",
              '{"id": 1}\n{"id": oops\n{"id": 3}\nnope\n{"id": 5}\n')
    config = {"path": str(f), "format": "json", "schema": "id INT", **JSON_VALUES,
              "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "lines-dlq",
              "errors.deadletterqueue.context.headers.enable": "true"}
    with ConnectorHarness(FileSourceConnector, config, spark=engine) as h:
        h.start()
        h.run_until(lambda: len(h.written("lines")) == 3 and len(h.raw("lines-dlq")) == 2)
        assert [r.value for r in h.written("lines")] == [{"id": 1}, {"id": 3}, {"id": 5}]
        dead = h.dead_letters()
        assert [d["value"] for d in dead] == ['{"id": oops', "nope"]
        assert all(d["stage"] == "TASK_POLL" for d in dead)
        assert f"line 2 in {f}" in dead[0]["message"]
        h.commit()  # the offset passed the bad lines once they were dead-lettered
        assert h.source_offsets()[partition_key({"file": file_id(os.stat(f))})]["line"] == 5


def test_json_read_straight_from_the_file_equals_parsing_each_line(engine, tmp_path,
                                                                   monkeypatch):
    """Lines that all look like objects are parsed by Spark's json reader from the spooled
    file; the result, the malformed lines and their order equal the line-by-line path."""
    lines = ['{"id": 1}', '{"id": 2,\r"x": 3}', '{bad', '{"id": 3}{"id": 4}', '{"id": "str"}',
             '{}', '{"id": 5} ', '{"id": [1]}', '{"id": 8, "id": 9}', '{"id": 1e2, "x": 2}',
             '{"x": 7}']
    f = write(tmp_path / "edge.json", "".join(x + "\n" for x in lines))
    props = {"topic": "lines", "poll.interval.ms": "20", "path": str(f), "format": "json",
             "schema": "id BIGINT, x BIGINT"}
    plans: list[bool] = []  # per Spark job: read straight from the file?
    run = FileSourceTask._run
    monkeypatch.setattr(FileSourceTask, "_run",
                        lambda self, df, ddl: plans.append("_i" not in df.columns) or
                        run(self, df, ddl))

    def seen(task_class: type[FileSourceTask]) -> list:
        reporter = Reporter()
        task = task_class()
        task.initialize(ReportingContext(engine, OffsetStore(), props, reporter))
        task.start(props)
        out: list = []
        while True:
            before = len(reporter.reports)
            batch = poll(task)
            out += [("bad", r.value, r.source_offset) for r, _ in reporter.reports[before:]]
            out += [("ok", v, r.source_offset) for r, v in zip(batch, values(batch), strict=True)]
            if not batch and len(reporter.reports) == before:
                return out

    class LineByLine(FileSourceTask):
        def _spool(self, spark, lines):  # as on a remote master: no file for Spark to read
            return None

    fast = seen(FileSourceTask)
    assert plans == [True]
    slow = seen(LineByLine)
    assert plans == [True, False]
    assert fast == slow
    assert [kind for kind, _, _ in fast] == ["ok", "ok", "bad", "ok", "bad", "ok", "ok", "bad",
                                            "ok", "bad", "ok"]
    assert fast[1][1] == {"id": 2, "x": 3} and fast[8][1] == {"id": 9, "x": None}


# --- csv ----------------------------------------------------------------------------------


def test_csv_with_header_and_inferred_schema(engine, tmp_path):
    write(tmp_path / "a.csv", "id;name;score\n1;ann;1.5\n2;bob;2.5\n")
    store = OffsetStore()
    task = start_task(engine, store, path=str(tmp_path), format="csv",
                      **{"csv.delimiter": ";"})
    recs = drain(task, store)
    assert values(recs) == [{"id": 1, "name": "ann", "score": 1.5},
                            {"id": 2, "name": "bob", "score": 2.5}]
    assert [r.source_offset["line"] for r in recs] == [2, 3]  # the header is line 1
    # a restart (schema inferred again, header read from the file) picks up new rows
    write(tmp_path / "a.csv", "3;cy;3.5\n", "a")
    again = start_task(engine, store, path=str(tmp_path), format="csv",
                       **{"csv.delimiter": ";"})
    assert values(drain(again, store)) == [{"id": 3, "name": "cy", "score": 3.5}]


def test_csv_columns_are_matched_by_header_name(engine, tmp_path):
    """Issue 16, reproduction 4: headers `id,name`, `id,name,extra` and `name,id` once
    failed the task; now columns go by name, new ones widen the schema, missing ones are
    null."""
    write(tmp_path / "a.csv", "id,name\n1,ann\n")
    store = OffsetStore()
    task = start_task(engine, store, path=str(tmp_path), format="csv")
    assert values(drain(task, store)) == [{"id": 1, "name": "ann"}]
    write(tmp_path / "b.csv", "id,name,extra\n2,bob,9.5\n")
    write(tmp_path / "c.csv", "name,id\ncy,3\n")
    task._next_scan = 0  # look for new files now
    got = sorted(values(drain(task, store)), key=lambda v: v["id"])
    assert got == [{"id": 2, "name": "bob", "extra": 9.5},
                   {"id": 3, "name": "cy", "extra": None}]
    # a given schema: a file with fewer columns gives nulls, not "malformed"
    given = start_task(engine, OffsetStore(), path=str(tmp_path / "c.csv"), format="csv",
                       schema="id INT, name STRING, score DOUBLE")
    assert values(drain(given)) == [{"id": 3, "name": "cy", "score": None}]


def test_a_csv_header_that_cannot_be_matched_is_that_files_error(engine, tmp_path):
    write(tmp_path / "a.csv", "id,name\n1,ann\n")
    bad = write(tmp_path / "b.csv", "id,id\n2,3\n")
    reporter = Reporter()
    props = {"topic": "lines", "poll.interval.ms": "20", "path": str(tmp_path),
             "format": "csv", "errors.tolerance": "all"}
    task = FileSourceTask()
    task.initialize(ReportingContext(engine, OffsetStore(), props, reporter))
    task.start(props)
    seen: list = []
    deadline = time.monotonic() + 20
    while not (reporter.reports and seen):  # the good file flows, the bad one is reported
        assert time.monotonic() < deadline
        seen.extend(values(poll(task)))
    assert seen == [{"id": 1, "name": "ann"}]
    [(record, error)] = reporter.reports
    assert record.source_offset["path"] == str(bad)
    assert f"the csv header 'id,id' of {bad} names columns ['id'] more than once" in str(error)
    assert task.stats.unreadable == 1


def test_a_malformed_csv_line_fails_with_file_and_line(engine, tmp_path):
    f = write(tmp_path / "a.csv", "id,name\n1,a\nnot-a-number,b\n")
    task = start_task(engine, OffsetStore(), path=str(f), format="csv",
                      schema="id INT, name STRING")
    assert values(poll(task)) == [{"id": 1, "name": "a"}]
    with pytest.raises(DataError, match=rf"line 3 in {f}"):
        poll(task)


# --- parquet ------------------------------------------------------------------------------


def test_parquet_files_are_read_whole_and_resume_by_row(engine, tmp_path):
    table = pa.table({"id": pa.array(range(10), pa.int32()),
                      "ts": pa.array([1_700_000_000_000_000 + i for i in range(10)],
                                     pa.timestamp("us", tz="UTC"))})
    pq.write_table(table, tmp_path / "a.parquet")
    store = OffsetStore()
    task = start_task(engine, store, path=str(tmp_path), format="parquet",
                      **{"batch.max.rows": "4"})
    first = poll(task)
    assert [v["id"] for v in values(first)] == [0, 1, 2, 3]
    store.ack(first)
    task.stop()
    again = start_task(engine, store, path=str(tmp_path), format="parquet")
    rest = drain(again, store)
    assert [v["id"] for v in values(rest)] == list(range(4, 10))
    assert rest[-1].source_offset == {"row": 10, "complete": True}
    assert rest[0].value_schema.field("ts").schema.name == "org.apache.kafka.connect.data.Timestamp"
    done = start_task(engine, store, path=str(tmp_path), format="parquet")
    assert drain(done) == []  # a complete file is never read again


# --- splitting over tasks -----------------------------------------------------------------


def test_files_are_split_over_tasks_and_new_files_go_to_exactly_one(engine, tmp_path):
    for n in range(6):
        write(tmp_path / f"f{n}.txt", f"{n}\n")
    config = {"path": str(tmp_path), "format": "text", **TEXT, "topic": "t"}
    with ConnectorHarness(FileSourceConnector, config, spark=engine, tasks_max=3) as h:
        h.start()
        assert len(h.task_configs) == 3
        h.run_until(lambda: len(h.written("t")) == 6)
        write(tmp_path / "late.txt", "late\n")
        h.run_until(lambda: len(h.written("t")) == 7)
        h.poll(3)
        assert_delivered([*map(str, range(6)), "late"], [r.value for r in h.written("t")])


def test_fewer_files_than_tasks_asks_for_reconfiguration_when_files_appear(engine, tmp_path):
    write(tmp_path / "only.txt", "x\n")
    ctx = ConnectorContext(engine)
    conn = FileSourceConnector()
    conn.initialize(ctx)
    conn.start({"path": str(tmp_path), "format": "text", "topic": "t", "poll.interval.ms": "1"})
    assert len(conn.task_configs(4)) == 1
    write(tmp_path / "second.txt", "y\n")
    deadline = time.monotonic() + 10
    while ctx.reconfigurations == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    conn.stop()
    assert ctx.reconfigurations >= 1
    assert len(conn.task_configs(4)) == 2


def test_config_errors_name_the_field():
    results = {v.name: v.errors for v in CONFIG_DEF.validate(
        {"path": "/x", "topic": "t", "format": "xml", "csv.delimiter": ";;",
         "schema": "id"})}
    assert results["format"] and results["csv.delimiter"] and results["schema"]
    assert not results["path"] and not results["topic"]


def test_validate_rejects_bad_schemas_encodings_and_option_combinations():
    """Issue 16, reproduction 6: an unknown type must fail `validate` (and so `create`),
    not the task 15 s after it reported RUNNING."""
    conn = FileSourceConnector()

    def errors(**props: str) -> dict[str, list[str]]:
        return {v.name: v.errors for v in conn.validate({"path": "/x", "topic": "t", **props})
                if v.errors}

    assert "unknown type 'INTEGR' for field id" in \
        errors(format="json", schema="id INTEGR, page STRING")["schema"][0]
    for good in ("id INT, page STRING", "a ARRAY<STRING>, m MAP<STRING, STRUCT<x: INT>>",
                 "d DECIMAL(10, 2) NOT NULL COMMENT 'euros', `odd name` TIMESTAMP"):
        assert errors(format="json", schema=good) == {}, good
    assert "csv and json" in errors(format="text", schema="id INT")["schema"][0]
    assert "format csv" in errors(format="json", **{"csv.delimiter": ";"})["csv.delimiter"][0]
    assert "Unknown encoding" in errors(**{"file.encoding": "utf-9"})["file.encoding"][0]
    assert "byte \\n" in errors(**{"file.encoding": "utf-16"})["file.encoding"][0]
    assert errors(**{"file.encoding": "latin-1"}) == {}


def test_create_refuses_an_invalid_schema_before_any_task_runs():
    """What `kctl connector validate` and `create` go through (the REST validate)."""
    from kctl.runtime.plugins import Plugins
    from kctl.runtime.validation import raise_if_invalid, validate_config

    config = {"connector.class": "FileSource", "name": "pages", "path": "/data",
              "topic": "pages", "format": "csv", "schema": "id INTEGR, page STRING"}
    result = validate_config(Plugins(), config)
    assert result["error_count"] == 1
    with pytest.raises(ValidationError, match=r"schema: Not a Spark DDL schema \(unknown type "
                                           r"'INTEGR' for field id\)"):
        raise_if_invalid(result)
    assert validate_config(Plugins(), {**config, "schema": "id INTEGER, page STRING"})[
        "error_count"] == 0


def test_scan_uses_the_injected_clock(engine, tmp_path):
    """New files are looked for only when poll.interval.ms has passed on the task's clock."""
    write(tmp_path / "1.txt", "a\n")
    clock = FakeClock(1000.0)
    props = {"topic": "t", "poll.interval.ms": "60000", "path": str(tmp_path), "format": "text"}
    task = FileSourceTask(clock=clock)
    task.initialize(SourceContext(engine, OffsetStore(), props))
    task.start(props)
    assert values(poll(task)) == ["a"]
    write(tmp_path / "2.txt", "b\n")
    task.stop()  # makes empty polls return at once
    assert not poll(task)
    clock.advance(61)
    assert values(poll(task)) == ["b"]
    assert partition_key({"filename": str(tmp_path / "2.txt")})
