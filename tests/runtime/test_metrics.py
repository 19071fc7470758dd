"""The worker's /metrics collector, read without a worker: Kafka Connect's per-task names
(connector-task-metrics averages, every task-error-metrics counter) from the plain counters
the loops keep."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kctl.errors import RetriableError
from kctl.runtime.error_handling import LogReporter, RetryWithToleranceOperator, Stage, Tolerance
from kctl.runtime.metrics import worker_registry
from kctl.runtime.tasks.base import TaskCounters
from kctl.states import TaskId


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
    task = SimpleNamespace(counters=counters, operator=op, records_put=40)
    worker = SimpleNamespace(tasks={TaskId("orders", 0): task}, connectors={"orders": None})

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
    task = SimpleNamespace(counters=counters, records_sent=0,
                           operator=RetryWithToleranceOperator(connector="c", task=1))
    worker = SimpleNamespace(tasks={TaskId("c", 1): task}, connectors={"c": None})
    m = scrape(worker)
    t = (("connector", "c"), ("task", "1"))
    assert m[("kafka_connect_connector_task_metrics_batch_size_avg", t)] == 0
    assert m[("kafka_connect_connector_task_metrics_offset_commit_avg_time_ms", t)] == 0
    assert m[("kafka_connect_task_error_metrics_last_error_timestamp", t)] == 0
    assert m[("kafka_connect_source_task_metrics_source_record_poll_total", t)] == 0
