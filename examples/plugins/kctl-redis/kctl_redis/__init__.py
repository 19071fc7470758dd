"""RedisSink: records as Redis keys, so a replay leaves the same state.

Each record sets the key made from its record key (a string as it is; bytes as they are;
anything else as canonical JSON) to its value (bytes as they are, strings as UTF-8,
anything else, a Struct included, as JSON); a tombstone (null value) deletes the key. One
`put` is one MULTI/EXEC transaction, applied in the log's order, and SET and DEL of a
key's last value are idempotent: replaying records after `kill -9` (their offsets were not
committed) ends in the state the first delivery left. Config names follow the Redis sink
of Kafka Connect's ecosystem where they fit (`redis.hosts`, `redis.database`,
`redis.password`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from kctl.api import (
    ConfigDef,
    ConfigType,
    DataError,
    Importance,
    RetriableError,
    SinkConnector,
    SinkRecord,
    SinkTask,
    Struct,
    Task,
    ValidString,
)

__version__ = "0.1.0"

CONFIG = (
    ConfigDef()
    .define("redis.hosts", ConfigType.LIST, "127.0.0.1:6379", importance=Importance.HIGH,
            doc="The Redis server as host:port (the first of the list).", group="Redis")
    .define("redis.database", ConfigType.INT, 0, importance=Importance.MEDIUM,
            doc="Database number.", group="Redis")
    .define("redis.password", ConfigType.PASSWORD, "", importance=Importance.LOW,
            doc="Password (AUTH), if the server asks for one.", group="Redis")
    .define("redis.key.prefix", ConfigType.STRING, "", importance=Importance.MEDIUM,
            doc="Put before every key (a namespace per connector).", group="Redis")
    .define("redis.value.format", ConfigType.STRING, "auto",
            ValidString.in_("auto", "json", "bytes"), Importance.MEDIUM,
            "auto: bytes and strings as they are, anything else as JSON; json: every value "
            "as JSON; bytes: only bytes and strings are accepted.", group="Redis")
)


def _plain(value: Any) -> Any:
    """A Struct as a dict (recursively), bytes as text, for JSON."""
    if isinstance(value, Struct):
        return {f.name: _plain(value.get(f.name)) for f in value.schema.fields}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value


def redis_key(prefix: str, key: Any) -> bytes:
    if key is None:
        raise DataError("a record without a key has no Redis key")
    if isinstance(key, bytes):
        raw = key
    elif isinstance(key, str):
        raw = key.encode()
    else:
        raw = json.dumps(_plain(key), sort_keys=True, separators=(",", ":")).encode()
    return prefix.encode() + raw


def redis_value(fmt: str, value: Any) -> bytes:
    if fmt != "json" and isinstance(value, bytes):
        return value
    if fmt != "json" and isinstance(value, str):
        return value.encode()
    if fmt == "bytes":
        raise DataError(f"redis.value.format=bytes takes bytes or strings, not "
                        f"{type(value).__name__}")
    return json.dumps(_plain(value), separators=(",", ":"), default=str).encode()


class RedisSinkConnector(SinkConnector):
    def version(self) -> str:
        return __version__

    def config(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        CONFIG.parse(props)
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return RedisSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # keys are partitioned by record key, so tasks never write the same key
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


class RedisSinkTask(SinkTask):
    def version(self) -> str:
        return __version__

    def start(self, props: Mapping[str, str]) -> None:
        cfg = CONFIG.parse(props)
        host, _, port = cfg["redis.hosts"][0].rpartition(":")
        password = cfg["redis.password"]
        self.redis = redis.Redis(host=host or "127.0.0.1", port=int(port or 6379),
                                 db=cfg["redis.database"],
                                 password=(password.value() if password else None) or None)
        self.prefix = cfg["redis.key.prefix"]
        self.format = cfg["redis.value.format"]
        self.reporter = self.context.errant_record_reporter()

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:
            return
        pipe = self.redis.pipeline(transaction=True)
        for r in records:
            try:
                key = redis_key(self.prefix, r.key)
                value = None if r.value is None else redis_value(self.format, r.value)
            except DataError as e:
                if self.reporter is None:
                    raise
                self.reporter.report(r, e)  # tolerance and the DLQ decide
                continue
            if value is None:
                pipe.delete(key)
            else:
                pipe.set(key, value)
        try:
            pipe.execute()
        except (redis.ConnectionError, redis.TimeoutError) as e:
            # the runtime puts the same batch again after a backoff
            raise RetriableError(f"Redis unavailable: {e}") from e

    def stop(self) -> None:
        redis_client = getattr(self, "redis", None)
        if redis_client is not None:
            redis_client.close()
