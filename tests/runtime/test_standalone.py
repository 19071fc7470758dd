"""A standalone worker on the embedded log, driven through the Herder like REST does.

Pure-Python test connectors (tests/support/connectors.py) keep these fast; the Spark file
connectors have their own end-to-end tests.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import httpx
import pytest
from support import connectors as sc
from support import reconfig_connectors as rc
from support.waiting import wait_until

from kctl.api import ConfigDef, SourceConnector, SourceRecord, SourceTask
from kctl.errors import AlreadyExistsError, ConflictError, NotFoundError, ValidationError
from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig
from kctl.states import State, TargetState

SOURCE = "support.connectors.CounterSourceConnector"
SINK = "support.connectors.CollectingSinkConnector"


@pytest.fixture
def make_worker(tmp_path):
    workers: list[StandaloneWorker] = []

    def make(**overrides) -> StandaloneWorker:
        cfg = WorkerConfig({"state.dir": str(tmp_path / "state"),
                            "listeners": "http://127.0.0.1:0",
                            "offset.flush.interval.ms": 100, **overrides})
        w = StandaloneWorker(cfg)
        w.start()
        workers.append(w)
        return w

    yield make
    for w in workers:
        w.stop()


def uniq(name: str, request) -> str:
    return f"{name}-{request.node.name[:40]}".replace("[", "-").replace("]", "")


def states(herder, name):
    s = herder.connector_status(name)
    return s.state, tuple(t.state for t in s.tasks)


def test_source_to_sink_through_the_embedded_log(make_worker, request):
    h = make_worker().herder
    topic, src, snk = uniq("t", request), uniq("src", request), uniq("snk", request)
    h.create_connector(src, {"connector.class": SOURCE, "topic": topic, "count": 500,
                             "tasks.max": 2})
    h.create_connector(snk, {"connector.class": SINK, "topics": topic})
    wait_until(lambda: len(sc.SINK_RECEIVED[snk]) >= 1000, message="1000 records in the sink")
    values = sorted(v for *_, v in sc.SINK_RECEIVED[snk])
    assert values == sorted([i for i in range(500)] + [1_000_000 + i for i in range(500)])
    assert states(h, src) == (State.RUNNING, (State.RUNNING, State.RUNNING))
    # source offsets are committed for acknowledged records only, per source partition
    wait_until(lambda: sorted((o["partition"]["task"], o["offset"]["i"])
                              for o in h.connector_offsets(src)) == [(0, 499), (1, 499)],
               message="source offsets committed")
    assert h.connector_topics(src) == [topic]
    # an offset commit may land between puts: wait for the one that covers every record
    wait_until(lambda: sum(o["offset"]["kafka_offset"] for o in h.connector_offsets(snk)) == 1000,
               message="sink offsets committed for all 1000 records")


def test_pause_resume_stop_and_offsets_only_when_stopped(make_worker, request):
    h = make_worker().herder
    topic, src = uniq("t", request), uniq("src", request)
    h.create_connector(src, {"connector.class": SOURCE, "topic": topic, "count": 50})
    wait_until(lambda: states(h, src) == (State.RUNNING, (State.RUNNING,)))
    h.pause_connector(src)
    wait_until(lambda: states(h, src) == (State.PAUSED, (State.PAUSED,)), message="paused")
    h.resume_connector(src)
    wait_until(lambda: states(h, src) == (State.RUNNING, (State.RUNNING,)), message="resumed")
    with pytest.raises(ConflictError, match="STOPPED"):
        h.alter_connector_offsets(src, [{"partition": {"task": 0}, "offset": {"i": 5}}])
    h.stop_connector(src)
    wait_until(lambda: states(h, src) == (State.STOPPED, ()), message="stopped, no tasks")
    h.alter_connector_offsets(src, [{"partition": {"task": 0}, "offset": {"i": 9}}])
    assert h.connector_offsets(src) == [{"partition": {"task": 0}, "offset": {"i": 9}}]
    h.reset_connector_offsets(src)
    assert h.connector_offsets(src) == []


def test_task_failure_is_reported_with_its_trace_and_restart_only_failed(make_worker, request):
    h = make_worker().herder
    topic, src = uniq("t", request), uniq("src", request)
    h.create_connector(src, {"connector.class": SOURCE, "topic": topic, "count": 100,
                             "fail.at": 30})
    status = wait_until(lambda: (s := h.connector_status(src)).tasks[0].state is State.FAILED
                        and s, message="task FAILED")
    assert status.state is State.RUNNING
    assert "RuntimeError: boom at 30" in status.tasks[0].trace
    starts = sc.TASK_STARTS[src]
    h.patch_connector_config(src, {"fail.at": None})
    wait_until(lambda: h.connector_status(src).tasks[0].state is State.RUNNING)
    assert sc.TASK_STARTS[src] == starts + 1
    # records before the failure were acknowledged, so their offsets were kept
    wait_until(lambda: h.connector_offsets(src) == [{"partition": {"task": 0},
                                                     "offset": {"i": 99}}])


def test_restart_include_tasks_only_failed(make_worker, request):
    h = make_worker().herder
    topic, src = uniq("t", request), uniq("src", request)
    h.create_connector(src, {"connector.class": SOURCE, "topic": topic, "count": 100,
                             "fail.at": 10})
    wait_until(lambda: h.connector_status(src).tasks[0].state is State.FAILED)
    result = h.restart_connector(src, include_tasks=True, only_failed=True)
    assert result is not None
    wait_until(lambda: h.connector_status(src).tasks[0].state is State.FAILED,
               message="fails again at the same record")
    assert sc.TASK_STARTS[src] == 2


def test_retriable_put_failures_are_retried_without_loss(make_worker, request):
    h = make_worker().herder
    topic, src, snk = uniq("t", request), uniq("src", request), uniq("snk", request)
    h.create_connector(snk, {"connector.class": SINK, "topics": topic, "fail.first.puts": 3})
    h.create_connector(src, {"connector.class": SOURCE, "topic": topic, "count": 200})
    wait_until(lambda: len(sc.SINK_RECEIVED[snk]) >= 200, message="all records despite failures")
    assert sorted(v for *_, v in sc.SINK_RECEIVED[snk]) == list(range(200))
    assert sc.SINK_PUT_CALLS[snk] > 3
    assert h.connector_status(snk).tasks[0].state is State.RUNNING


def test_configs_target_states_and_offsets_survive_a_restart(make_worker, request):
    topic, src, paused = uniq("t", request), uniq("src", request), uniq("p", request)
    w1 = make_worker()
    w1.herder.create_connector(src, {"connector.class": SOURCE, "topic": topic, "count": 40})
    w1.herder.create_connector(paused, {"connector.class": SOURCE, "topic": topic, "count": 5},
                               TargetState.PAUSED)
    wait_until(lambda: w1.herder.connector_offsets(src) == [
        {"partition": {"task": 0}, "offset": {"i": 39}}], message="offsets committed")
    w1.stop()
    w2 = make_worker()
    h = w2.herder
    assert sorted(h.connectors()) == sorted([src, paused])
    wait_until(lambda: states(h, paused) == (State.PAUSED, (State.PAUSED,)))
    wait_until(lambda: states(h, src) == (State.RUNNING, (State.RUNNING,)))
    # the task resumed from its stored offset: nothing new to produce
    assert h.connector_offsets(src) == [{"partition": {"task": 0}, "offset": {"i": 39}}]


def test_invalid_configs_are_rejected_with_per_field_errors(make_worker):
    h = make_worker().herder
    with pytest.raises(ValidationError) as e:
        h.create_connector("bad", {"connector.class": SOURCE, "tasks.max": "0", "count": "x"})
    assert set(e.value.errors) >= {"tasks.max", "count", "topic"}
    with pytest.raises(ValidationError) as e:
        h.create_connector("bad", {"connector.class": "NoSuchThing"})
    assert "FileSource" in e.value.errors["connector.class"][0]
    with pytest.raises(ValidationError) as e:
        h.create_connector("bad-sink", {"connector.class": SINK})
    assert "topics" in e.value.errors
    assert h.connectors() == []


def test_duplicate_names_missing_connectors_and_delete(make_worker, request):
    h = make_worker().herder
    topic, src = uniq("t", request), uniq("src", request)
    h.create_connector(src, {"connector.class": SOURCE, "topic": topic})
    with pytest.raises(AlreadyExistsError):
        h.create_connector(src, {"connector.class": SOURCE, "topic": topic})
    with pytest.raises(NotFoundError):
        h.connector_status("nope")
    h.delete_connector(src)
    assert h.connectors() == []
    with pytest.raises(NotFoundError):
        h.connector_info(src)


def test_config_update_reconfigures_tasks(make_worker, request):
    h = make_worker().herder
    topic, src = uniq("t", request), uniq("src", request)
    h.create_connector(src, {"connector.class": SOURCE, "topic": topic, "tasks.max": 1})
    assert h.connector_info(src).tasks == (0,)
    created, info = h.put_connector_config(src, {"connector.class": SOURCE, "topic": topic,
                                                 "tasks.max": 3})
    assert not created and info.tasks == (0, 1, 2)
    wait_until(lambda: states(h, src) == (State.RUNNING, (State.RUNNING,) * 3))


SHARDED = "support.reconfig_connectors.ShardedSourceConnector"


def test_request_task_reconfiguration_restarts_the_tasks_with_new_configs(make_worker, request):
    h = make_worker().herder
    name = uniq("sharded", request)
    h.create_connector(name, {"connector.class": SHARDED, "topic": uniq("t", request),
                              "tasks.max": 4})
    wait_until(lambda: states(h, name) == (State.RUNNING, (State.RUNNING,)), message="1 task")
    assert [(s["shard"], s["of"]) for s in rc.TASK_STARTS[name]] == [("0", "1")]

    rc.RUNNING[name].reshard(3)  # the connector asks; nobody calls the herder
    wait_until(lambda: states(h, name) == (State.RUNNING, (State.RUNNING,) * 3),
               message="3 tasks RUNNING")
    assert [(c["shard"], c["of"]) for c in h.task_configs(name)] == [
        ("0", "3"), ("1", "3"), ("2", "3")]
    # every task started with the new configs, task 0 too (restarted, not kept)
    wait_until(lambda: len(rc.TASK_STARTS[name]) == 4, message="3 task starts")
    assert sorted((s["shard"], s["of"]) for s in rc.TASK_STARTS[name][1:]) == [
        ("0", "3"), ("1", "3"), ("2", "3")]

    rc.RUNNING[name].reshard(3)  # the same task configs: nothing restarts
    rc.RUNNING[name].reshard(9)  # capped by tasks.max=4
    wait_until(lambda: len(h.task_configs(name)) == 4, message="4 task configs")
    wait_until(lambda: states(h, name) == (State.RUNNING, (State.RUNNING,) * 4))
    wait_until(lambda: len(rc.TASK_STARTS[name]) == 8, message="4 more task starts")
    assert sorted((s["shard"], s["of"]) for s in rc.TASK_STARTS[name][4:]) == [
        ("0", "4"), ("1", "4"), ("2", "4"), ("3", "4")]


# -- a task that ignores stop() ------------------------------------------------------------------

IN_POLL = threading.Event()
RELEASE = threading.Event()
POLLS: list[str] = []  # names of the threads that entered poll(), in order


class StuckSourceTask(SourceTask):
    """poll() blocks until the test releases it, whatever stop() says."""

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        POLLS.append(threading.current_thread().name)
        IN_POLL.set()
        RELEASE.wait(60)
        return None

    def stop(self) -> None:
        pass  # ignores the request, as a task blocked in a driver call would


class StuckSourceConnector(SourceConnector):
    def config(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[SourceTask]:
        return StuckSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


def test_a_task_that_ignores_stop_is_abandoned_after_the_graceful_timeout(make_worker, request,
                                                                           caplog):
    w = make_worker(**{"task.shutdown.graceful.timeout.ms": 400})
    h = w.herder
    stuck = uniq("stuck", request)
    h.create_connector(stuck, {"connector.class": f"{__name__}.StuckSourceConnector"})
    try:
        assert IN_POLL.wait(20), "the stuck task never polled"
        deleting = threading.Thread(target=h.delete_connector, args=(stuck,))
        deleting.start()
        deleting.join(15)
        assert not deleting.is_alive(), "delete waited for a task that never stops"
        # it waited the graceful timeout, then gave up on the task
        assert f"Task {stuck}-0 did not stop within 0.4s; abandoning its thread" in caplog.text
        # abandoned, not killed: its thread is still blocked in poll()
        assert any(t.name.startswith(f"task-{stuck}") and t.is_alive()
                   for t in threading.enumerate())
        assert h.connectors() == []

        # the worker goes on serving: REST answers and a new connector runs
        assert httpx.get(f"{w.rest.url}/health", timeout=5).json()["status"] == "healthy"
        other = uniq("after", request)
        h.create_connector(other, {"connector.class": SOURCE, "topic": uniq("t", request),
                                   "count": 10})
        wait_until(lambda: states(h, other) == (State.RUNNING, (State.RUNNING,)))
        wait_until(lambda: h.connector_offsets(other) == [
            {"partition": {"task": 0}, "offset": {"i": 9}}], message="it produced everything")
    finally:
        RELEASE.set()


def test_an_abandoned_task_ending_later_does_not_overwrite_its_successor(make_worker, request):
    """task 0 ignores stop; a restart abandons it and starts a new task 0. When the old
    thread finally ends it must not report UNASSIGNED over the new task's RUNNING."""
    RELEASE.clear()
    IN_POLL.clear()
    POLLS.clear()
    w = make_worker(**{"task.shutdown.graceful.timeout.ms": 200})
    h = w.herder
    stuck = uniq("stuck", request)
    h.create_connector(stuck, {"connector.class": f"{__name__}.StuckSourceConnector"})
    try:
        assert IN_POLL.wait(20), "the stuck task never polled"
        old = [t for t in threading.enumerate() if t.name.startswith(f"task-{stuck}")]
        h.restart_task(stuck, 0)
        wait_until(lambda: len(POLLS) >= 2, message="the new task 0 polls")
        wait_until(lambda: states(h, stuck) == (State.RUNNING, (State.RUNNING,)))
        RELEASE.set()  # both threads leave poll(); the old one sees its stop and ends
        for t in old:
            t.join(10)
            assert not t.is_alive()
        assert states(h, stuck) == (State.RUNNING, (State.RUNNING,))
    finally:
        RELEASE.set()
        h.delete_connector(stuck)
