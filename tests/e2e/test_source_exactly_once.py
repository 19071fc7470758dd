"""A worker SIGKILLed after its records were acknowledged but before any offset commit
restarts without producing them again: the offsets are recovered from the log itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.waiting import wait_until

from kctl.api.records import TopicPartition
from kctl.runtime.dlq import read_topic
from kctl.transport.embedded import EmbeddedTransport
from kctl.transport.kafka import KafkaTransport

pytestmark = pytest.mark.slow
TESTS = str(Path(__file__).resolve().parents[1])


def start(work: Path, *files: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": TESTS + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "kctl.cli.main", "worker", "start",
                             str(work / "worker.yaml"), *map(str, files)],
                            stdout=open(work / "worker.log", "a"), stderr=subprocess.STDOUT,
                            env=env)


def since_last_start(events: Path) -> list[str]:
    """What the counter task did since it last started (its events file)."""
    lines = events.read_text().splitlines() if events.exists() else []
    starts = [i for i, line in enumerate(lines) if line == "start"]
    return lines[starts[-1] + 1:] if starts else []


def starts(events: Path) -> int:
    return events.read_text().splitlines().count("start") if events.exists() else 0


def acked(events: Path) -> int:
    return sum(line.startswith("acked ") for line in since_last_start(events))


def exhausted_after_restart(events: Path) -> bool:
    """The restarted task has started again, recovered, and found nothing left to produce:
    anything it produced again came before this line and was acknowledged on stop."""
    return starts(events) == 2 and "exhausted" in since_last_start(events)


def topic_values(state: Path, topic: str) -> list[bytes]:
    with EmbeddedTransport(state) as t:
        c = t.consumer(None)
        c.assign([TopicPartition(topic, 0)])
        out: list[bytes] = []
        while batch := c.poll_batch(10000, 0.1):
            out.extend(r.value for r in batch)
        c.close()
        return out


@pytest.mark.parametrize("mode", ["enabled", "disabled"])
def test_acknowledged_but_uncommitted_records_are_not_produced_twice(tmp_path, mode):
    (tmp_path / "worker.yaml").write_text(
        f"state.dir: {tmp_path / 'state'}\nlisteners: http://127.0.0.1:0\n"
        f"offset.flush.interval.ms: 600000\nexactly.once.source.support: {mode}\n")
    conn = tmp_path / "src.yaml"
    events = tmp_path / "events"
    conn.write_text("name: counter\nconnector.class: support.connectors.CounterSourceConnector\n"
                    f"topic: numbers\ncount: 300\nper.poll: 10\nevents.file: {events}\n")
    proc = start(tmp_path, conn)
    try:
        # all 300 produced and acknowledged; no offset commit yet (10 min)
        wait_until(lambda: acked(events) == 300, timeout=60, message="300 acknowledged")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert len(topic_values(tmp_path / "state", "numbers")) == 300

    proc = start(tmp_path)
    try:
        if mode == "enabled":
            wait_until(lambda: exhausted_after_restart(events), timeout=60,
                       message="the restarted task recovered and found nothing left")
        else:
            wait_until(lambda: acked(events) == 300 and exhausted_after_restart(events),
                       timeout=60, message="the restarted task produced all 300 again")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    values = topic_values(tmp_path / "state", "numbers")
    if mode == "enabled":
        assert len(values) == 300 and len(set(values)) == 300
    else:  # Kafka Connect's at-least-once: the uncommitted records come again
        assert len(values) == 600


def test_offsets_are_recovered_from_a_real_broker_too(tmp_path, kafka_broker):
    """The same story on Tansu: the records are read back from the broker (to the ends
    its partitions have, however slowly it answers), not produced again."""
    topic = f"numbers-{uuid.uuid4().hex[:8]}"
    (tmp_path / "worker.yaml").write_text(
        f"state.dir: {tmp_path / 'state'}\nlisteners: http://127.0.0.1:0\n"
        f"bootstrap.servers: {kafka_broker.bootstrap}\n"
        "offset.flush.interval.ms: 600000\ntopic.creation.default.replication.factor: 1\n")
    conn = tmp_path / "src.yaml"
    events = tmp_path / "events"
    conn.write_text("name: counter\nconnector.class: support.connectors.CounterSourceConnector\n"
                    f"topic: {topic}\ncount: 300\nper.poll: 10\nevents.file: {events}\n")
    log = tmp_path / "worker.log"
    kafka = KafkaTransport([kafka_broker.bootstrap])
    try:
        proc = start(tmp_path, conn)
        try:
            wait_until(lambda: len(read_topic(kafka, topic)) == 300, timeout=60,
                       message="all 300 produced and acknowledged; no offset commit yet")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        proc = start(tmp_path)
        try:
            wait_until(lambda: "recovered 1 source offset(s) from the log" in log.read_text(),
                       timeout=60, message="the restarted task read its records back")
            wait_until(lambda: exhausted_after_restart(events), timeout=60,
                       message="the restarted task found nothing left to produce")
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
        values = [r.value for r in read_topic(kafka, topic)]
        assert len(values) == 300 and len(set(values)) == 300
    finally:
        kafka.close()


def test_dead_lettered_records_are_not_dead_lettered_again_after_a_crash(tmp_path):
    """A transform rejects every tenth record, the very last included. Everything is
    delivered or dead-lettered, then the worker is SIGKILLed before any offset commit: the
    restarted task recovers its position from the topic and from the DLQ, so neither gets a
    record twice."""
    (tmp_path / "worker.yaml").write_text(
        f"state.dir: {tmp_path / 'state'}\nlisteners: http://127.0.0.1:0\n"
        "offset.flush.interval.ms: 600000\n")
    conn = tmp_path / "src.yaml"
    events = tmp_path / "events"
    conn.write_text(
        "name: counter\nconnector.class: support.connectors.CounterSourceConnector\n"
        f"topic: numbers\ncount: 300\nper.poll: 10\nevents.file: {events}\n"
        "transforms: fail\ntransforms.fail.type: support.transforms.FailOn\n"
        "transforms.fail.modulo: 10\ntransforms.fail.remainder: 9\n"
        "errors.tolerance: all\nerrors.deadletterqueue.topic.name: numbers-dlq\n")
    log = tmp_path / "worker.log"
    proc = start(tmp_path, conn)
    try:
        # all 300 delivered or dead-lettered; no offset commit yet (10 min)
        wait_until(lambda: acked(events) == 300, timeout=60, message="300 done with")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert len(topic_values(tmp_path / "state", "numbers")) == 270
    assert len(topic_values(tmp_path / "state", "numbers-dlq")) == 30

    proc = start(tmp_path)
    try:
        wait_until(lambda: "recovered 1 source offset(s) from the log" in log.read_text(),
                   timeout=60, message="the restarted task read its records back")
        wait_until(lambda: exhausted_after_restart(events), timeout=60,
                   message="the restarted task found nothing left to produce or dead-letter")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    good = topic_values(tmp_path / "state", "numbers")
    bad = topic_values(tmp_path / "state", "numbers-dlq")
    assert len(good) == 270 and len(set(good)) == 270
    assert len(bad) == 30 and len(set(bad)) == 30
