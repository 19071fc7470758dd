"""A consumer commit the group refuses (a rebalance under way, the member fenced out of its
generation) does not fail the sink task: the offsets stay uncommitted and the next commit
carries them, as in Kafka Connect. (It used to fail the task, and a failed task's consumer
leaving mid-rebalance could stall the group on the test broker: tests/distributed/
test_zombie.py.)"""

from __future__ import annotations

import logging

from kctl.api import TopicPartition
from kctl.errors import TransportError
from kctl.runtime.tasks.base import TaskCounters
from kctl.runtime.tasks.sink import WorkerSinkTask

TP = TopicPartition("t", 0)


class Consumer:
    def __init__(self, failures: int):
        self.failures = failures
        self.commits: list[dict] = []

    def commit(self, offsets):
        if self.failures:
            self.failures -= 1
            raise TransportError("offset commit failed: ILLEGAL_GENERATION")
        self.commits.append(dict(offsets))


class Task:
    def pre_commit(self, current):
        return current


def sink_task(consumer: Consumer) -> WorkerSinkTask:
    wt = object.__new__(WorkerSinkTask)  # only what _commit uses
    wt.id, wt.consumer, wt.task, wt.counters = "s-0", consumer, Task(), TaskCounters()
    wt.current, wt.committed = {TP: 10}, {TP: 0}
    return wt


def test_a_refused_commit_is_retried_by_the_next_one_not_fatal(caplog):
    consumer = Consumer(failures=1)
    wt = sink_task(consumer)
    with caplog.at_level(logging.WARNING):
        wt._commit(None)
    assert consumer.commits == [] and wt.committed == {TP: 0}
    assert "offset commit failed" in caplog.text
    assert wt.counters.commit_failures == 1
    wt.current[TP] = 12
    wt._commit(None)
    assert consumer.commits == [{TP: 12}] and wt.committed == {TP: 12}
