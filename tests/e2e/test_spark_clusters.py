"""`spark.master` may name a standalone cluster (`spark://`) or a Spark Connect server
(`sc://`), not only local mode: the main job runs end to end on each, through a worker
subprocess and the CLI, with the exactly-once FileSink (paths on a filesystem the executors
share, as the README asks)."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.files import committed_lines
from support.spark_servers import connect_server, standalone_cluster
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]

LINES = 3_000


@pytest.fixture(scope="module", params=["spark", "sc"])
def master(request, tmp_path_factory) -> Iterator[str]:
    logs = str(tmp_path_factory.mktemp(f"spark-{request.param}"))
    servers = standalone_cluster if request.param == "spark" else connect_server
    with servers(logs) as url:
        yield url


def test_the_file_pipeline_runs_on_a_spark_cluster(master: str, tmp_path: Path):
    indir, outdir = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    expected = []
    for k in range(2):
        rows = [{"id": i, "page": f"/p{i % 5}"} for i in range(k * LINES // 2, (k + 1) * LINES // 2)]
        (indir / f"clicks-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        expected += [json.dumps(r, sort_keys=True) for r in rows]
    w = Worker(tmp_path)
    (tmp_path / "worker.yaml").write_text(
        f"state.dir: {tmp_path / 'state'}\nlisteners: {LISTENER}\noffset.flush.interval.ms: 500\n"
        f"spark.master: {master}\nspark.driver.memory: 1g\nspark.executor.memory: 1g\n")
    source, sink = tmp_path / "source.yaml", tmp_path / "sink.yaml"
    source.write_text(f"name: src\nconnector.class: FileSource\npath: {indir}\nformat: json\n"
                      "topic: clicks\npoll.interval.ms: 200\n")
    sink.write_text(f"name: sink\nconnector.class: FileSink\ntopics: clicks\npath: {outdir}\n"
                    "format: json\ndelivery.guarantee: exactly_once\nflush.size: 1000\n"
                    "rotate.interval.ms: 500\n")
    w.start(source, sink)
    try:
        def arrived() -> list[str]:
            return [json.dumps(json.loads(line), sort_keys=True)
                    for line in committed_lines(outdir)]

        wait_until(lambda: len(arrived()) >= LINES, timeout=240, interval=1,
                   message=f"every line through {master} "
                           f"({(tmp_path / 'worker.log').read_text()[-2000:]})")
        assert collections.Counter(arrived()) == collections.Counter(expected)
        for name in ("src", "sink"):
            st = w.status(name)
            assert st["connector"]["state"] == "RUNNING", st
            assert [t["state"] for t in st["tasks"]] == ["RUNNING"], st
    finally:
        w.stop()
