"""FileSource tailing stories: files are rotated, truncated, copied, compressed, deleted
and left unreadable, as log files are, and every line still arrives exactly once, or
its loss is logged and counted."""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from file_support import OffsetStore, Reporter, ReportingContext, expand
from prometheus_client import CollectorRegistry, generate_latest

from kctl.api import DataError, SourceRecord
from kctl.connectors.file import FileSourceTask
from kctl.runtime.error_handling import ErrorCounters
from kctl.runtime.metrics import WorkerCollector
from kctl.runtime.tasks.base import TaskCounters
from kctl.states import TaskId

pytestmark = pytest.mark.spark


def start(engine, store: OffsetStore, reporter: Reporter | None = None,
          **props: str) -> FileSourceTask:
    props = {"topic": "logs", "poll.interval.ms": "10", "format": "text", **props}
    task = FileSourceTask()
    task.initialize(ReportingContext(engine, store, props, reporter))
    task.start(props)
    return task


class Shipper:
    """Plays the runtime: polls, keeps what was delivered, acknowledges it."""

    def __init__(self, task: FileSourceTask, store: OffsetStore) -> None:
        self.task, self.store = task, store
        self.delivered: list[str] = []

    def poll(self) -> list[SourceRecord]:
        got = expand(self.task.poll())
        self.store.ack(got)
        self.delivered.extend(r.value for r in got)
        return got

    def until(self, *expected: str, timeout: float = 20) -> None:
        """Poll until each of `expected` was delivered (a condition, not a sleep)."""
        deadline = time.monotonic() + timeout
        while not set(expected) <= set(self.delivered):
            assert time.monotonic() < deadline, \
                f"never delivered {sorted(set(expected) - set(self.delivered))[:5]}"
            self.poll()

    def settle(self, quiet_scans: int = 5) -> None:
        """Poll until several file scans in a row found nothing new."""
        quiet = 0
        while quiet < quiet_scans:
            quiet = 0 if self.poll() else quiet + 1


def lines(prefix: str, a: int, b: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(a, b + 1)]


def append(path: Path, items: list[str]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(x + "\n" for x in items))


def truncate(path: Path) -> None:
    with open(path, "r+b") as fh:  # `: > path`: same file, no content
        fh.truncate(0)


def once_each(delivered: list[str], expected: list[str]) -> None:
    dup = sorted({x for x in delivered if delivered.count(x) > 1})
    assert not dup, f"delivered more than once: {dup[:10]}"
    assert sorted(delivered) == sorted(expected)


@pytest.mark.parametrize("watch", ["the file", "the directory"])
def test_the_rotation_and_truncation_story_delivers_every_line_exactly_once(
        engine, tmp_path, watch):
    """Issue 16, reproduction 1: today 180 of these lines never arrive."""
    app = tmp_path / "app.log"
    store = OffsetStore()
    path = str(app) if watch == "the file" else str(tmp_path)
    task = start(engine, store, path=path)
    shipper = Shipper(task, store)

    append(app, lines("A", 1, 100))
    task._scan()  # app.log did not exist when the task started
    shipper.until(*lines("A", 1, 100))
    truncate(app)
    append(app, lines("T", 1, 50) + lines("B", 1, 10))
    shipper.until(*lines("T", 1, 50), *lines("B", 1, 10))
    os.rename(app, tmp_path / "app.log.1")
    append(app, lines("N", 1, 20))
    shipper.until(*lines("N", 1, 20))
    truncate(app)
    append(app, lines("X", 1, 300))
    shipper.until(*lines("X", 1, 300))
    shipper.settle()

    once_each(shipper.delivered, lines("A", 1, 100) + lines("T", 1, 50) + lines("B", 1, 10)
              + lines("N", 1, 20) + lines("X", 1, 300))
    assert task.stats.truncations == 2 and task.stats.bytes_lost == 0

    # kill -9: nothing is stopped cleanly, a new task starts from the committed offsets
    append(app, lines("Y", 1, 5))
    after = start(engine, store, path=path)
    shipper.task = after
    shipper.until(*lines("Y", 1, 5))
    shipper.settle()
    assert shipper.delivered[-5:] == lines("Y", 1, 5)
    once_each(shipper.delivered[-5:], lines("Y", 1, 5))
    assert len(shipper.delivered) == 480 + 5
    task.stop()
    after.stop()


def test_lines_written_to_a_file_after_it_was_renamed_away_are_still_read(engine, tmp_path):
    app = tmp_path / "app.log"
    append(app, lines("old", 1, 3))
    store = OffsetStore()
    task = start(engine, store, path=str(app))
    shipper = Shipper(task, store)
    shipper.until(*lines("old", 1, 3))
    with open(app, "a", encoding="utf-8") as writer:  # a logger holding its file open
        os.rename(app, tmp_path / "app.log.1")
        append(app, ["fresh"])
        shipper.until("fresh")
        writer.write("late1\nlate2\n")
    shipper.until("late1", "late2")
    shipper.settle()
    once_each(shipper.delivered, [*lines("old", 1, 3), "fresh", "late1", "late2"])
    assert task.stats.renames == 0  # renamed away from `path`, not to another match
    task.stop()


def test_copytruncate_rotation_continues_in_the_copy_and_restarts_the_original(
        engine, tmp_path):
    """logrotate's copytruncate: app.log is copied to app.log.1, then cut to 0 bytes.
    Lines appended just before the copy were not read yet: they come from the copy."""
    app = tmp_path / "app.log"
    append(app, lines("L", 1, 50))
    store = OffsetStore()
    task = start(engine, store, path=str(tmp_path))
    shipper = Shipper(task, store)
    shipper.until(*lines("L", 1, 50))
    append(app, lines("L", 51, 60))
    shutil.copyfile(app, tmp_path / "app.log.1")
    truncate(app)
    append(app, lines("M", 1, 5))
    shipper.until(*lines("L", 51, 60), *lines("M", 1, 5))
    shipper.settle()
    once_each(shipper.delivered, lines("L", 1, 60) + lines("M", 1, 5))
    assert task.stats.truncations == 1 and task.stats.bytes_lost == 0
    task.stop()


def test_compressed_rotations_are_read_whole_or_excluded(engine, tmp_path):
    app = tmp_path / "app.log"
    append(app, ["live"])
    with gzip.open(tmp_path / "app.log.2.gz", "wt", encoding="utf-8") as gz:
        gz.write("".join(x + "\n" for x in lines("Z", 1, 1000)))
    store = OffsetStore()
    task = start(engine, store, path=str(tmp_path), **{"batch.max.rows": "300"})
    shipper = Shipper(task, store)
    shipper.until("live", *lines("Z", 1, 1000))
    shipper.settle()
    once_each(shipper.delivered, ["live", *lines("Z", 1, 1000)])
    again = start(engine, store, path=str(tmp_path))  # a restart reads none of it again
    assert expand(again.poll()) == []

    skipping = start(engine, OffsetStore(), path=str(tmp_path),
                     **{"file.exclude": "*.gz, *.tmp"})
    other = Shipper(skipping, OffsetStore())
    other.until("live")
    other.settle()
    assert other.delivered == ["live"]
    for t in (task, again, skipping):
        t.stop()


def test_a_file_deleted_while_being_read_is_read_to_its_end(engine, tmp_path):
    big = tmp_path / "big.log"
    append(big, lines("D", 1, 5000))
    store = OffsetStore()
    task = start(engine, store, path=str(tmp_path), **{"batch.max.rows": "1000"})
    shipper = Shipper(task, store)
    assert len(shipper.poll()) == 1000
    big.unlink()
    shipper.until(*lines("D", 1, 5000))
    shipper.settle()
    once_each(shipper.delivered, lines("D", 1, 5000))
    assert task._files == {} and task.stats.bytes_lost == 0  # the handle went with it
    task.stop()


def test_a_truncation_before_the_file_was_read_is_logged_and_counted(engine, tmp_path,
                                                                    caplog):
    log_file = tmp_path / "app.log"
    written = lines("R", 1, 100)
    append(log_file, written)
    store = OffsetStore()
    task = start(engine, store, path=str(log_file), **{"batch.max.rows": "10"})
    shipper = Shipper(task, store)
    shipper.poll()
    truncate(log_file)
    append(log_file, ["after"])
    with caplog.at_level(logging.WARNING):
        shipper.until("after")
    # what was read before the cut (a poll may have been read ahead) arrived; the rest not
    read = sum(len(x) + 1 for x in shipper.delivered if x != "after")
    assert shipper.delivered == [*written[:len(shipper.delivered) - 1], "after"]
    unread = sum(len(x) + 1 for x in written) - read  # bytes that were never read
    assert task.stats.truncations == 1 and task.stats.bytes_lost == unread
    warning = next(r.getMessage() for r in caplog.records if "truncated" in r.getMessage())
    assert str(log_file) in warning and f"{unread} bytes" in warning
    # ... and on the worker's /metrics, next to the runtime's own counters
    snapshot = TaskCounters().snapshot("source", delivered=0, errors=ErrorCounters(),
                                       connector_task=task)
    worker = SimpleNamespace(tasks={TaskId("tail", 0): SimpleNamespace(snapshot=lambda: snapshot)},
                             connectors={}, startups={})
    scraped = generate_latest(registry(WorkerCollector(lambda: worker, None))).decode()
    assert ('kafka_connect_connector_task_metrics_file_bytes_lost_total'
            f'{{connector="tail",task="0"}} {float(unread)}') in scraped
    assert ('kafka_connect_connector_task_metrics_file_truncations_total'
            '{connector="tail",task="0"} 1.0') in scraped
    task.stop()


def registry(collector: WorkerCollector) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(collector)
    return reg


@contextlib.contextmanager
def as_nobody() -> Iterator[None]:
    """Root reads any file: drop the effective user so mode 000 means unreadable."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


def shared_with_nobody(tmp_path: Path) -> Path:
    """A directory `nobody` can reach: pytest's base directories are private to root, and
    how many levels there are depends on the run (xdist adds one per worker)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    top = Path(tempfile.gettempdir()).resolve()
    for d in (shared, *Path(shared).resolve().parents):
        if d == top or top not in d.parents:
            break
        with contextlib.suppress(PermissionError):
            d.chmod(0o755)
    return shared


@pytest.mark.parametrize("tolerance", ["none", "all"])
def test_an_unreadable_file_is_reported_and_retried_while_others_flow(engine, tmp_path,
                                                                      tolerance):
    shared = shared_with_nobody(tmp_path)
    good, locked = shared / "good.log", shared / "locked.log"
    append(good, lines("G", 1, 10))
    append(locked, lines("S", 1, 3))
    locked.chmod(0)
    reporter = Reporter()
    store = OffsetStore()
    with as_nobody():
        task = start(engine, store, reporter, path=str(shared),
                     **{"errors.tolerance": tolerance})
        shipper = Shipper(task, store)
        shipper.until(*lines("G", 1, 10))
        shipper.settle()
    assert shipper.delivered == lines("G", 1, 10)
    assert task.stats.unreadable == 1
    if tolerance == "all":  # one dead-letter entry naming the file, however many retries
        assert len(reporter.reports) == 1
        record, error = reporter.reports[0]
        assert isinstance(error, DataError) and str(locked) in str(error)
        assert str(error).startswith("Failed reading") and "Permission denied" in str(error)
        assert record.source_offset["path"] == str(locked)
    else:
        assert reporter.reports == []
    locked.chmod(0o644)  # fixed: the next retry reads it
    task._files[next(i for i, st in task._files.items() if st.path == str(locked))] \
        .retry_at = 0
    with as_nobody():
        shipper.until(*lines("S", 1, 3))
    once_each(shipper.delivered, lines("G", 1, 10) + lines("S", 1, 3))
    task.stop()


def test_bytes_that_do_not_decode_are_reported_never_replaced(engine, tmp_path):
    f = tmp_path / "mixed.log"
    f.write_bytes("café\n".encode() + b"caf\xe9 latin\n" + "naïve\n".encode())
    reporter = Reporter()
    store = OffsetStore()
    task = start(engine, store, reporter, path=str(f), **{"errors.tolerance": "all"})
    shipper = Shipper(task, store)
    shipper.until("café", "naïve")
    shipper.settle()
    assert shipper.delivered == ["café", "naïve"]
    [(record, error)] = reporter.reports
    assert record.value == "caf\\xe9 latin" and record.source_offset["line"] == 2
    assert f"Malformed text line 2 in {f} (not valid utf-8" in str(error)
    # the committed offset is past the three lines: a restart reads none of them again
    assert expand(start(engine, store, path=str(f)).poll()) == []

    # the same bytes are fine when the files say they are latin-1
    latin = Shipper(start(engine, OffsetStore(), path=str(f),
                          **{"file.encoding": "latin-1"}), OffsetStore())
    latin.until("café".encode().decode("latin-1"), "café latin")
    assert len(latin.delivered) == 3


def test_without_a_reporter_an_undecodable_line_fails_naming_file_and_line(engine, tmp_path):
    f = tmp_path / "bad.log"
    f.write_bytes(b"ok\n\xff\xfe\n")
    store = OffsetStore()
    shipper = Shipper(start(engine, store, path=str(f)), store)
    with pytest.raises(DataError, match=rf"line 2 in {f} \(not valid utf-8"):
        shipper.until("never")
    assert shipper.delivered == ["ok"]



def test_a_file_deleted_before_it_could_be_read_is_a_counted_loss(engine, tmp_path, caplog):
    shared = shared_with_nobody(tmp_path)
    locked = shared / "locked.log"
    append(locked, lines("S", 1, 3))  # 9 bytes
    locked.chmod(0)
    append(shared / "good.log", ["g"])
    store = OffsetStore()
    with as_nobody():
        task = start(engine, store, path=str(shared))
        shipper = Shipper(task, store)
        shipper.until("g")
    locked.unlink()
    with as_nobody(), caplog.at_level(logging.WARNING):
        shipper.settle()
    assert task.stats.deletions == 1 and task.stats.bytes_lost == 9
    assert any(f"{locked} was deleted before it was fully read: 9 bytes" in r.getMessage()
               for r in caplog.records)
    task.stop()

CONFLICTING = ['{"id": 1, "n": {"x": 1}}', '{"id": 2, "n": {"x": 2}}', '{"id": "two", "n": {"x": 3}}',
               '{"id": 4, "n": "flat"}', '{"id": 5, "n": {"x": 5}}']


@pytest.mark.parametrize(("conflict", "tolerance"),
                         [("error", "all"), ("string", "all"), ("error", "none")])
def test_json_type_conflicts_follow_schema_conflict(engine, tmp_path, conflict, tolerance):
    """Issue 16, reproduction 5: one `"id": "two"` once turned every id into a string and
    the nested object into a JSON string, silently. Now the line is its record's error,
    naming the field and both types, or (string) the field holds JSON text from then on."""
    f = tmp_path / "events.json"
    append(f, CONFLICTING)
    reporter = Reporter()
    store = OffsetStore()
    # (errors.tolerance=none: the runtime's reporter raises what it is given, as no reporter)
    task = start(engine, store, reporter if tolerance == "all" else None, path=str(f),
                 format="json", **{"errors.tolerance": tolerance, "schema.conflict": conflict})
    records: list[SourceRecord] = []
    deadline = time.monotonic() + 30
    try:
        while len(records) + len(reporter.reports) < len(CONFLICTING):
            assert time.monotonic() < deadline
            records += expand(task.poll())
    except DataError as e:
        assert tolerance == "none"
        assert str(e).startswith(f"The json line 3 in {f} conflicts with the schema: field "
                                 "'id' is string in this line but bigint in the schema")
        assert [r.value.get("id") for r in records] == [1, 2]
        return
    assert tolerance != "none"
    if conflict == "error":  # numbers stay numbers, objects stay structs
        assert [r.value.to_dict() for r in records] == [
            {"id": 1, "n": {"x": 1}}, {"id": 2, "n": {"x": 2}}, {"id": 5, "n": {"x": 5}}]
        assert [(r.source_offset["line"], r.value) for r, _ in reporter.reports] == \
            [(3, CONFLICTING[2]), (4, CONFLICTING[3])]
        assert "field 'n' is string in this line but struct<x:bigint> in the schema" in \
            str(reporter.reports[1][1])
        assert "alformed" not in str(reporter.reports[0][1])
    else:  # strings from the conflict on, as asked; the records before keep their values
        assert [r.value.get("id") for r in records] == [1, 2, "two", "4", "5"]
        # an object's text as the line has it
        assert [r.value.get("n") for r in records][3:] == ["flat", '{"x": 5}']
        assert reporter.reports == []


def test_a_broken_parquet_file_is_reported_while_the_good_one_is_read(engine, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [1, 2, 3]}), tmp_path / "good.parquet")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 this is not parquet at all")
    reporter = Reporter()
    store = OffsetStore()
    task = start(engine, store, reporter, path=str(tmp_path), format="parquet",
                 **{"errors.tolerance": "all"})
    got: list[SourceRecord] = []
    deadline = time.monotonic() + 30
    while not (len(got) == 3 and reporter.reports):
        assert time.monotonic() < deadline
        got += expand(task.poll())
    assert sorted(r.value.get("id") for r in got) == [1, 2, 3]
    [(record, error)] = reporter.reports
    assert str(error).startswith(f"Failed reading {broken}")
    assert record.source_offset["path"] == str(broken)
    task.stop()


def test_with_many_files_idle_ones_are_closed_and_still_followed(engine, tmp_path,
                                                                monkeypatch):
    from kctl.connectors.file import tracking

    monkeypatch.setattr(tracking, "_MAX_OPEN", 2)
    for n in range(5):
        append(tmp_path / f"f{n}.log", [f"{n}-a"])
    store = OffsetStore()
    task = start(engine, store, path=str(tmp_path))
    shipper = Shipper(task, store)
    shipper.until(*(f"{n}-a" for n in range(5)))
    shipper.settle()
    assert sum(st.fh is not None for st in task._files.values()) <= 2
    for n in range(5):
        append(tmp_path / f"f{n}.log", [f"{n}-b"])
    os.rename(tmp_path / "f0.log", tmp_path / "f0.log.1")
    shipper.until(*(f"{n}-b" for n in range(5)))
    shipper.settle()
    once_each(shipper.delivered, [f"{n}-{x}" for n in range(5) for x in "ab"])
    task.stop()
