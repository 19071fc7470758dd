"""Config and status stores: what a worker needs to come back as it was after a restart."""

from __future__ import annotations

import pytest

from kctl.states import State, TargetState, TaskStatus
from kctl.storage.configs import (
    ConnectorConfigRemoved,
    ConnectorConfigUpdated,
    FileConfigBackingStore,
    MemoryConfigBackingStore,
    TargetStateChanged,
    TaskConfigsUpdated,
)
from kctl.storage.status import FileStatusBackingStore, MemoryStatusBackingStore


@pytest.fixture(params=["memory", "file"])
def configs(request, tmp_path):
    s = MemoryConfigBackingStore() if request.param == "memory" else \
        FileConfigBackingStore(tmp_path / "configs.json")
    s.start()
    return s


@pytest.fixture(params=["memory", "file"])
def statuses(request, tmp_path):
    s = MemoryStatusBackingStore(clock=lambda: 1000.0) if request.param == "memory" else \
        FileStatusBackingStore(tmp_path / "status.json", clock=lambda: 1000.0)
    s.start()
    return s


def test_a_connectors_life_in_the_config_store(configs):
    events = []
    configs.add_listener(events.append)
    configs.put_connector_config("src", {"connector.class": "FileSource", "tasks.max": "2"},
                                 TargetState.PAUSED)
    assert configs.connector_names() == ["src"]
    assert configs.target_state("src") is TargetState.PAUSED
    assert configs.task_configs("src") == []
    configs.put_task_configs("src", [{"file": "a"}, {"file": "b"}])
    assert configs.task_configs("src") == [{"file": "a"}, {"file": "b"}]
    configs.put_target_state("src", TargetState.STOPPED)
    configs.put_task_configs("src", [])
    assert configs.task_configs("src") == []
    snap = configs.snapshot()
    assert snap.target_state("src") is TargetState.STOPPED and snap.task_configs["src"] == ()
    configs.remove_connector("src")
    assert configs.connector_config("src") is None and configs.target_state("src") is None
    assert events == [TargetStateChanged("src"), ConnectorConfigUpdated("src"),
                      TaskConfigsUpdated("src", (0, 1)), TargetStateChanged("src"),
                      TaskConfigsUpdated("src", ()), ConnectorConfigRemoved("src")]


def test_values_are_copies_callers_cannot_change_the_store(configs):
    configs.put_connector_config("c", {"a": "1"})
    got = configs.connector_config("c")
    got["a"] = "changed"
    assert configs.connector_config("c") == {"a": "1"}
    assert configs.target_state("c") is TargetState.STARTED


def test_the_file_config_store_restores_everything_after_a_restart(tmp_path):
    path = tmp_path / "configs.json"
    s = FileConfigBackingStore(path)
    s.start()
    s.put_connector_config("a", {"k": "1"})
    s.put_task_configs("a", [{"t": "0"}, {"t": "1"}, {"t": "2"}])
    s.put_task_configs("a", [{"t": "x"}])  # shrinking leaves stale task records behind
    s.put_connector_config("b", {"k": "2"}, TargetState.PAUSED)
    s.put_connector_config("gone", {"k": "3"})
    s.remove_connector("gone")
    s.put_connector_config("c", {"k": "4"}, TargetState.STOPPED)

    again = FileConfigBackingStore(path)
    again.start()
    assert again.snapshot().connector_configs == s.snapshot().connector_configs
    assert again.connector_names() == ["a", "b", "c"]
    assert again.task_configs("a") == [{"t": "x"}]
    assert again.target_state("b") is TargetState.PAUSED
    assert again.target_state("c") is TargetState.STOPPED
    assert again.target_state("a") is TargetState.STARTED


def test_config_records_follow_kafka_connects_config_topic(tmp_path):
    import json

    s = FileConfigBackingStore(tmp_path / "c.json")
    s.start()
    s.put_connector_config("x", {"k": "v"}, TargetState.STOPPED)
    s.put_task_configs("x", [{"k": "v"}])
    records = dict(json.loads((tmp_path / "c.json").read_text())["records"])
    assert records == {
        "target-state-x": {"state": "STARTED", "state.v2": "STOPPED"},
        "connector-x": {"properties": {"k": "v"}},
        "task-x-0": {"properties": {"k": "v"}},
        "commit-x": {"tasks": 1},
    }


def test_a_listener_that_raises_does_not_break_the_store(configs):
    def broken(event):
        raise RuntimeError("boom")

    configs.add_listener(broken)
    configs.put_connector_config("c", {"a": "1"})
    assert configs.connector_config("c") == {"a": "1"}


# -- statuses -------------------------------------------------------------------------------


def test_statuses_of_a_connector_and_its_tasks(statuses):
    statuses.put_connector_state("c", State.RUNNING, "w1:8083")
    for i in range(3):
        statuses.put_task_state("c", i, State.RUNNING, "w1:8083")
    statuses.put_task_state("c", 1, State.FAILED, "w1:8083", "Traceback: boom")
    state, worker, trace = statuses.connector_state("c")
    assert (state, worker, trace) == (State.RUNNING, "w1:8083", None)
    assert statuses.task_state("c", 1) == (State.FAILED, "w1:8083", "Traceback: boom")
    assert [t.state for t in statuses.tasks("c")] == [State.RUNNING, State.FAILED, State.RUNNING]
    statuses.put_task(TaskStatus("c", 0, State.PAUSED, "w2:8083", None, 3))
    assert statuses.get_task("c", 0) == TaskStatus("c", 0, State.PAUSED, "w2:8083", None, 3)

    statuses.remove_tasks("c", keep=1)  # tasks.max went down to 1
    assert [t.task for t in statuses.tasks("c")] == [0]
    assert statuses.task_state("c", 2) is None


def test_connectors_with_similar_names_do_not_mix(statuses):
    statuses.put_task_state("a", 0, State.RUNNING, "w")
    statuses.put_task_state("a-1", 0, State.FAILED, "w")
    statuses.put_topic("a", "t1")
    statuses.put_topic("a-1", "t2")
    statuses.remove_connector("a")
    assert statuses.tasks("a") == []
    assert [t.state for t in statuses.tasks("a-1")] == [State.FAILED]
    assert statuses.topics("a-1") == {"t2"} and statuses.topics("a") == set()


def test_topics_a_connector_used_are_remembered_until_reset(statuses):
    statuses.put_topic("src", "orders")
    statuses.put_topic("src", "orders")
    statuses.put_topic("src", "refunds")
    assert statuses.topics("src") == {"orders", "refunds"}
    assert statuses.records()["status-topic-orders:connector-src"] == {
        "topic": {"name": "orders", "connector": "src", "task": 0, "discoverTimestamp": 1_000_000}}
    statuses.reset_topics("src")
    assert statuses.topics("src") == set()


def test_the_file_status_store_restores_statuses_after_a_restart(tmp_path):
    path = tmp_path / "status.json"
    s = FileStatusBackingStore(path)
    s.start()
    s.put_connector_state("c", State.PAUSED, "w")
    s.put_task_state("c", 0, State.FAILED, "w", "trace")
    s.put_topic("c", "t")
    again = FileStatusBackingStore(path)
    again.start()
    assert again.connector_state("c") == (State.PAUSED, "w", None)
    assert again.task_state("c", 0) == (State.FAILED, "w", "trace")
    assert again.topics("c") == {"t"}
    assert again.connectors() == ["c"]
