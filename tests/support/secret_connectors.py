"""A connector with a password, for the secrets tests: it proves what it was started with
without ever showing the password, and behaves as careless code does (logs the password,
fails with it in the message) so tests can check the worker hides it anyway."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping
from typing import Any

from kctl.api import ConfigDef, ConfigType, SourceConnector, SourceRecord, SourceTask

log = logging.getLogger(__name__)
_lock = threading.Lock()


def digest(secret: str) -> str:
    """What the probe file records: enough to compare, useless to read."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _probe(props: Mapping[str, str], line: str) -> None:
    path = props.get("probe.file")
    if path:
        with _lock, open(path, "a") as f:
            f.write(line + "\n")


class PasswordSourceConnector(SourceConnector):
    """`connection.password` is a PASSWORD; the probe file gets
    `connector <name> <sha256>` at start and `task <name>-<i> <sha256> <sha256>` (the
    password and the copy the connector put in the task config) at task start."""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("connection.user", ConfigType.STRING, "kctl", doc="User")
                .define("connection.password", ConfigType.PASSWORD, doc="Password")
                .define("probe.file", ConfigType.STRING, "", doc="Where starts are recorded")
                .define("fail.with.password", ConfigType.BOOLEAN, False,
                        doc="Tasks fail at start with the password in the message"))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        password = props["connection.password"]
        log.info("connector %s logs in as %s with password %s", props.get("name"),
                 props.get("connection.user", "kctl"), password)  # careless on purpose
        _probe(props, f"connector {props.get('name')} {digest(password)}")

    def task_class(self) -> type[SourceTask]:
        return PasswordSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # the copy under another key is what connectors do (e.g. a JDBC URL's options)
        return [{**self.props, "task.index": str(i),
                 "copied.secret": self.props["connection.password"]}
                for i in range(max_tasks)]

    def stop(self) -> None:
        pass


class PasswordSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        password = props["connection.password"]
        name = f"{props.get('name')}-{props.get('task.index')}"
        _probe(props, f"task {name} {digest(password)} {digest(props.get('copied.secret', ''))}")
        if str(props.get("fail.with.password", "")).lower() == "true":
            raise RuntimeError(f"login refused for password {password}")
        self._stop = threading.Event()

    def poll(self) -> list[SourceRecord] | None:
        self._stop.wait(0.05)
        return None

    def stop(self) -> None:
        stop: Any = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()


class CountingConfigProvider:
    """A user provider named by dotted path: answers `<path>/<key>` for every key and counts
    its calls (the transformer asks once per provider and path). Deliberately not a
    subclass of ConfigProvider: anything with get(path, keys) will do."""

    calls: list[tuple[str, frozenset[str]]] = []

    def configure(self, configs: Mapping[str, str]) -> None:
        self.prefix = configs.get("prefix", "")

    def get(self, path: str, keys: Any = None) -> dict[str, str]:
        CountingConfigProvider.calls.append((path, frozenset(keys or ())))
        return {k: f"{self.prefix}{path}/{k}" for k in keys or ()}

    def close(self) -> None:
        pass
