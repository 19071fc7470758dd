"""FileSink stories: buffered records become files named after their offset range; in
exactly_once mode a crash at any point leaves each record in committed output once."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pyarrow.parquet as pq
import pytest
from file_support import SinkContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.clock import FakeClock

from kctl.api import DataError, OffsetAndMetadata, SchemaBuilder, SinkRecord, Struct, TopicPartition
from kctl.api.data import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, timestamp_schema
from kctl.connectors.file import FileSinkConnector, FileSinkTask
from kctl.connectors.file.sink import TMP_PREFIX, committed_files
from kctl.testing import ConnectorHarness

pytestmark = pytest.mark.spark

TP = TopicPartition("orders", 0)
SCHEMA = (SchemaBuilder.struct().name("Order").field("id", INT64_SCHEMA)
          .field("note", OPTIONAL_STRING_SCHEMA).build())


def order(i: int) -> Struct:
    return Struct(SCHEMA, {"id": i, "note": None if i % 3 == 0 else f"n{i}"})


_ORDER = object()


def rec(offset: int, value=_ORDER, tp: TopicPartition = TP) -> SinkRecord:
    value = order(offset) if value is _ORDER else value
    schema = value.schema if isinstance(value, Struct) else None
    return SinkRecord(tp.topic, tp.partition, None, None, schema, value, kafka_offset=offset)


def start_task(engine, root: Path, clock=None, **props: str):
    props = {"topics": "orders", "path": str(root), "format": "json", **props}
    task = FileSinkTask(clock=clock) if clock else FileSinkTask()
    ctx = SinkContext(engine, props)
    task.initialize(ctx)
    task.start(props)
    return task, ctx


def read_json(path: str) -> list:
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def ids_in(root: Path, tp: TopicPartition = TP) -> list[int]:
    out = []
    for _, _, path in committed_files(str(root), tp):
        out.extend(row["id"] for row in read_json(path))
    return out


def current(upto: int, tp: TopicPartition = TP) -> dict:
    return {tp: OffsetAndMetadata(upto)}


def test_files_rotate_by_count_and_are_named_after_their_offset_range(engine, tmp_path):
    task, _ = start_task(engine, tmp_path, **{"flush.size": "10", "rotate.interval.ms": "-1"})
    task.open([TP])
    task.put([rec(i) for i in range(25)])
    task.wait_for_writes()  # files are written behind the task
    names = [os.path.basename(p) for _, _, p in committed_files(str(tmp_path), TP)]
    assert names == ["orders+0+0+9.json", "orders+0+10+19.json"]
    assert task.pre_commit(current(25)) == current(25)  # at_least_once: flush, then all
    names = [os.path.basename(p) for _, _, p in committed_files(str(tmp_path), TP)]
    assert names[-1] == "orders+0+20+24.json"
    first = read_json(str(tmp_path / "orders" / "partition=0" / "orders+0+0+9.json"))
    assert first[:2] == [{"id": 0}, {"id": 1, "note": "n1"}]  # Spark drops null fields
    assert ids_in(tmp_path) == list(range(25))
    assert not [n for n in os.listdir(tmp_path / "orders" / "partition=0") if n.startswith(".")]


def completed_spark_jobs(engine) -> int:
    return engine.spark().sparkContext._jsc.sc().statusStore().jobsList(None).length()


def test_on_a_local_master_each_file_costs_one_spark_job(engine, tmp_path):
    """A Spark job has a fixed cost of 0.1-0.2 s here, so a write must not add another
    (say, one to infer the schema of the rows it hands Spark)."""
    task, _ = start_task(engine, tmp_path, **{"flush.size": "4", "rotate.interval.ms": "-1"})
    task.open([TP])
    task.put([rec(0)])
    task.flush(current(1))  # Spark has started
    before = completed_spark_jobs(engine)
    task.put([rec(i) for i in range(1, 13)])
    task.wait_for_writes()
    assert completed_spark_jobs(engine) - before == 3
    assert ids_in(tmp_path) == list(range(13))
    assert not [n for n in os.listdir(tmp_path / "orders" / "partition=0") if n.startswith(".")]


def test_files_rotate_by_time_on_the_injected_clock(engine, tmp_path):
    clock = FakeClock(1000.0)
    task, _ = start_task(engine, tmp_path, clock, **{"flush.size": "1000",
                                                     "rotate.interval.ms": "5000",
                                                     "delivery.guarantee": "exactly_once"})
    task.open([TP])
    task.put([rec(0), rec(1)])
    assert task.pre_commit(current(2)) == {}  # nothing committed yet: nothing to commit
    clock.advance(6)
    task.put([rec(2)])  # the oldest buffered record has waited long enough
    task.wait_for_writes()
    assert ids_in(tmp_path) == [0, 1, 2]
    assert task.pre_commit(current(3)) == current(3)


def test_an_empty_put_writes_a_file_whose_time_is_up(engine, tmp_path):
    """The worker puts nothing on an empty poll (as Kafka Connect does), so the last records
    before a quiet spell are written on time, not at the next offset commit."""
    clock = FakeClock(1000.0)
    task, _ = start_task(engine, tmp_path, clock, **{"flush.size": "1000",
                                                     "rotate.interval.ms": "1000",
                                                     "delivery.guarantee": "exactly_once"})
    task.open([TP])
    task.put([rec(0)])
    task.put([])
    task.wait_for_writes()
    assert ids_in(tmp_path) == []  # not yet due
    clock.advance(1.5)
    task.put([])
    task.wait_for_writes()
    assert ids_in(tmp_path) == [0]


def test_partitions_get_their_own_directories(engine, tmp_path):
    other = TopicPartition("orders", 3)
    task, _ = start_task(engine, tmp_path)
    task.open([TP, other])
    task.put([rec(0), rec(0, tp=other), rec(1, tp=other)])
    task.flush({})
    assert ids_in(tmp_path) == [0]
    assert ids_in(tmp_path, other) == [0, 1]
    assert (tmp_path / "orders" / "partition=3").is_dir()


@pytest.mark.parametrize("fmt", ["csv", "parquet", "text"])
def test_other_formats_round_trip(engine, tmp_path, fmt):
    task, _ = start_task(engine, tmp_path, format=fmt)
    task.open([TP])
    task.put([rec(i) for i in range(5)])
    task.flush({})
    [(_, _, path)] = committed_files(str(tmp_path), TP)
    if fmt == "csv":
        with open(path) as fh:
            rows = list(csv.DictReader(fh))
        got = [int(r["id"]) for r in rows]
    elif fmt == "parquet":
        got = pq.read_table(path).column("id").to_pylist()
    else:
        got = [json.loads(line)["id"] for line in Path(path).read_text().splitlines()]
    assert got == list(range(5))
    assert path.endswith({"csv": ".csv", "parquet": ".parquet", "text": ".txt"}[fmt])


def test_schemaless_strings_and_logical_values(engine, tmp_path):
    import datetime as dt
    ts = SchemaBuilder.struct().field("at", timestamp_schema()).build()
    moment = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    task, _ = start_task(engine, tmp_path, format="text")
    task.open([TP])
    task.put([rec(0, "plain line"), rec(1, b"bytes line"), rec(2, {"a": [1, 2]}),
              rec(3, Struct(ts, {"at": moment}))])
    task.flush({})
    lines = []
    for _, _, path in committed_files(str(tmp_path), TP):
        lines.extend(Path(path).read_text().splitlines())
    assert lines[:3] == ["plain line", "bytes line", '{"a":[1,2]}']
    assert json.loads(lines[3]) == {"at": "2024-05-01T12:00:00+00:00"}
    assert [(s, e) for s, e, _ in committed_files(str(tmp_path), TP)] == [(0, 3)]


def test_a_change_of_schema_starts_a_new_file_with_a_contiguous_range(engine, tmp_path):
    other = SchemaBuilder.struct().field("id", INT64_SCHEMA).build()
    task, _ = start_task(engine, tmp_path, format="parquet")
    task.open([TP])
    task.put([rec(0), rec(1), rec(2, Struct(other, {"id": 7})), rec(3, None), rec(4, "raw")])
    task.flush({})
    files = committed_files(str(tmp_path), TP)
    assert [(s, e) for s, e, _ in files] == [(0, 1), (2, 3), (4, 4)]
    assert pq.read_table(files[1][2]).column("id").to_pylist() == [7, None]
    assert pq.read_table(files[2][2]).column("value").to_pylist() == ["raw"]


def test_parquet_keeps_timestamps_typed(engine, tmp_path):
    import datetime as dt
    ts = SchemaBuilder.struct().field("at", timestamp_schema()).build()
    moment = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    task, _ = start_task(engine, tmp_path, format="parquet")
    task.open([TP])
    task.put([rec(0, Struct(ts, {"at": moment}))])
    task.flush({})
    [(_, _, path)] = committed_files(str(tmp_path), TP)
    assert pq.read_table(path).column("at").to_pylist()[0].timestamp() == moment.timestamp()


def test_exactly_once_survives_a_crash_mid_write(engine, tmp_path):
    props = {"flush.size": "10", "rotate.interval.ms": "-1", "delivery.guarantee": "exactly_once"}
    crashed, _ = start_task(engine, tmp_path, **props)
    crashed.open([TP])
    crashed.put([rec(i) for i in range(15)])  # 0..9 committed, 10..14 only buffered
    crashed.wait_for_writes()
    assert crashed.pre_commit(current(15)) == current(10)
    # the crash interrupts Spark writing the next file: a partial temp dir stays behind
    partial = tmp_path / "orders" / "partition=0" / ".tmp-deadbeef"
    partial.mkdir()
    (partial / "part-00000.json").write_text('{"id": 10}\n{"id": 1')
    del crashed  # no close, no stop: the process died

    task, ctx = start_task(engine, tmp_path, **props)
    task.open([TP])
    assert ctx.rewinds == {TP: 10}  # resume after the last committed file
    assert not partial.exists()
    # even if the consumer replays from further back, nothing is duplicated
    task.put([rec(i) for i in range(3, 23)])
    task.flush({})
    assert ids_in(tmp_path) == list(range(23))
    assert task.pre_commit(current(23)) == current(23)


def test_exactly_once_on_the_runtime_a_crash_between_files_repeats_nothing(engine, tmp_path):
    """The same story through the real sink loop (kctl.testing): the log, the group's
    offsets, the rewind `open()` asks for, and `pre_commit` deciding what is committed."""
    config = {"topics": "orders", "path": str(tmp_path), "format": "json", "flush.size": "5",
              "rotate.interval.ms": "-1", "delivery.guarantee": "exactly_once",
              "value.converter": "JsonConverter"}
    with ConnectorHarness(FileSinkConnector, config, spark=engine) as h:
        h.produce("orders", [order(i) for i in range(25)], schema=SCHEMA)
        h.start()
        h.run_until(lambda: len(ids_in(tmp_path)) >= 10)
        h.restart_tasks(crash=True)  # no commit: the group's offsets are behind the files
        assert h.sink_offsets("orders") == {}
        h.run_until(lambda: len(ids_in(tmp_path)) == 25)
        h.commit()
        assert ids_in(tmp_path) == list(range(25))
        assert h.sink_offsets("orders") == {0: 25}


def test_close_drops_unwritten_records_for_the_next_owner(engine, tmp_path):
    props = {"flush.size": "100", "rotate.interval.ms": "-1", "delivery.guarantee": "exactly_once"}
    task, _ = start_task(engine, tmp_path, **props)
    task.open([TP])
    task.put([rec(0), rec(1)])
    task.close([TP])
    task.flush({})
    assert committed_files(str(tmp_path), TP) == []


class ProcessDied(Exception):
    """Raised where a process would have died: the write stops there, leaving its files."""


@contextlib.contextmanager
def dying_at_the_rename(root: Path) -> Iterator[None]:
    """The next file write under `root` dies between Spark writing the file and renaming it
    into place: its temporary directory stays behind, complete or not, as after kill -9."""
    real_replace, real_rmtree = os.replace, shutil.rmtree
    under = str(root)

    def replace(src, dst, *a, **kw):
        if str(dst).startswith(under):
            raise ProcessDied(dst)
        return real_replace(src, dst, *a, **kw)

    def rmtree(path, *a, **kw):
        if str(path).startswith(under) and TMP_PREFIX in str(path):
            return None  # a dead process cleans nothing up
        return real_rmtree(path, *a, **kw)

    with mock.patch("os.replace", replace), mock.patch("shutil.rmtree", rmtree):
        yield


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(total=st.integers(1, 30), flush_size=st.integers(4, 12),
       crashes=st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=2),
       replay_from=st.integers(0, 30))
def test_property_exactly_once_output_whatever_the_crash_points(engine, tmp_path_factory, total,
                                                                flush_size, crashes,
                                                                replay_from):
    """Crash after any number of puts, between writes or in the middle of one (the file
    written, not yet renamed): committed output holds offsets 0..n-1 once each."""
    root = tmp_path_factory.mktemp("eos")
    props = {"flush.size": str(flush_size), "rotate.interval.ms": "-1",
             "delivery.guarantee": "exactly_once"}
    consumer_committed = 0
    for crash_at, mid_write in [*sorted(crashes), (None, False)]:
        task, ctx = start_task(engine, root, **props)
        task.open([TP])
        # the consumer may even start before where the sink asked it to
        position = min(replay_from, ctx.rewinds.get(TP, consumer_committed))
        end = total if crash_at is None else min(max(crash_at, position), total)
        for i in range(position, end, 3):
            task.put([rec(j) for j in range(i, min(i + 3, end))])
            committed = task.pre_commit(current(min(i + 3, end)))  # files still in flight lag
            consumer_committed = committed.get(TP, OffsetAndMetadata(consumer_committed)).offset
        if crash_at is None:
            task.flush({})
        elif mid_write:  # the process dies inside the next write, before its rename
            with dying_at_the_rename(root), contextlib.suppress(DataError, ProcessDied):
                task.flush({})
        else:  # the process dies after the write in flight, if any, landed
            task.wait_for_writes()
    assert ids_in(root) == list(range(total))
    assert not [p for p in root.rglob(f"{TMP_PREFIX}*")], "a dead write's leftovers remain"


def test_connector_gives_every_task_the_same_config():
    conn = FileSinkConnector()
    conn.start({"topics": "a", "path": "/tmp/out", "format": "parquet"})
    configs = conn.task_configs(3)
    assert len(configs) == 3 and all(c["format"] == "parquet" for c in configs)


def test_a_write_behind_failure_surfaces_from_the_next_call_and_loses_nothing(engine, tmp_path):
    """Spark writes a file while the task takes the next records; when that write fails
    the task hears it (here from flush, which waits for it), and the records come again
    to the next owner."""
    props = {"flush.size": "5", "rotate.interval.ms": "-1", "delivery.guarantee": "exactly_once"}

    class DiskFull(FileSinkTask):
        def _write_table(self, tp, start, end, table, spark_format):
            if start == 5:
                raise DataError(f"disk full writing offsets {start}..{end}")
            super()._write_table(tp, start, end, table, spark_format)

    task = DiskFull()
    task.initialize(SinkContext(engine, {"topics": "orders", "path": str(tmp_path), **props}))
    task.start({"topics": "orders", "path": str(tmp_path), "format": "json", **props})
    task.open([TP])
    task.put([rec(i) for i in range(10)])  # 0..4 written, then 5..9 handed to the writer
    with pytest.raises(DataError, match=r"disk full writing offsets 5\.\.9"):
        task.flush({})  # waits for the write in flight
    assert task.pre_commit(current(11)) == current(5)  # only what is in committed files
    task.stop()

    again, ctx = start_task(engine, tmp_path, **props)
    again.open([TP])
    assert ctx.rewinds == {TP: 5}
    again.put([rec(i) for i in range(5, 12)])
    again.flush({})
    assert ids_in(tmp_path) == list(range(12))


def test_a_write_imports_pyspark_only_once_it_has_the_session(tmp_path):
    """The worker imports pyspark while it builds the session; a writer thread importing it
    before that, while a source task builds the session, met Python's import-lock deadlock
    detection after a restart (and failed a task)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import sys
        from kctl.api import OffsetAndMetadata, TopicPartition
        from kctl.api.records import SinkRecord
        from kctl.connectors.file import FileSinkTask

        class Context:
            def spark(self):
                print("pyspark imported before spark():", "pyspark" in sys.modules)
                raise RuntimeError("no session in this test")

        task = FileSinkTask()
        task.initialize(Context())
        task.start({{"topics": "t", "path": {str(tmp_path)!r}, "format": "json"}})
        tp = TopicPartition("t", 0)
        task.open([tp])
        task.put([SinkRecord("t", 0, None, None, None, {{"id": 1}}, kafka_offset=0)])
        try:
            task.flush({{tp: OffsetAndMetadata(1)}})
        except Exception as e:
            print("write failed:", type(e).__name__)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120).stdout
    assert "pyspark imported before spark(): False" in out, out
    assert "write failed: DataError" in out, out


# zombie fencing (exactly_once): a task publishes a partition's files only while it holds
# the partition's claim

EOS = {"flush.size": "5", "rotate.interval.ms": "-1", "delivery.guarantee": "exactly_once"}


def ranges(root: Path, tp: TopicPartition = TP) -> list[tuple[int, int]]:
    return [(s, e) for s, e, _ in committed_files(str(root), tp)]


def fencing_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "was claimed by another task" in r.getMessage()]


def test_a_zombie_publishes_nothing_once_another_task_claimed_its_partition(engine, tmp_path,
                                                                            caplog):
    """A keeps buffered records of a partition that was reassigned to B behind its back:
    A's next write publishes nothing, A says so once and skips the partition from then on;
    B writes on undisturbed, and A's other partition is still A's."""
    other = TopicPartition("orders", 1)
    zombie, _ = start_task(engine, tmp_path, **EOS)
    zombie.open([TP, other])
    zombie.put([rec(i) for i in range(7)] + [rec(0, tp=other)])  # 0..4 written, 5, 6 held
    zombie.wait_for_writes()

    owner, ctx = start_task(engine, tmp_path, **EOS)
    owner.open([TP])  # the group moved the partition: B claims it, reads the end back
    assert ctx.rewinds == {TP: 5}
    owner.put([rec(i) for i in range(5, 12)])  # 5..9 written, 10, 11 held
    owner.wait_for_writes()

    with caplog.at_level(logging.WARNING, logger="kctl.connectors.file.sink"):
        zombie.put([rec(7), rec(8)])
        zombie.flush({})  # would publish 5..8, overlapping B's 5..9: it must not
        assert ranges(tmp_path) == [(0, 4), (5, 9)]
        [warning] = fencing_warnings(caplog)
        assert "partition orders-0 was claimed by another task (epoch 2 > 1" in warning
        assert f"pid {os.getpid()}" in warning
        # from now on its records are skipped, quietly, and nothing of it is committed
        zombie.put([rec(i) for i in range(9, 20)] + [rec(1, tp=other)])
        zombie.flush({})
        assert zombie.pre_commit({**current(20), **current(2, other)}) == current(2, other)
        assert len(fencing_warnings(caplog)) == 1
    assert ranges(tmp_path) == [(0, 4), (5, 9)]
    assert ranges(tmp_path, other) == [(0, 0), (1, 1)]  # the partition it still owns
    assert not list(tmp_path.rglob(f"{TMP_PREFIX}*")), "the fenced write's output remains"

    owner.put([rec(i) for i in range(12, 15)])
    owner.flush({})
    assert ranges(tmp_path) == [(0, 4), (5, 9), (10, 14)]
    assert ids_in(tmp_path) == list(range(15))
    assert owner.pre_commit(current(15)) == current(15)

    # the partition comes back to A: reopening claims it again, and now B is the stale one
    zombie.close([TP])
    zombie_ctx = zombie.context
    zombie.open([TP])
    assert zombie_ctx.rewinds[TP] == 15
    zombie.put([rec(i) for i in range(15, 18)])
    zombie.flush({})
    with caplog.at_level(logging.WARNING, logger="kctl.connectors.file.sink"):
        owner.put([rec(15), rec(16)])
        owner.flush({})
        assert "(epoch 3 > 2" in fencing_warnings(caplog)[-1]
    assert ranges(tmp_path) == [(0, 4), (5, 9), (10, 14), (15, 17)]
    assert ids_in(tmp_path) == list(range(18))


def test_a_write_whose_temporary_output_the_new_owner_removed_counts_as_fenced(engine,
                                                                               tmp_path,
                                                                               caplog):
    """The new owner's open() removes the temporary directories it finds, a zombie's write in
    flight among them: that write fails, and is reported as fenced off, not as an error."""
    from kctl.connectors.file import sink as sink_module

    zombie, _ = start_task(engine, tmp_path, **EOS)
    zombie.open([TP])
    reached, go = threading.Event(), threading.Event()
    real_fsync = sink_module._fsync_file

    def stalled_fsync(path):  # the zombie's write stalls just before it publishes
        reached.set()
        assert go.wait(60)
        real_fsync(path)

    with mock.patch.object(sink_module, "_fsync_file", stalled_fsync), \
            caplog.at_level(logging.WARNING, logger="kctl.connectors.file.sink"):
        zombie.put([rec(i) for i in range(5)])
        assert reached.wait(60)
        owner, _ = start_task(engine, tmp_path, **EOS)
        owner.open([TP])  # claims, and removes the zombie's temporary directory
        go.set()
        zombie.flush({})  # no DataError
        assert len(fencing_warnings(caplog)) == 1
    assert ranges(tmp_path) == []
    owner.put([rec(i) for i in range(5)])
    owner.flush({})
    assert ranges(tmp_path) == [(0, 4)]


def test_at_least_once_takes_no_claims(engine, tmp_path):
    task, _ = start_task(engine, tmp_path, **{"flush.size": "5"})
    task.open([TP])
    task.put([rec(i) for i in range(5)])
    task.flush({})
    assert sorted(os.listdir(tmp_path / "orders" / "partition=0")) == ["orders+0+0+4.json"]


def test_the_claim_and_its_lock_hold_across_processes(engine, tmp_path, caplog):
    """Another process claims the partition (its open() needs no Spark), and while a process
    holds the partition's lock no other can take it."""
    import subprocess
    import sys
    import textwrap

    zombie, _ = start_task(engine, tmp_path, **EOS)
    zombie.open([TP])
    zombie.put([rec(i) for i in range(3)])
    script = textwrap.dedent(f"""
        import sys
        from kctl.api import TopicPartition
        from kctl.connectors.file import FileSinkTask
        from kctl.connectors.file.sink import partition_dir, partition_lock

        class Context:
            def offset(self, offsets):
                pass

        tp = TopicPartition("orders", 0)
        task = FileSinkTask()
        task.initialize(Context())
        task.start({{"topics": "orders", "path": {str(tmp_path)!r}, "format": "json",
                     "delivery.guarantee": "exactly_once"}})
        task.open([tp])
        with partition_lock(partition_dir({str(tmp_path)!r}, tp)):
            print("locked", flush=True)
            sys.stdin.readline()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "locked\n"
        fd = os.open(tmp_path / "orders" / "partition=0" / ".kctl-lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        proc.communicate("\n", timeout=60)
    assert proc.returncode == 0
    with caplog.at_level(logging.WARNING, logger="kctl.connectors.file.sink"):
        zombie.flush({})
        assert len(fencing_warnings(caplog)) == 1
    assert ranges(tmp_path) == []
