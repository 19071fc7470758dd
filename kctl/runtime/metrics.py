"""The worker's metrics in Prometheus' text format (`GET /metrics`), named as Kafka Connect's.

Kafka Connect's JMX metrics reach Prometheus through the JMX exporter as
`kafka_connect_<group>_<attribute>` (`source-task-metrics` / `source-record-poll-total` ->
`kafka_connect_source_task_metrics_source_record_poll_total{connector, task}`); kctl uses
the same names, so dashboards built on them keep working. Nothing is counted here: when
Prometheus scrapes, the collector asks each task loop for a `TaskSnapshot` (its plain
`TaskCounters`, the error operator's `ErrorCounters`, its connector's own counters), so the
hot loops never call a metrics library. A registry per worker keeps workers in one process apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kctl.runtime.tasks.base import TaskSnapshot
from kctl.states import ConnectorStatus, State, TaskId

PREFIX = "kafka_connect_"
TASK = ["connector", "task"]


Family = CounterMetricFamily | GaugeMetricFamily


def _family(kind: type[Family], group: str, attribute: str, doc: str,
            labels: list[str]) -> Family:
    name = f"{PREFIX}{group}_{attribute}".replace("-", "_")
    if kind is CounterMetricFamily:
        name = name.removesuffix("_total")
    return kind(name, doc, labels=labels)


class TaskView(Protocol):
    """What the collector reads of a task loop: its counters, as one typed snapshot."""

    def snapshot(self) -> TaskSnapshot: ...


class WorkerView(Protocol):
    """What the collector reads of a worker (`kctl.runtime.worker.Worker`)."""

    @property
    def tasks(self) -> Mapping[TaskId, TaskView]: ...

    @property
    def connectors(self) -> Mapping[str, object]: ...

    @property
    def startups(self) -> Mapping[str, Mapping[str, int]]: ...


class StatusView(Protocol):
    """What the collector reads of a herder: the connectors and their states."""

    def connectors(self) -> list[str]: ...

    def connector_status(self, name: str) -> ConnectorStatus: ...


class WorkerCollector(Collector):
    """Reads one worker's tasks and statuses at scrape time. `worker` returns the Worker
    (None before it started); `status` the herder, for connector and task states."""

    def __init__(self, worker: Callable[[], WorkerView | None], herder: StatusView):
        self._worker = worker
        self._herder = herder

    def collect(self) -> Iterator[Metric]:
        worker = self._worker()
        tasks = dict(worker.tasks) if worker is not None else {}
        connectors = list(worker.connectors) if worker is not None else []
        yield from self._worker_metrics(connectors, len(tasks))
        yield from self._startups(worker.startups if worker is not None else None)
        yield from self._task_metrics({tid: wt.snapshot() for tid, wt in tasks.items()})
        yield from self._states()

    @staticmethod
    def _worker_metrics(connectors: list[str], tasks: int) -> Iterator[Metric]:
        g = "connect-worker-metrics"
        count = _family(GaugeMetricFamily, g, "connector-count", "Connectors run here", [])
        count.add_metric([], len(connectors))
        yield count
        count = _family(GaugeMetricFamily, g, "task-count", "Tasks run here", [])
        count.add_metric([], tasks)
        yield count
        rebalances = _family(CounterMetricFamily, "connect-worker-rebalance-metrics",
                             "completed-rebalances-total",
                             "Rebalances this worker completed (a standalone worker has none)",
                             [])
        rebalances.add_metric([], 0)
        yield rebalances

    @staticmethod
    def _startups(startups: Mapping[str, Mapping[str, int]] | None) -> Iterator[Metric]:
        """connector-startup-attempts-total and its kin: starts this worker tried, and how
        they ended (a task that fails later, in its thread, started)."""
        for kind in ("connector", "task"):
            counts = (startups or {}).get(kind, {})
            for outcome in ("attempts", "success", "failure"):
                family = _family(CounterMetricFamily, "connect-worker-metrics",
                                 f"{kind}-startup-{outcome}-total",
                                 f"{kind.capitalize()} starts on this worker: {outcome}", [])
                family.add_metric([], counts.get(outcome, 0))
                yield family

    @staticmethod
    def _task_metrics(tasks: Mapping[TaskId, TaskSnapshot]) -> Iterator[Metric]:
        C, G = CounterMetricFamily, GaugeMetricFamily
        families = {
            "poll": _family(C, "source-task-metrics", "source-record-poll-total",
                            "Records the source task's poll() returned", TASK),
            "write": _family(C, "source-task-metrics", "source-record-write-total",
                             "Records the source task sent to the log", TASK),
            "read": _family(C, "sink-task-metrics", "sink-record-read-total",
                            "Records the sink task read from the log", TASK),
            "send": _family(C, "sink-task-metrics", "sink-record-send-total",
                            "Records the sink task's put() took", TASK),
            "batches": _family(C, "connector-task-metrics", "batch-total",
                               "Batches the task handled", TASK),
            "batch_max": _family(G, "connector-task-metrics", "batch-size-max",
                                 "Largest batch the task handled", TASK),
            "batch_avg": _family(G, "connector-task-metrics", "batch-size-avg",
                                 "Records per batch, on average since the task started", TASK),
            "commits": _family(C, "connector-task-metrics", "offset-commit-completion-total",
                               "Offset commits that completed", TASK),
            "commit_fail": _family(C, "connector-task-metrics", "offset-commit-failure-total",
                                   "Offset commits that failed", TASK),
            "commit_s": _family(C, "connector-task-metrics", "offset-commit-seconds-total",
                                "Time spent committing offsets", TASK),
            "commit_max": _family(G, "connector-task-metrics", "offset-commit-max-time-ms",
                                  "Longest offset commit", TASK),
            "commit_avg": _family(G, "connector-task-metrics", "offset-commit-avg-time-ms",
                                  "Offset commit time, on average since the task started",
                                  TASK),
            "lag_max": _family(G, "sink-task-metrics", "sink-record-lag-max",
                               "Records the task is behind, on its furthest partition", TASK),
            "lag": _family(G, "sink-task-metrics", "partition-lag",
                           "Records the task is behind, per partition",
                           [*TASK, "topic", "partition"]),
            "stalled": _family(G, "connector-task-metrics", "stalled-since-ms",
                               "Since when the task has been unable to move records (its "
                               "consumer group hands it nothing, its producer delivers "
                               "nothing), ms since the epoch; 0: it is not stalled", TASK),
            "errors": _family(C, "task-error-metrics", "total-record-errors",
                              "Records that failed after any retries", TASK),
            "failures": _family(C, "task-error-metrics", "total-record-failures",
                                "Failed attempts to process a record, retries included", TASK),
            "retries": _family(C, "task-error-metrics", "total-retries",
                               "Retries of retriable failures", TASK),
            "logged": _family(C, "task-error-metrics", "total-errors-logged",
                              "Errors written to the log (errors.log.enable)", TASK),
            "last_error": _family(G, "task-error-metrics", "last-error-timestamp",
                                  "When the last record failed, ms since the epoch (0: never)",
                                  TASK),
            "skipped": _family(C, "task-error-metrics", "total-records-skipped",
                               "Records skipped under errors.tolerance=all", TASK),
            "dlq": _family(C, "task-error-metrics", "deadletterqueue-produce-requests",
                           "Records sent to the dead letter queue", TASK),
            "dlq_fail": _family(C, "task-error-metrics", "deadletterqueue-produce-failures",
                                "Dead letter queue writes that failed", TASK),
        }
        own: dict[str, Family] = {}
        for tid, c in sorted(tasks.items(), key=lambda kv: (kv[0].connector, kv[0].task)):
            labels = [tid.connector, str(tid.task)]
            if c.kind == "source":
                families["poll"].add_metric(labels, c.polled)
                families["write"].add_metric(labels, c.delivered)
            else:
                families["read"].add_metric(labels, c.polled)
                families["send"].add_metric(labels, c.delivered)
                families["lag_max"].add_metric(labels, max((n for *_, n in c.lag), default=0))
                for topic, partition, behind in c.lag:
                    families["lag"].add_metric([*labels, topic, str(partition)], behind)
            families["stalled"].add_metric(labels, c.stalled_since_ms)
            families["batches"].add_metric(labels, c.batches)
            families["batch_max"].add_metric(labels, c.batch_size_max)
            families["batch_avg"].add_metric(labels, c.polled / c.batches if c.batches else 0)
            families["commits"].add_metric(labels, c.commits - c.commit_failures)
            families["commit_fail"].add_metric(labels, c.commit_failures)
            families["commit_s"].add_metric(labels, c.commit_seconds)
            families["commit_max"].add_metric(labels, c.commit_seconds_max * 1000)
            families["commit_avg"].add_metric(
                labels, c.commit_seconds / c.commits * 1000 if c.commits else 0)
            e = c.errors
            families["errors"].add_metric(labels, e.errors)
            families["failures"].add_metric(labels, e.failures)
            families["retries"].add_metric(labels, e.retries)
            families["last_error"].add_metric(labels, e.last_error_ms)
            families["logged"].add_metric(labels, e.logged)
            families["skipped"].add_metric(labels, e.skipped)
            families["dlq"].add_metric(labels, e.dlq_requests)
            families["dlq_fail"].add_metric(labels, e.dlq_failures)
            for name, value in c.connector.items():
                if name not in own:  # e.g. FileSource's file-bytes-lost-total
                    own[name] = _family(C, "connector-task-metrics", name,
                                        "Counted by the connector's task", TASK)
                own[name].add_metric(labels, value)
        yield from families.values()
        yield from own.values()

    def _states(self) -> Iterator[Metric]:
        """Connector and task states as Kafka's `status` attribute: one series per state,
        1 for the current one."""
        herder = self._herder
        conn = _family(GaugeMetricFamily, "connector-metrics", "status",
                       "The connector's state (1 for the current one)", ["connector", "status"])
        task = _family(GaugeMetricFamily, "connector-task-metrics", "status",
                       "The task's state (1 for the current one)", [*TASK, "status"])
        try:
            names = herder.connectors()
        except Exception:
            names = []
        g = "connect-worker-metrics"
        by_state = {s: _family(GaugeMetricFamily, g,
                               f"connector-{s.value.lower()}-task-count",
                               f"The connector's tasks that are {s.value}", ["connector"])
                    for s in State}
        total = _family(GaugeMetricFamily, g, "connector-total-task-count",
                        "The connector's tasks", ["connector"])
        for name in names:
            try:
                st = herder.connector_status(name)
            except Exception:  # deleted while scraping
                continue
            for s in State:
                conn.add_metric([name, s.value.lower()], float(st.state is s))
            for t in st.tasks:
                for s in State:
                    task.add_metric([name, str(t.task), s.value.lower()], float(t.state is s))
            total.add_metric([name], len(st.tasks))
            for s, family in by_state.items():
                family.add_metric([name], sum(t.state is s for t in st.tasks))
        yield conn
        yield task
        yield total
        yield from by_state.values()


def worker_registry(worker: Callable[[], WorkerView | None],
                    herder: StatusView) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerCollector(worker, herder))
    return registry
