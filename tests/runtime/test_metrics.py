"""The worker's /metrics collector, read without a worker: Kafka Connect's per-task names
(connector-task-metrics averages, every task-error-metrics counter) from the plain counters
the loops keep."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.inprocess import running_worker
from support.waiting import wait_until

from kctl.errors import RetriableError
from kctl.runtime.error_handling import LogReporter, RetryWithToleranceOperator, Stage, Tolerance
from kctl.runtime.metrics import worker_registry
from kctl.runtime.tasks.base import TaskCounters, TaskSnapshot
from kctl.states import ConnectorStatus, ConnectorType, State, TaskId, TaskStatus


@dataclass
class Task:
    """A task loop as the collector sees it: counters and an error operator."""

    counters: TaskCounters
    operator: RetryWithToleranceOperator
    kind: Literal["source", "sink"]
    delivered: int = 0

    def snapshot(self) -> TaskSnapshot:
        return self.counters.snapshot(self.kind, delivered=self.delivered,
                                      errors=self.operator.counters())


@dataclass
class Worker:
    tasks: dict[TaskId, Task] = field(default_factory=dict)
    connectors: dict[str, object] = field(default_factory=dict)
    startups: dict[str, dict[str, int]] = field(default_factory=dict)


class NoConnectors:
    def connectors(self) -> list[str]:
        return []


def scrape(worker) -> dict:
    text = generate_latest(worker_registry(lambda: worker, NoConnectors())).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_a_sink_task_reports_batch_and_commit_averages_and_its_errors_as_kafka_names_them():
    now = [0.0]
    op = RetryWithToleranceOperator(
        connector="orders", task=0, retry_timeout_ms=10_000, tolerance=Tolerance.ALL,
        reporters=[LogReporter(include_messages=False)],
        clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    counters = TaskCounters()
    counters.batch(10)
    counters.batch(30)
    counters.committed(0.004, ok=True)
    counters.committed(0.002, ok=False)
    worker = Worker(tasks={TaskId("orders", 0): Task(counters, op, "sink", delivered=40)},
                    connectors={"orders": None})

    # a record that fails twice as retriable, then for good: one error, three failed attempts
    calls = iter([RetriableError("busy"), RetriableError("busy"), ValueError("bad")])

    def put() -> None:
        raise next(calls)

    op.execute(put, Stage.TASK_PUT, "OrdersSink")

    m = scrape(worker)
    t = (("connector", "orders"), ("task", "0"))
    k = "kafka_connect_"
    assert m[(k + "connector_task_metrics_batch_size_avg", t)] == 20
    assert m[(k + "connector_task_metrics_batch_size_max", t)] == 30
    assert m[(k + "connector_task_metrics_offset_commit_avg_time_ms", t)] == 3
    assert m[(k + "connector_task_metrics_offset_commit_max_time_ms", t)] == 4
    assert m[(k + "connector_task_metrics_offset_commit_failure_total", t)] == 1
    assert m[(k + "task_error_metrics_total_record_errors_total", t)] == 1
    assert m[(k + "task_error_metrics_total_record_failures_total", t)] == 3
    assert m[(k + "task_error_metrics_total_retries_total", t)] == 2
    assert m[(k + "task_error_metrics_total_records_skipped_total", t)] == 1
    assert m[(k + "task_error_metrics_total_errors_logged_total", t)] == 1
    assert m[(k + "task_error_metrics_last_error_timestamp", t)] > 1.7e12
    assert m[(k + "sink_task_metrics_sink_record_read_total", t)] == 40
    assert m[(k + "sink_task_metrics_sink_record_send_total", t)] == 40


def test_a_task_that_never_failed_reports_zeros_not_nothing():
    counters = TaskCounters()
    task = Task(counters, RetryWithToleranceOperator(connector="c", task=1), "source")
    worker = Worker(tasks={TaskId("c", 1): task}, connectors={"c": None})
    m = scrape(worker)
    t = (("connector", "c"), ("task", "1"))
    assert m[("kafka_connect_connector_task_metrics_batch_size_avg", t)] == 0
    assert m[("kafka_connect_connector_task_metrics_offset_commit_avg_time_ms", t)] == 0
    assert m[("kafka_connect_task_error_metrics_last_error_timestamp", t)] == 0
    assert m[("kafka_connect_source_task_metrics_source_record_poll_total", t)] == 0


def test_task_counts_per_state_come_from_the_statuses():
    class Herder:
        def connectors(self) -> list[str]:
            return ["orders", "gone"]

        def connector_status(self, name: str):
            if name == "gone":
                raise KeyError(name)  # deleted while scraping: left out, not an error
            tasks = tuple(TaskStatus(name, i, s, "w1")
                          for i, s in enumerate([State.RUNNING, State.RUNNING, State.FAILED]))
            return ConnectorStatus(name, State.RUNNING, "w1", ConnectorType.SOURCE, tasks)

    worker = Worker(startups={"connector": {"attempts": 2, "success": 1, "failure": 1}})
    text = generate_latest(worker_registry(lambda: worker, Herder())).decode()
    m = {(s.name, tuple(sorted(s.labels.items()))): s.value
         for f in text_string_to_metric_families(text) for s in f.samples}
    w = "kafka_connect_connect_worker_metrics_"
    c = (("connector", "orders"),)
    assert m[(w + "connector_total_task_count", c)] == 3
    assert m[(w + "connector_running_task_count", c)] == 2
    assert m[(w + "connector_failed_task_count", c)] == 1
    assert m[(w + "connector_paused_task_count", c)] == 0
    assert not any(dict(labels).get("connector") == "gone" for _, labels in m)
    assert m[(w + "connector_startup_failure_total", ())] == 1
    assert m[(w + "task_startup_attempts_total", ())] == 0, "none tried yet"


def test_a_live_worker_counts_the_connector_and_task_starts_it_tried(tmp_path):
    import httpx

    with running_worker(tmp_path / "state", {}) as w:
        w.herder.create_connector("c", {
            "connector.class": "support.connectors.CounterSourceConnector",
            "topic": "t", "count": 10**9, "poll.sleep.ms": 5, "tasks.max": 2})
        wait_until(lambda: (s := w.herder.connector_status("c")).tasks and
                   all(t.state is State.RUNNING for t in s.tasks),
                   message="both tasks RUNNING")

        def sample(name: str, labels: tuple = ()) -> float | None:
            text = httpx.get(f"{w.rest.url}/metrics", timeout=10).text
            return {(s.name, tuple(sorted(s.labels.items()))): s.value
                    for f in text_string_to_metric_families(text)
                    for s in f.samples}.get((name, labels))

        w_ = "kafka_connect_connect_worker_metrics_"
        assert sample(w_ + "connector_startup_attempts_total") == 1
        assert sample(w_ + "connector_startup_success_total") == 1
        assert sample(w_ + "task_startup_success_total") == 2
        assert sample(w_ + "task_startup_failure_total") == 0
        assert sample(w_ + "connector_running_task_count", (("connector", "c"),)) == 2
        wait_until(lambda: (sample("kafka_connect_source_task_metrics_source_record_poll_total",
                                   (("connector", "c"), ("task", "1"))) or 0) > 0,
                   message="task 1's polls counted")
