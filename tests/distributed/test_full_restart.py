"""Every worker of a three-worker cluster is stopped at once (Ctrl-C to all three together),
three are started again on the same group, and more lines are added: every line arrives
exactly once.

Story: three `kctl worker start` processes run a file -> topic -> exactly-once FileSink
pipeline; lines flow. All three get SIGINT at the same moment, so each leaves the worker
group, and each sink task's consumer leaves `connect-<sink>`, while the others are leaving
too (the test broker then holds both groups mid-rebalance with a leader that has gone).
Three new processes start with the same worker settings (same group id, same topics, same
sink output). Another file of lines is added. The pipeline resumes without anyone's help:
the output holds every line of both files exactly once. The time from the restart to the
last line's arrival is printed (the figure in docs/rebalance.md).
"""

from __future__ import annotations

import collections
import json
import signal
import time
from pathlib import Path

import pytest
import yaml
from support.cluster import Cluster
from support.files import committed_lines
from support.waiting import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.spark]  # FileSource on Spark

BEFORE, AFTER = 6_000, 6_000
SRC, SINK = "restart-src", "restart-sink"


def write_lines(path: Path, start: int, count: int) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"line {i}\n" for i in range(start, start + count)))
    tmp.rename(path)


def connector(tmp_path: Path, name: str, config: dict) -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump({"name": name, "config": config}))
    return f


def test_every_line_arrives_once_after_every_worker_stops_at_once(kafka_broker, tmp_path):
    cluster = Cluster(tmp_path, kafka_broker.bootstrap,
                      **{"topic.creation.default.partitions": 3})
    try:
        workers = [cluster.add(), cluster.add(), cluster.add()]
        indir, outdir = tmp_path / "in", tmp_path / "out"
        indir.mkdir()
        write_lines(indir / "part-1.txt", 0, BEFORE)
        workers[0].kctl("connector", "create", str(connector(tmp_path, SRC, {
            "connector.class": "FileSource", "path": str(indir), "format": "text",
            "topic": "restart-lines", "batch.max.rows": 2000, "poll.interval.ms": 200})))
        workers[1].kctl("connector", "create", str(connector(tmp_path, SINK, {
            "connector.class": "FileSink", "topics": "restart-lines", "path": str(outdir),
            "format": "json", "delivery.guarantee": "exactly_once", "tasks.max": 3,
            "flush.size": 1000, "rotate.interval.ms": 300})))
        wait_until(lambda: cluster.running(SRC, 1) and cluster.running(SINK, 3),
                   timeout=120, message="pipeline running", on_timeout=cluster.logs)
        wait_until(lambda: len(committed_lines(outdir)) >= 1_000, timeout=120, interval=0.2,
                   message="lines flowing before the stop", on_timeout=cluster.logs)

        # Ctrl-C to all three at once, then wait for each to exit
        for w in workers:
            assert w.proc is not None
            w.proc.send_signal(signal.SIGINT)
        for w in workers:
            assert w.proc is not None
            assert w.proc.wait(60) == 0, w.log()[-3000:]

        # three again, same settings (same group id), all launched together
        restarted = time.monotonic()
        for w in workers:
            w.launch()
        for w in workers:
            w.wait_for_rest()
        write_lines(indir / "part-2.txt", BEFORE, AFTER)

        want = collections.Counter(json.dumps(f"line {i}") for i in range(BEFORE + AFTER))

        def arrived() -> collections.Counter | None:
            got = collections.Counter(committed_lines(outdir))
            return got if sum(got.values()) >= sum(want.values()) else None

        got = wait_until(arrived, timeout=300, interval=0.5, message="every line in the output",
                         on_timeout=cluster.logs)
        took = time.monotonic() - restarted
        print(f"\nfull restart: every line arrived {took:.1f} s after the restart")
        assert got == want, {"missing": sum((want - got).values()),
                             "extra": sum((got - want).values())}
        assert cluster.running(SRC, 1) and cluster.running(SINK, 3)
    finally:
        cluster.stop()
    # stopping flushes nothing new: a late duplicate would show now
    assert collections.Counter(committed_lines(outdir)) == want
