"""DataGen: a sequence at a rate, that carries on from its committed offset after a restart,
and needs no Spark (its tasks never ask for a session)."""

from __future__ import annotations

import json
import time

import pytest

from kctl.connectors.datagen import DataGenSourceConnector, DataGenSourceTask
from kctl.errors import ConfigError
from kctl.testing import ConnectorHarness, assert_delivered


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


SEQ = {"topic": "seq", "throughput": "-1", "value.converter": "JsonConverter",
       "value.converter.schemas.enable": "false"}


def sequences(h: ConnectorHarness) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in h.written("seq"):
        value = json.loads(r.value)
        out.setdefault(value["task"], []).append(value["seqno"])
    return out


def test_each_task_writes_its_own_sequence_and_stops_at_max_messages():
    with ConnectorHarness(DataGenSourceConnector, {**SEQ, "max.messages": "25"},
                          tasks_max=3) as h:
        h.start()
        assert [c["task.id"] for c in h.task_configs] == ["0", "1", "2"]
        h.run_until(lambda: sum(map(len, sequences(h).values())) >= 75)
        assert h.poll(3) == 0  # done: the tasks idle
        assert sequences(h) == {t: list(range(25)) for t in range(3)}
        h.commit()
        assert h.source_offsets()[(("task", 1),)] == {"seqno": 24}
        record = h.task(1)._record(3, 0)
        assert record.topic == "seq" and record.source_partition == {"task": 1}
        assert record.source_offset == {"seqno": 3} and record.key is None


def test_a_restarted_task_carries_on_after_its_committed_seqno(tmp_path):
    with ConnectorHarness(DataGenSourceConnector, {**SEQ, "max.messages": "10"},
                          state_dir=tmp_path, worker={"exactly.once.source.support": "disabled"}) as h:
        h.start()
        h.run_until(lambda: len(h.written("seq")) >= 10)
        h.commit()
    # a worker started again on the same state: the task reads its committed offset
    with ConnectorHarness(DataGenSourceConnector, {**SEQ, "max.messages": "12"},
                          state_dir=tmp_path) as h:
        h.start()
        h.run_until(lambda: len(h.written("seq")) >= 12)
        assert_delivered(range(12), [json.loads(r.value)["seqno"] for r in h.written("seq")])


def test_after_a_crash_the_task_resumes_where_the_log_ends_not_where_offsets_were_committed():
    with ConnectorHarness(DataGenSourceConnector, {**SEQ, "max.messages": "40"}) as h:
        h.start()
        h.run_until(lambda: len(h.written("seq")) >= 10)
        h.commit()
        h.run_until(lambda: len(h.written("seq")) >= 40)  # written, offsets not committed
        h.restart_tasks(crash=True)
        h.poll(3)
        assert_delivered(range(40), [json.loads(r.value)["seqno"] for r in h.written("seq")])


def test_throughput_bounds_what_one_poll_returns():
    task = started({"topic": "seq", "throughput": "5", "task.id": "0"})
    first = task.poll() or []
    assert 1 <= len(first) <= 5  # one second's worth at most, however long since start


def test_a_bad_config_names_the_key():
    with pytest.raises(ConfigError, match="throughput"):
        DataGenSourceConnector().start({"topic": "seq", "throughput": "-2"})
