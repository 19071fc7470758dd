"""The files `kctl plugins new` writes: a pip-installable connector package, as text.

Templates, not imports: the CLI stays free of the runtime. `@Camel@`, `@pkg@`, `@dist@`
and `@alias@` are filled in; docs/developer-guide.md walks through what they become.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "@dist@"
version = "0.1.0"
description = "@Camel@@Kind@: a kctl @kind@ connector"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["kctl"]

[project.optional-dependencies]
test = ["pytest>=8"]

# how a kctl worker finds the connector: `connector.class` may be the alias on the left
[project.entry-points."kctl.connectors"]
@alias@ = "@pkg@:@Camel@@Kind@Connector"

[tool.setuptools]
packages = ["@pkg@"]
'''

README = '''\
# @dist@

A kctl @kind@ connector (`@alias@`), made with `kctl plugins new`.

    pip install -e '.[test]'     # the worker finds it through its entry point
    kctl plugins list --local    # shows @alias@
    pytest                       # its tests run it on kctl.testing's harness

Run it on a standalone worker:

    kctl worker start worker.yaml @pkg@.json

where `@pkg@.json` is

    {"name": "@pkg@", "config": {"connector.class": "@alias@", @example_config@}}

See kctl's docs/developer-guide.md for what each part does.
'''

SOURCE = '''\
"""@Camel@Source: reads streams and writes each record to a topic.

It counts, so that it runs as it is: replace `_read` with reads from your system and keep
the shape, one source partition per stream and the position in it as the offset, and a
restarted task carries on where the last committed offset says.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from kctl.api import (
    ConfigDef,
    ConfigType,
    Importance,
    NonEmptyString,
    Range,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    partition_key,
)
from kctl.api.data import STRING_SCHEMA

__version__ = "0.1.0"
TASK_STREAMS = "task.streams"  # which streams one task reads (set by task_configs)

CONFIG = (
    ConfigDef()
    .define("topic", ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="Topic the records are written to.", group="@Camel@")
    .define("streams", ConfigType.LIST, "default", importance=Importance.HIGH,
            doc="Streams to read; the tasks share them.", group="@Camel@")
    .define("max.records", ConfigType.INT, -1, Range.at_least(-1), Importance.MEDIUM,
            "Records per stream, then it idles (-1: never stops).", group="@Camel@")
    .define("batch.size", ConfigType.INT, 100, Range.at_least(1), Importance.LOW,
            "Most records one poll returns.", group="@Camel@")
    .define("poll.interval.ms", ConfigType.INT, 1000, Range.at_least(0), Importance.LOW,
            "How long a poll with nothing to read waits.", group="@Camel@")
)


class @Camel@SourceConnector(SourceConnector):
    """Splits the streams over the tasks; moves no data itself."""

    def version(self) -> str:
        return __version__

    def config(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self.streams = CONFIG.parse(props)["streams"]

    def task_class(self) -> type[Task]:
        return @Camel@SourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        groups = [self.streams[i::max_tasks] for i in range(max_tasks)]
        return [{**self.props, TASK_STREAMS: ",".join(g)} for g in groups if g]

    def stop(self) -> None:
        pass


class @Camel@SourceTask(SourceTask):
    def version(self) -> str:
        return __version__

    def start(self, props: Mapping[str, str]) -> None:
        cfg = CONFIG.parse(props)
        self.topic = cfg["topic"]
        self.max_records = cfg["max.records"]
        self.batch_size = cfg["batch.size"]
        self.idle_s = cfg["poll.interval.ms"] / 1000
        self.streams = props[TASK_STREAMS].split(",")
        self.stopping = threading.Event()
        # where each stream goes on: one read of the committed offsets for all of them
        partitions = [{"stream": s} for s in self.streams]
        stored = self.context.offset_storage_reader.offsets(partitions)
        self.next = {p["stream"]: (stored.get(partition_key(p)) or {}).get("position", -1) + 1
                     for p in partitions}

    def poll(self) -> Sequence[SourceRecord] | None:
        records = [r for s in self.streams for r in self._read(s)]
        if not records:
            self.stopping.wait(self.idle_s)  # nothing now: do not spin
        return records

    def _read(self, stream: str) -> list[SourceRecord]:
        start = self.next[stream]
        end = start + self.batch_size
        if self.max_records >= 0:
            end = min(end, self.max_records)
        self.next[stream] = max(start, end)
        return [SourceRecord(self.topic, None, STRING_SCHEMA, stream, STRING_SCHEMA,
                             f"{stream}-{position}", source_partition={"stream": stream},
                             source_offset={"position": position})
                for position in range(start, end)]

    def stop(self) -> None:
        self.stopping.set()
'''

SOURCE_TEST = '''\
"""@Camel@Source on kctl's harness: the real runtime in-process, turned by the test."""

from kctl.testing import ConnectorHarness, assert_delivered

from @pkg@ import @Camel@SourceConnector

CONFIG = {"topic": "out", "streams": "a,b,c", "max.records": "5", "poll.interval.ms": "0",
          "value.converter": "StringConverter", "key.converter": "StringConverter"}
EXPECTED = [f"{s}-{i}" for s in "abc" for i in range(5)]


def test_the_streams_are_shared_by_the_tasks_and_each_record_written_once():
    with ConnectorHarness(@Camel@SourceConnector, CONFIG, tasks_max=2) as h:
        h.start()
        assert [c["task.streams"] for c in h.task_configs] == ["a,c", "b"]
        h.run_until(lambda: len(h.written("out")) >= 15)
        written = h.written("out")
        assert_delivered(EXPECTED, [r.value for r in written])
        assert {r.key for r in written} == {"a", "b", "c"}


def test_a_crashed_task_resumes_without_losing_or_repeating_a_record():
    with ConnectorHarness(@Camel@SourceConnector, {**CONFIG, "batch.size": "2"}) as h:
        h.start()
        h.poll()
        h.commit()  # offsets of the first records committed
        h.poll()  # more written, not committed
        h.restart_tasks(crash=True)
        h.run_until(lambda: len(h.written("out")) >= 15)
        assert_delivered(EXPECTED, [r.value for r in h.written("out")])


def test_a_bad_config_is_reported_by_key():
    problems = {v.name: v.errors for v in @Camel@SourceConnector().validate(
        {"topic": "", "batch.size": "0"}) if v.errors}
    assert set(problems) == {"topic", "batch.size"}
'''

SINK = '''\
"""@Camel@Sink: writes each record as a JSON line to a file.

Replace the file with your system: `put` takes records, `flush` makes them durable, and
only offsets flushed are committed, so a restart delivers again what was not flushed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence

from kctl.api import (
    ConfigDef,
    ConfigType,
    Importance,
    NonEmptyString,
    OffsetAndMetadata,
    SinkConnector,
    SinkRecord,
    SinkTask,
    Task,
    TopicPartition,
)

__version__ = "0.1.0"

CONFIG = ConfigDef().define(
    "output.path", ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
    doc="File the records are appended to, one JSON line each.", group="@Camel@")


class @Camel@SinkConnector(SinkConnector):
    def version(self) -> str:
        return __version__

    def config(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        CONFIG.parse(props)
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return @Camel@SinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]  # one file: one writer

    def stop(self) -> None:
        pass


class @Camel@SinkTask(SinkTask):
    def version(self) -> str:
        return __version__

    def start(self, props: Mapping[str, str]) -> None:
        self.path = CONFIG.parse(props)["output.path"]
        self.pending: list[str] = []

    def put(self, records: Sequence[SinkRecord]) -> None:
        for r in records:
            self.pending.append(json.dumps(
                {"topic": r.topic, "partition": r.kafka_partition, "offset": r.kafka_offset,
                 "key": r.key, "value": r.value}, default=str))

    def flush(self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        if not self.pending:
            return
        with open(self.path, "a") as f:
            f.write("\\n".join(self.pending) + "\\n")
            f.flush()
            os.fsync(f.fileno())
        self.pending = []

    def stop(self) -> None:
        pass
'''

SINK_TEST = '''\
"""@Camel@Sink on kctl's harness: the real runtime in-process, turned by the test."""

import json

from kctl.testing import ConnectorHarness, assert_delivered

from @pkg@ import @Camel@SinkConnector


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_records_are_written_once_across_a_restart(tmp_path):
    out = tmp_path / "out.jsonl"
    config = {"topics": "in", "output.path": str(out), "value.converter": "JsonConverter",
              "value.converter.schemas.enable": "false"}
    with ConnectorHarness(@Camel@SinkConnector, config) as h:
        h.produce("in", [{"n": i} for i in range(10)])
        h.start()
        h.run_until(lambda: h.task().pending or lines(out))
        h.commit()  # flush, then the offsets of what was flushed
        assert h.sink_offsets("in") == {0: 10}
        h.restart_tasks()
        h.produce("in", [{"n": i} for i in range(10, 15)])
        h.run_until(lambda: h.task().pending)
        h.commit()
        assert_delivered(range(15), [line["value"]["n"] for line in lines(out)])


def test_the_output_path_is_required():
    problems = {v.name for v in @Camel@SinkConnector().validate({}) if v.errors}
    assert problems == {"output.path"}
'''

CONNECTOR_CONFIG = {
    "source": '"topic": "@pkg@", "streams": "a,b", "tasks.max": "2"',
    "sink": '"topics": "@pkg@", "output.path": "/tmp/@pkg@.jsonl"',
}


@dataclass(frozen=True)
class Names:
    """What one NAME becomes: the distribution, the package, the classes and the alias."""

    dist: str
    pkg: str
    camel: str
    kind: str  # "source" or "sink"

    @property
    def alias(self) -> str:
        return f"{self.camel}{self.kind.capitalize()}"

    def fill(self, text: str) -> str:
        for token, value in (("@example_config@", CONNECTOR_CONFIG[self.kind]),
                             ("@Camel@", self.camel), ("@pkg@", self.pkg),
                             ("@dist@", self.dist), ("@alias@", self.alias),
                             ("@Kind@", self.kind.capitalize()), ("@kind@", self.kind)):
            text = text.replace(token, value)
        return text


def names(name: str, kind: str) -> Names:
    """`weather-station` -> distribution weather-station, package weather_station,
    classes WeatherStationSourceConnector/Task, alias WeatherStationSource."""
    parts = [p for p in re.split(r"[^0-9A-Za-z]+", name) if p]
    if not parts or not parts[0][0].isalpha():
        raise ValueError(f"{name!r} does not make a package name: start with a letter")
    return Names(dist="-".join(p.lower() for p in parts), pkg="_".join(p.lower() for p in parts),
                 camel="".join(p[0].upper() + p[1:] for p in parts), kind=kind)


def files(n: Names) -> dict[str, str]:
    """Relative path -> content of the project."""
    code, test = (SOURCE, SOURCE_TEST) if n.kind == "source" else (SINK, SINK_TEST)
    return {"pyproject.toml": n.fill(PYPROJECT), "README.md": n.fill(README),
            f"{n.pkg}/__init__.py": n.fill(code), f"tests/test_{n.pkg}.py": n.fill(test)}
