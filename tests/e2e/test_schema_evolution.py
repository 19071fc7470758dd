"""A json stream whose shape changes as it arrives, through a worker process: FileSource
evolves its schema (ints then decimals, a new field, a nested field, a missing field) and
the same topic arrives whole through a FileSink and a JdbcSink (auto.evolve, PostgreSQL).
A stream that conflicts goes to the DLQ under errors.tolerance=all and fails its task,
naming the field, under none."""

from __future__ import annotations

import decimal
import json
from pathlib import Path
from typing import Any

import pytest
from support.files import committed_lines, output_files
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]

FIRST = [{"id": 1, "v": 4}, {"id": 2, "v": 5}]
LATER = [{"id": 3, "v": 4.5},  # decimals: v widens to a double
         {"id": 4, "v": 6, "note": "new"},  # a new field
         {"id": 5, "v": 7, "who": {"name": "ann", "age": 41}},  # a nested one
         {"id": 6, "who": {"name": "bob"}}]  # v missing


def new_worker(tmp_path: Path) -> Worker:
    w = Worker(tmp_path)
    (tmp_path / "worker.yaml").write_text(
        f"state.dir: {tmp_path / 'state'}\nlisteners: {LISTENER}\noffset.flush.interval.ms: 300\n"
        "spark.master: local[2]\nspark.driver.memory: 1g\n"
        "spark.driver.extraJavaOptions: -XX:+UseSerialGC -XX:TieredStopAtLevel=1\n")
    return w


def connector_file(tmp_path: Path, name: str, **config: Any) -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text("\n".join(f"{k}: {json.dumps(v) if isinstance(v, str) else v}"
                           for k, v in {"name": name, **config}.items()) + "\n")
    return f


def append(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "a") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))


def table(db: Any) -> list[tuple]:
    try:
        return [tuple(r) for r in db.query(
            'SELECT id, v, note, "who_name", "who_age" FROM events ORDER BY id')]
    except Exception:  # not created, or not evolved, yet
        return []


def ids(db: Any) -> list[int]:
    try:
        return [r[0] for r in db.query("SELECT id FROM events")]
    except Exception:  # not created yet
        return []


def test_an_evolving_stream_arrives_whole_through_a_file_sink_and_a_jdbc_sink(
        tmp_path, postgres_db):
    indir, outdir = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    append(indir / "a.json", FIRST)
    w = new_worker(tmp_path)
    files = [
        connector_file(tmp_path, "src", **{
            "connector.class": "FileSource", "path": str(indir), "format": "json",
            "topic": "events", "poll.interval.ms": 200}),
        connector_file(tmp_path, "files", **{
            "connector.class": "FileSink", "topics": "events", "path": str(outdir),
            "format": "json", "rotate.interval.ms": 200}),
        connector_file(tmp_path, "db", **{
            "connector.class": "JdbcSink", "topics": "events",
            "connection.url": postgres_db.url, "auto.create": "true", "auto.evolve": "true",
            "transforms": "flat", "transforms.flat.type":
                "org.apache.kafka.connect.transforms.Flatten$Value",
            "transforms.flat.delimiter": "_"}),
    ]
    w.start()
    try:
        for f in files:
            w.kctl("connector", "create", str(f))
        wait_until(lambda: len(ids(postgres_db)) == 2,
                   timeout=180, interval=0.3, message="the first lines in the table",
                   on_timeout=lambda: w.log()[-3000:])
        append(indir / "a.json", LATER[:2])
        append(indir / "b.json", LATER[2:])
        d = decimal.Decimal
        want = [(1, d(4), None, None, None), (2, d(5), None, None, None),
                (3, d("4.5"), None, None, None), (4, d(6), "new", None, None),
                (5, d(7), None, "ann", 41), (6, None, None, "bob", None)]
        wait_until(lambda: table(postgres_db) == want, timeout=180, interval=0.5,
                   message="every line in the table, its columns evolved",
                   on_timeout=lambda: f"{table(postgres_db)}\n{w.log()[-3000:]}")
        lines = wait_until(lambda: len(got := committed_lines(outdir)) == 6 and got,
                           timeout=120, interval=0.3, message="every line in the files")
        rows = sorted((json.loads(x) for x in lines), key=lambda r: r["id"])
        assert rows == FIRST + LATER  # FileSink leaves nulls out, as the lines did
        assert '"v":4}' in next(x for x in lines if '"id":1,' in x)  # 4 stayed 4
        files_written = output_files(outdir)
        # one schema a file: the first lines' (v a bigint), then the later lines', which
        # widen it in the polls that read them
        assert len(files_written) >= 2
        [(typ,)] = postgres_db.query("SELECT data_type FROM information_schema.columns "
                                     "WHERE table_name = 'events' AND column_name = 'v'")
        assert typ == "numeric"  # bigint widened without loss
        for name in ("src", "files", "db"):
            assert [t["state"] for t in w.status(name)["tasks"]] == ["RUNNING"]
    finally:
        w.stop()


CONFLICTING = ['{"id": 1, "n": {"x": 1}}', '{"id": 2, "n": 3}', '{"id": 3, "n": {"x": 3}}']


def test_a_conflicting_stream_goes_to_the_dlq_or_fails_naming_the_field(tmp_path):
    data = tmp_path / "c.json"
    data.write_text("".join(x + "\n" for x in CONFLICTING))
    w = new_worker(tmp_path)
    common = {"connector.class": "FileSource", "path": str(data), "format": "json",
              "poll.interval.ms": 200}
    tolerant = connector_file(tmp_path, "tolerant", topic="t1", **common, **{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq-t1",
        "errors.deadletterqueue.topic.replication.factor": 1,
        "errors.deadletterqueue.context.headers.enable": True})
    strict = connector_file(tmp_path, "strict", topic="t2", **common)
    w.start()
    try:
        w.kctl("connector", "create", str(tolerant))
        w.kctl("connector", "create", str(strict))
        dead = wait_until(lambda: (d := json.loads(w.kctl("dlq", "show", "tolerant", "-o",
                                                          "json").stdout)) and d,
                          timeout=180, interval=0.5, message="the conflicting line in the DLQ",
                          on_timeout=lambda: w.log()[-3000:])
        [record] = dead
        assert record["message"].startswith(
            f"The json line 2 in {data} conflicts with the schema: field 'n' is bigint in "
            "this line but struct<x:bigint> in the schema"), record
        assert "alformed" not in record["message"]
        st = wait_until(lambda: (s := w.status("strict"))["tasks"] and
                        s["tasks"][0]["state"] == "FAILED" and s, timeout=120,
                        message="the strict task FAILED")
        trace = st["tasks"][0]["trace"]
        assert "field 'n' is bigint in this line but struct<x:bigint> in the schema" in trace
        assert [t["state"] for t in w.status("tolerant")["tasks"]] == ["RUNNING"]
    finally:
        w.stop()
