"""DataGen: a sequence at a rate, that carries on from its committed offset after a restart,
and needs no Spark (its tasks never ask for a session)."""

from __future__ import annotations

import json
import time

import pytest

from kctl.connectors.datagen import DataGenSourceConnector, DataGenSourceTask
from kctl.errors import ConfigError


class Offsets:
    """The committed offsets a restarted task reads (the runtime's OffsetStorageReader)."""

    def __init__(self, stored=None):
        self.stored = stored or {}

    def offset(self, partition):
        return self.stored.get(partition["task"])


class Context:
    def __init__(self, stored=None):
        self.offset_storage_reader = Offsets(stored)
        self.configs = {}

    def spark(self):
        raise AssertionError("DataGen must not need Spark")


def started(props, stored=None) -> DataGenSourceTask:
    task = DataGenSourceTask()
    task.initialize(Context(stored))
    task.start(props)
    return task


def drain(task, until: int, timeout: float = 10.0) -> list[dict]:
    out: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(out) < until and time.monotonic() < deadline:
        out += [json.loads(r.value) for r in task.poll() or ()]
    return out


def test_each_task_writes_its_own_sequence_and_stops_at_max_messages():
    connector = DataGenSourceConnector()
    connector.start({"topic": "seq", "throughput": "-1", "max.messages": "25"})
    configs = connector.task_configs(3)
    assert [c["task.id"] for c in configs] == ["0", "1", "2"]

    task = started(configs[1])
    values = drain(task, 25)
    assert values == [{"task": 1, "seqno": n} for n in range(25)]
    assert task.poll() is None  # done: it idles
    record = task._record(3, 0)
    assert record.topic == "seq" and record.source_partition == {"task": 1}
    assert record.source_offset == {"seqno": 3} and record.key is None


def test_a_restarted_task_carries_on_after_its_committed_seqno():
    task = started({"topic": "seq", "throughput": "-1", "max.messages": "10", "task.id": "0"},
                   stored={0: {"seqno": 6}})
    assert drain(task, 3) == [{"task": 0, "seqno": n} for n in (7, 8, 9)]


def test_throughput_bounds_what_one_poll_returns():
    task = started({"topic": "seq", "throughput": "5", "task.id": "0"})
    first = task.poll() or []
    assert 1 <= len(first) <= 5  # one second's worth at most, however long since start


def test_a_bad_config_names_the_key():
    with pytest.raises(ConfigError, match="throughput"):
        DataGenSourceConnector().start({"topic": "seq", "throughput": "-2"})
