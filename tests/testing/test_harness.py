"""kctl.testing's harness: what a connector author's tests can say with it, each shown
once on small connectors written here, and each able to catch the mistake it is for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from kctl.api import (
    ConfigDef,
    ConfigType,
    RetriableError,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from kctl.api.data import STRING_SCHEMA
from kctl.states import State
from kctl.testing import ConnectorHarness, assert_delivered, delivery

STRINGS = {"key.converter": "StringConverter", "value.converter": "StringConverter"}


class LettersSourceConnector(SourceConnector):
    """One stream per letter in `letters`, `count` records each; `grow()` adds a letter
    and asks for a reconfiguration, as a source that found a new table would."""

    def config(self) -> ConfigDef:
        return (ConfigDef().define("topic", ConfigType.STRING)
                .define("letters", ConfigType.LIST, "a")
                .define("count", ConfigType.INT, 5))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self.letters = self.config().parse(props)["letters"]

    def grow(self, letter: str) -> None:
        self.letters = [*self.letters, letter]
        self.context.request_task_reconfiguration()

    def task_class(self) -> type[SourceTask]:
        return LettersSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.props, "task.letters": ",".join(self.letters[i::max_tasks])}
                for i in range(min(max_tasks, len(self.letters)))]

    def stop(self) -> None:
        pass


class LettersSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        parsed = LettersSourceConnector().config().parse(props)
        self.topic, self.count = parsed["topic"], parsed["count"]
        self.next = {}
        for letter in props["task.letters"].split(","):
            stored = self.context.offset_storage_reader.offset({"letter": letter})
            self.next[letter] = stored["i"] + 1 if stored else 0

    def poll(self) -> Sequence[SourceRecord]:
        out = []
        for letter, i in self.next.items():
            if i < self.count:  # one record per letter and poll
                out.append(SourceRecord(self.topic, None, STRING_SCHEMA, letter, STRING_SCHEMA,
                                        f"{letter}{i}", source_partition={"letter": letter},
                                        source_offset={"i": i}))
                self.next[letter] = i + 1
        return out

    def stop(self) -> None:
        pass


class KeepingSinkConnector(SinkConnector):
    """Keeps what it was given; only what `flush` saw counts as written."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[SinkTask]:
        return KeepingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


WRITTEN: list[str] = []


class KeepingSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.buffer: list[str] = []

    def put(self, records: Sequence[SinkRecord]) -> None:
        self.buffer += [r.value for r in records]

    def flush(self, current_offsets) -> None:
        WRITTEN.extend(self.buffer)
        self.buffer = []

    def stop(self) -> None:
        pass


def values(h: ConnectorHarness, topic: str = "out") -> list[str]:
    return [r.value for r in h.written(topic)]


def expected(letters: str, count: int = 5) -> list[str]:
    return [f"{letter}{i}" for letter in letters for i in range(count)]


def test_a_source_writes_decoded_records_and_commits_when_the_clock_says():
    with ConnectorHarness(LettersSourceConnector, {"topic": "out", "letters": "a,b", **STRINGS},
                          worker={"offset.flush.interval.ms": 10_000}) as h:
        h.start()
        h.run_until(lambda: len(h.written("out")) == 10)
        assert_delivered(expected("ab"), values(h))
        assert {(r.key, r.value) for r in h.written("out")} >= {("a", "a0"), ("b", "b4")}
        assert h.source_offsets() == {}, "the interval has not passed: nothing committed"
        h.clock.advance(10)
        h.poll()
        assert h.source_offsets() == {(("letter", "a"),): {"i": 4}, (("letter", "b"),): {"i": 4}}


def test_a_stopped_or_crashed_task_resumes_without_loss_or_duplicates():
    with ConnectorHarness(LettersSourceConnector, {"topic": "out", **STRINGS}) as h:
        h.start()
        h.poll(2)
        h.restart_tasks()  # a clean stop commits what was written
        h.poll()
        h.commit()
        h.poll()  # written, not committed
        h.restart_tasks(crash=True)  # the log's record of it keeps it from coming again
        h.run_until(lambda: len(h.written("out")) >= 5)
        h.poll(2)
        assert_delivered(expected("a"), values(h))


def test_the_comparison_catches_duplicates_a_crash_leaves_without_exactly_once():
    with ConnectorHarness(LettersSourceConnector, {"topic": "out", **STRINGS},
                          worker={"exactly.once.source.support": "disabled"}) as h:
        h.start()
        h.poll()
        h.commit()
        h.poll(2)
        h.restart_tasks(crash=True)
        h.poll(5)
        d = delivery(expected("a"), values(h))
        assert d.lost == () and d.duplicated == {"a1": 1, "a2": 1}
        with pytest.raises(AssertionError, match="2 duplicated"):
            assert_delivered(expected("a"), values(h))
        assert_delivered(expected("a"), values(h), duplicates_allowed=True)


def test_a_reconfiguration_the_connector_asks_for_gives_the_tasks_new_configs():
    with ConnectorHarness(LettersSourceConnector, {"topic": "out", "letters": "a", **STRINGS},
                          tasks_max=2) as h:
        h.start()
        assert len(h.task_configs) == 1
        h.run_until(lambda: len(h.written("out")) == 5)
        h.connector.grow("b")
        assert h.reconfiguration_requests == 1
        configs = h.reconfigure()
        assert [c["task.letters"] for c in configs] == ["a", "b"]
        h.run_until(lambda: len(h.written("out")) == 10)
        h.poll()
        assert_delivered(expected("ab"), values(h))


def test_a_retriable_poll_failure_is_retried_on_the_test_clock_and_loses_nothing():
    with ConnectorHarness(LettersSourceConnector, {"topic": "out", **STRINGS,
                                                   "errors.retry.timeout": 60_000}) as h:
        h.start()
        before = h.clock()
        h.inject(RetriableError("the system is busy"), into="poll", times=3)
        h.run_until(lambda: len(h.written("out")) == 5)
        assert h.task_state() is State.RUNNING
        assert h.clock() > before, "the backoffs moved the clock, nobody slept"
        assert_delivered(expected("a"), values(h))


def test_a_failure_that_is_not_retriable_fails_the_task_with_its_trace():
    with ConnectorHarness(LettersSourceConnector, {"topic": "out", **STRINGS}) as h:
        h.start()
        h.inject(RuntimeError("the disk is gone"), into="poll")
        h.poll()
        assert h.task_state() is State.FAILED
        assert "RuntimeError: the disk is gone" in h.task_trace()
        h.restart_tasks()
        assert h.task_state() is State.RUNNING


def test_a_sink_commits_only_what_it_flushed_and_a_restart_redelivers_the_rest():
    WRITTEN.clear()
    with ConnectorHarness(KeepingSinkConnector, {"topics": "in", **STRINGS}) as h:
        h.produce("in", [f"v{i}" for i in range(6)])
        h.start()
        h.run_until(lambda: h.task().buffer)
        h.commit()
        assert h.sink_offsets("in") == {0: 6} and len(WRITTEN) == 6
        h.produce("in", ["v6", "v7"])
        h.run_until(lambda: h.task().buffer)
        h.restart_tasks(crash=True)  # v6, v7 were never flushed
        h.run_until(lambda: h.task().buffer)
        h.commit()
        assert_delivered([f"v{i}" for i in range(8)], WRITTEN)


def test_a_retriable_put_failure_redelivers_the_batch():
    WRITTEN.clear()
    with ConnectorHarness(KeepingSinkConnector, {"topics": "in", **STRINGS}) as h:
        h.produce("in", ["x", "y"])
        h.start()
        h.inject(RetriableError("try again"), into="put", times=2)
        h.run_until(lambda: h.task().buffer)
        h.commit()
        assert h.task_state() is State.RUNNING
        assert_delivered(["x", "y"], WRITTEN)


def test_records_the_converter_cannot_read_go_to_the_dlq_when_tolerated():
    WRITTEN.clear()
    config = {"topics": "in", "value.converter": "JsonConverter",
              "value.converter.schemas.enable": "false", "errors.tolerance": "all",
              "errors.deadletterqueue.topic.name": "in-dlq",
              "errors.deadletterqueue.context.headers.enable": "true"}
    with ConnectorHarness(KeepingSinkConnector, config) as h:
        h.produce_raw("in", [b'"good"', b"{not json", b'"also good"'])
        h.start()
        h.run_until(lambda: h.task().buffer)
        h.commit()
        assert WRITTEN == ["good", "also good"]
        [dead] = h.dead_letters()
        assert dead["stage"] == "VALUE_CONVERTER" and dead["value"] == "{not json"
        assert h.sink_offsets("in") == {0: 3}


def test_without_tolerance_the_same_record_fails_the_task():
    with ConnectorHarness(KeepingSinkConnector, {"topics": "in", "value.converter": "JsonConverter"}) as h:
        h.produce_raw("in", [b"{not json"])
        h.start()
        h.run_until(lambda: h.task_state() is State.FAILED)
        assert "Tolerance exceeded" in h.task_trace()
