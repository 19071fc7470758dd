"""A sink for tests that run a worker in its own process: it appends every record's value
as a JSON line to `path`, and can fail its first puts with a retriable error. With
`record.origin` each line also says which task wrote it and where the record came from."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from kctl.api import ConfigDef, ConfigType, RetriableError, SinkConnector, SinkRecord, SinkTask
from kctl.api.data import Struct


class JsonLinesSinkConnector(SinkConnector):
    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("path", ConfigType.STRING, doc="File the values are appended to")
                .define("fail.first.puts", ConfigType.INT, 0,
                        doc="How many puts fail with a RetriableError first")
                .define("record.origin", ConfigType.BOOLEAN, False,
                        doc="Write {task, topic, partition, offset, value} per record"))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[SinkTask]:
        return JsonLinesSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.props, "task.index": str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass


def _plain(v: Any) -> Any:
    return v.to_dict() if isinstance(v, Struct) else v


class JsonLinesSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.path = props["path"]
        self.fail_left = int(props.get("fail.first.puts", 0))
        self.origin = str(props.get("record.origin", "false")).lower() == "true"
        self.index = int(props.get("task.index", 0))
        self.puts = 0

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:
            return
        self.puts += 1
        if self.fail_left > 0:
            self.fail_left -= 1
            raise RetriableError(f"put #{self.puts} fails on purpose")
        if self.origin:  # one write: tasks of other workers append to the same file
            lines = "".join(json.dumps({"task": self.index, "topic": r.topic,
                                        "partition": r.kafka_partition,
                                        "offset": r.kafka_offset, "value": _plain(r.value)})
                            + "\n" for r in records)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, lines.encode())
            finally:
                os.close(fd)
            return
        with open(self.path, "a") as f:
            f.writelines(json.dumps(_plain(r.value), sort_keys=True) + "\n" for r in records)

    def stop(self) -> None:
        pass
