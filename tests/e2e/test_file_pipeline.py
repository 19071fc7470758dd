"""The main job through the CLI against a worker subprocess, killed with SIGKILL mid-run.

30k lines in three files (text, csv, json lines) flow through FileSource connectors into
the embedded log and out through one FileSink. The worker is SIGKILLed while data flows, at
kill points rather than after some amount of data (tests/support/killpoints.py): the text
source holds records it read and has not handed over, the sink has committed files the
worker has committed no offsets for. It is started again on the same state directory: in
exactly-once mode every line arrives exactly once; in at-least-once mode none is lost.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from support import killpoints
from support.files import committed_lines
from support.waiting import wait_until
from support.worker import LISTENER, Worker

LINES = 30_000
BATCH = 2000
SOURCE_KILL_AFTER = 3 * BATCH  # the third batch of the text file's 10k lines is held
SINK_KILL_AFTER = 6 * BATCH  # a committed file of flush.size, at least, in a topic
pytestmark = [pytest.mark.slow, pytest.mark.spark]  # its workers run FileSource on Spark


def generate(indir: Path) -> list[str]:
    """Returns every line as the sink will write it (JSON text of the record value)."""
    expected: list[str] = []
    for d in ("text", "csv", "json"):
        (indir / d).mkdir(parents=True)
    third = LINES // 3
    with open(indir / "text" / "events.txt", "w") as f:
        for i in range(third):
            f.write(f"event {i}\n")
            expected.append(json.dumps(f"event {i}"))
    with open(indir / "csv" / "orders.csv", "w") as f:
        f.write("id,customer\n")
        for i in range(third):
            f.write(f"{i},c{i % 7}\n")
            expected.append(json.dumps({"id": i, "customer": f"c{i % 7}"}, separators=(",", ":")))
    with open(indir / "json" / "clicks.jsonl", "w") as f:
        for i in range(LINES - 2 * third):
            f.write(json.dumps({"id": i, "page": f"/p{i % 5}"}) + "\n")
            expected.append(json.dumps({"id": i, "page": f"/p{i % 5}"}, separators=(",", ":")))
    return expected


def append_sentinels(indir: Path) -> set[str]:
    """One more line in each file; returns them as the sink writes them."""
    with open(indir / "text" / "events.txt", "a") as f:
        f.write("sentinel\n")
    with open(indir / "csv" / "orders.csv", "a") as f:
        f.write("-1,sentinel\n")
    with open(indir / "json" / "clicks.jsonl", "a") as f:
        f.write(json.dumps({"id": -1, "page": "sentinel"}) + "\n")
    return {normalise(json.dumps("sentinel")),
            normalise(json.dumps({"id": -1, "customer": "sentinel"})),
            normalise(json.dumps({"id": -1, "page": "sentinel"}))}


def output_lines(outdir: Path) -> list[str]:
    return committed_lines(outdir)


def normalise(line: str) -> str:
    v = json.loads(line)
    return json.dumps(v, separators=(",", ":"), sort_keys=True)


def setup_pipeline(tmp_path: Path, guarantee: str) -> tuple[Worker, list[str], list[Path], Path]:
    indir, outdir = tmp_path / "in", tmp_path / "out"
    expected = generate(indir)
    w = Worker(tmp_path, {
        **killpoints.env(tmp_path / "source-kill-point", SOURCE_KILL_AFTER, sink=False),
        **killpoints.env(tmp_path / "sink-kill-point", SINK_KILL_AFTER, sink=True)})
    (tmp_path / "worker.yaml").write_text(
        f"state.dir: {tmp_path / 'state'}\nlisteners: {LISTENER}\noffset.flush.interval.ms: 500\n"
        "spark.master: local[2]\nspark.driver.memory: 1g\n"
        "spark.driver.extraJavaOptions: -XX:+UseSerialGC -XX:TieredStopAtLevel=1\n")
    files = []
    for fmt, topic in (("text", "events"), ("csv", "orders"), ("json", "clicks")):
        f = tmp_path / f"{fmt}.yaml"
        cls = "support.killpoints.KillPointFileSource" if fmt == "text" else "FileSource"
        f.write_text(f"name: {fmt}-src\nconnector.class: {cls}\npath: {indir / fmt}\n"
                     f"format: {fmt}\ntopic: {topic}\nbatch.max.rows: {BATCH}\n"
                     "poll.interval.ms: 200\n")
        files.append(f)
    sink = tmp_path / "sink.yaml"
    sink.write_text("name: sink\nconnector.class: support.killpoints.KillPointFileSink\n"
                    f"topics: events,orders,clicks\npath: {outdir}\nformat: json\n"
                    f"delivery.guarantee: {guarantee}\nflush.size: {BATCH}\n"
                    "rotate.interval.ms: 300\n")
    return w, expected, [*files, sink], outdir


def run_with_kill(tmp_path: Path, guarantee: str) -> tuple[list[str], list[str], Worker]:
    w, expected, files, outdir = setup_pipeline(tmp_path, guarantee)
    w.start()
    try:
        for f in files:
            w.kctl("connector", "create", str(f))
        # kill while data is flowing: a source mid-file, the sink mid-write
        for point in ("source-kill-point", "sink-kill-point"):
            wait_until(lambda: killpoints.reached(tmp_path / point), timeout=300,  # noqa: B023
                       interval=0.1, message=point, on_timeout=lambda: w.log()[-3000:])
        assert 0 < len(output_lines(outdir)) <= killpoints.taken(tmp_path / "sink-kill-point")
        w.kill()
        w.start()  # the same state dir: connectors and offsets come back by themselves
        assert sorted(w.kctl("connector", "list", "-o", "json").stdout and
                      json.loads(w.kctl("connector", "list", "-o", "json").stdout)) == \
            ["csv-src", "json-src", "sink", "text-src"]
        want = collections.Counter(map(normalise, expected))
        wait_until(lambda: collections.Counter(map(normalise, output_lines(outdir))) >= want,
                   timeout=240, interval=1, message="every line in the output")
        # A sentinel line after the last line of each file: each topic has one partition, so
        # a duplicate the restart made of an earlier line is written before its sentinel.
        sentinels = append_sentinels(tmp_path / "in")
        wait_until(lambda: sentinels <= set(map(normalise, output_lines(outdir))), timeout=120,
                   interval=0.5, message="the sentinels in the output")
        got = [line for line in map(normalise, output_lines(outdir)) if line not in sentinels]
        for name in ("text-src", "csv-src", "json-src", "sink"):
            st = w.status(name)
            assert st["connector"]["state"] == "RUNNING"
            assert [t["state"] for t in st["tasks"]] == ["RUNNING"], st
        return got, list(map(normalise, expected)), w
    finally:
        w.stop()


def test_exactly_once_sink_survives_sigkill(tmp_path):
    got, expected, _ = run_with_kill(tmp_path, "exactly_once")
    counts = collections.Counter(got)
    dupes = [line for line, n in counts.items() if n > 1]
    assert not dupes, f"{len(dupes)} duplicated lines, e.g. {dupes[:3]}"
    assert counts == collections.Counter(expected)


def test_at_least_once_loses_nothing_across_sigkill(tmp_path):
    got, expected, _ = run_with_kill(tmp_path, "at_least_once")
    assert set(got) == set(expected)
    assert len(got) >= len(expected)


def test_malformed_line_fails_the_task_with_file_and_line(tmp_path):
    w = Worker(tmp_path)
    (tmp_path / "worker.yaml").write_text(
        f"state.dir: {tmp_path / 'state'}\nlisteners: {LISTENER}\n"
        "spark.master: local[1]\nspark.driver.memory: 1g\n")
    data = tmp_path / "bad.jsonl"
    data.write_text('{"a": 1}\n{"a": 2}\n{"a": oops\n{"a": 4}\n')
    conn = tmp_path / "bad.yaml"
    conn.write_text(f"name: bad\nconnector.class: FileSource\npath: {data}\nformat: json\n"
                    "topic: bad\nschema: a INT\n")
    w.start()
    try:
        w.kctl("connector", "create", str(conn))
        st = wait_until(lambda: (s := w.status("bad"))["tasks"] and
                        s["tasks"][0]["state"] == "FAILED" and s, timeout=120,
                        message="task FAILED")
        trace = st["tasks"][0]["trace"]
        assert "line 3" in trace and str(data) in trace, trace
        table = w.kctl("connector", "status", "bad").stdout
        assert "FAILED" in table
    finally:
        w.stop()
