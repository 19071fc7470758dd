"""`kctl topic` as a user meets it: a `kctl worker start` process runs a FileSource, and the
CLI, a separate process talking to the worker's REST API, shows what the source wrote, on
the embedded log (which no other tool can read) and on the test broker alike.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
import yaml
from support.cluster import SINK_CONSUMERS
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = pytest.mark.slow

LINES = ["first line", "second line", "third line", "fourth line"]
HEAVY = ("pyspark", "pyarrow", "fastapi", "uvicorn", "py4j", "confluent_kafka")


def kctl(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl.cli.main", "--url", url, *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(params=["embedded", "broker"])
def worker(request, tmp_path):
    settings = {"state.dir": str(tmp_path / "state"), "listeners": LISTENER,
                "offset.flush.interval.ms": 200, "spark.start": "lazy"}
    if request.param == "broker":
        settings |= {"bootstrap.servers": request.getfixturevalue("kafka_broker").bootstrap,
                     "topic.creation.default.replication.factor": 1, **SINK_CONSUMERS}
    (tmp_path / "worker.yaml").write_text(yaml.safe_dump(settings))
    w = Worker(tmp_path)
    w.start()
    yield w
    w.stop()


@pytest.fixture
def topic() -> str:
    """The source's topic: one of its own, as the test broker lives for the whole session."""
    return f"lines-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def source(worker, tmp_path, topic) -> Path:
    """A FileSource on a directory of text lines, and the wait until they are in its topic."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "a.txt").write_text("".join(f"{line}\n" for line in LINES))
    r = httpx.post(f"{worker.url}/connectors", json={"name": "src", "config": {
        "connector.class": "FileSource", "path": str(inbox), "topic": topic}}, timeout=30)
    assert r.status_code == 201, r.text

    def written() -> bool:
        answer = httpx.get(f"{worker.url}/topics/{topic}", timeout=30)
        return answer.status_code == 200 and \
            sum(p["records"] for p in answer.json()["partitions"]) == len(LINES)

    wait_until(written, 60, message="the source's lines in its topic",
               on_timeout=lambda: worker.log()[-3000:])
    return inbox


def test_a_sources_first_records_are_shown_decoded(worker, source, topic):
    listed = kctl(worker.url, "topic", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert {"name": topic, "partitions": 1} in json.loads(listed.stdout)

    described = kctl(worker.url, "topic", "describe", topic, "--connector", "src")
    assert described.returncode == 0, described.stderr
    assert f"{topic}: 1 partition(s), 4 record(s)" in described.stdout

    first = kctl(worker.url, "topic", "read", topic, "--connector", "src", "--max", "2",
                 "-o", "json")
    assert first.returncode == 0, first.stderr
    records = [json.loads(line) for line in first.stdout.splitlines()]
    assert [(r["partition"], r["offset"], r["value"]) for r in records] == \
        [(0, 0, "first line"), (0, 1, "second line")]
    assert all(r["timestamp"] > 0 and r["time"].endswith("+00:00") for r in records)

    table = kctl(worker.url, "topic", "read", topic, "--last", "1")
    assert table.returncode == 0, table.stderr
    assert "fourth line" in table.stdout and "first line" not in table.stdout


def test_follow_shows_records_as_the_source_writes_them(worker, source, topic):
    proc = subprocess.Popen([sys.executable, "-m", "kctl.cli.main", "--url", worker.url,
                             "topic", "read", topic, "--follow", "-o", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen: list[str] = []
        offsets: list[int] = []

        def shown(n: int) -> bool:
            assert proc.stdout is not None
            while len(seen) < n:
                line = proc.stdout.readline()
                if not line:
                    return False
                record = json.loads(line)
                seen.append(record["value"])
                offsets.append(record["offset"])
            return True

        wait_until(lambda: shown(len(LINES)), 30, message="the lines already written")
        (source / "b.txt").write_text("a late line\n")
        wait_until(lambda: shown(len(LINES) + 1), 60, message="the late line")
        assert seen == [*LINES, "a late line"]
        assert offsets == list(range(len(LINES) + 1))
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def test_the_topic_commands_load_no_spark_arrow_or_server(worker, source, topic):
    probe = ("import sys\nfrom kctl.cli.main import app\n"
             f"try:\n    app(['--url', {worker.url!r}, 'topic', 'read', {topic!r}, '--max', "
             "'1'])\n"
             "except SystemExit:\n    pass\n"
             f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       timeout=60, env={**os.environ})
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout + r.stderr
