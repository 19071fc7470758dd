"""A sink for tests that run a worker in its own process: it appends every record's value
as a JSON line to `path`, and can fail its first puts with a retriable error."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kctl.api import ConfigDef, ConfigType, RetriableError, SinkConnector, SinkRecord, SinkTask
from kctl.api.data import Struct


class JsonLinesSinkConnector(SinkConnector):
    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("path", ConfigType.STRING, doc="File the values are appended to")
                .define("fail.first.puts", ConfigType.INT, 0,
                        doc="How many puts fail with a RetriableError first"))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[SinkTask]:
        return JsonLinesSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


def _plain(v: Any) -> Any:
    return v.to_dict() if isinstance(v, Struct) else v


class JsonLinesSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.path = props["path"]
        self.fail_left = int(props.get("fail.first.puts", 0))
        self.puts = 0

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:
            return
        self.puts += 1
        if self.fail_left > 0:
            self.fail_left -= 1
            raise RetriableError(f"put #{self.puts} fails on purpose")
        with open(self.path, "a") as f:
            f.writelines(json.dumps(_plain(r.value), sort_keys=True) + "\n" for r in records)

    def stop(self) -> None:
        pass
