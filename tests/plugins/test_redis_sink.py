"""examples/plugins/kctl-redis: record keys become Redis keys, values JSON or bytes,
tombstones delete, and records delivered again after a crash leave the same state.

Against the Redis server on 127.0.0.1:6379 (scripts/test-deps.sh starts it); each test
writes under a key prefix of its own and removes its keys at the end.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from kctl_redis import RedisSinkConnector, redis_key
from support.updates import final_state, update
from support.waiting import wait_until
from support.worker import LISTENER, Worker

from kctl.api import SchemaBuilder, Struct
from kctl.api.data import INT32_SCHEMA, STRING_SCHEMA
from kctl.states import State
from kctl.testing import ConnectorHarness

PLUGINS = Path(__file__).resolve().parents[2] / "examples" / "plugins"
JSON_VALUES = {"key.converter": "StringConverter", "value.converter": "JsonConverter",
               "value.converter.schemas.enable": "false"}


@pytest.fixture
def prefix() -> Iterator[str]:
    p = f"kctl-test-{uuid.uuid4().hex[:8]}:"
    yield p
    r = redis.Redis()
    keys = list(r.scan_iter(f"{p}*"))
    if keys:
        r.delete(*keys)
    r.close()


def state(prefix: str) -> dict[str, bytes]:
    r = redis.Redis()
    try:
        return {k.decode()[len(prefix):]: r.get(k) for k in r.scan_iter(f"{prefix}*")}
    finally:
        r.close()


def test_keys_come_from_record_keys_values_are_json_or_bytes_and_tombstones_delete(prefix):
    with ConnectorHarness(RedisSinkConnector, {"topics": "users", "redis.key.prefix": prefix,
                                               **JSON_VALUES}) as h:
        h.produce("users", [{"name": "ada"}, "plain text", {"name": "bob"}, None],
                  keys=["u1", "u2", "u3", "u3"])
        h.start()
        h.run_until(lambda: state(prefix).keys() == {"u1", "u2"})
        assert state(prefix) == {"u1": b'{"name":"ada"}', "u2": b"plain text"}

    with ConnectorHarness(RedisSinkConnector, {"topics": "blobs", "redis.key.prefix": prefix,
                                               "key.converter": "ByteArrayConverter",
                                               "value.converter": "ByteArrayConverter"},
                          name="bytes") as h:
        h.produce("blobs", [b"\x00\xffraw"], keys=[b"b1"])
        h.start()
        h.run_until(lambda: "b1" in state(prefix))
        assert state(prefix)["b1"] == b"\x00\xffraw"


def test_struct_keys_are_canonical_json_and_struct_values_json(prefix):
    schema = SchemaBuilder.struct().field("id", INT32_SCHEMA).field("name", STRING_SCHEMA).build()
    key_schema = SchemaBuilder.struct().field("id", INT32_SCHEMA).build()
    config = {"topics": "people", "redis.key.prefix": prefix, "key.converter": "JsonConverter",
              "value.converter": "JsonConverter"}
    with ConnectorHarness(RedisSinkConnector, config) as h:
        h.produce("people", [Struct(schema, {"id": 7, "name": "grace"})],
                  keys=[Struct(key_schema, {"id": 7})], schema=schema, key_schema=key_schema)
        h.start()
        h.run_until(lambda: state(prefix))
        assert state(prefix) == {'{"id":7}': b'{"id":7,"name":"grace"}'}
    assert redis_key("p:", {"b": 1, "a": 2}) == b'p:{"a":2,"b":1}'


def test_records_delivered_again_after_a_crash_leave_the_same_state(prefix):
    count, keys = 300, 20
    expected = {k: json.dumps(v, separators=(",", ":")).encode()
                for k, v in final_state(count, keys).items()}
    with ConnectorHarness(RedisSinkConnector, {"topics": "updates", "redis.key.prefix": prefix,
                                               **JSON_VALUES}) as h:
        h.produce("updates", [update(i, keys)[1] for i in range(count)],
                  keys=[update(i, keys)[0] for i in range(count)])
        h.start()
        h.run_until(lambda: state(prefix) == expected)
        assert h.sink_offsets("updates") == {}, "nothing committed: all of it comes again"
        h.restart_tasks(crash=True)
        replayed: list[int] = []
        h.run_until(lambda: replayed.append(h.poll()) or sum(replayed) == count,
                    message="every record delivered again")
        assert state(prefix) == expected
        h.commit()
        assert h.sink_offsets("updates") == {0: count}


def test_a_record_without_a_key_goes_to_the_dlq_and_the_rest_are_written(prefix):
    config = {"topics": "users", "redis.key.prefix": prefix, **JSON_VALUES,
              "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "users-dlq",
              "errors.deadletterqueue.context.headers.enable": "true"}
    with ConnectorHarness(RedisSinkConnector, config) as h:
        h.produce("users", [{"n": 1}, {"n": 2}], keys=[None, "u2"])
        h.start()
        h.run_until(lambda: "u2" in state(prefix))
        [dead] = h.dead_letters()
        assert dead["stage"] == "TASK_PUT" and "without a key" in dead["message"]
        assert state(prefix) == {"u2": b'{"n":2}'}


def test_without_tolerance_a_record_without_a_key_fails_the_task(prefix):
    with ConnectorHarness(RedisSinkConnector, {"topics": "users", "redis.key.prefix": prefix,
                                               **JSON_VALUES}) as h:
        h.produce("users", [{"n": 1}])
        h.start()
        h.run_until(lambda: h.task_state() is State.FAILED)
        assert "without a key" in h.task_trace()


@pytest.mark.slow
def test_story_a_worker_killed_before_its_sink_commits_replays_into_the_same_state(tmp_path,
                                                                                    prefix):
    """`kctl worker start` with the plugin on plugin.path; the sink has written everything
    but committed nothing when the worker is killed; the restarted worker delivers it all
    again and Redis ends as it was."""
    count, keys = 2000, 50
    expected = {k: json.dumps(v, separators=(",", ":")).encode()
                for k, v in final_state(count, keys).items()}
    settings = {"state.dir": str(tmp_path / "state"), "listeners": LISTENER,
                "spark.start": "lazy", "plugin.path": str(PLUGINS / "kctl-redis"),
                "offset.flush.interval.ms": 3_600_000}  # the sink commits nothing
    (tmp_path / "worker.yaml").write_text(json.dumps(settings))
    (tmp_path / "updates.json").write_text(json.dumps({"name": "updates", "config": {
        "connector.class": "support.updates.UpdatesSourceConnector", "topic": "updates",
        "count": count, "keys": keys, **JSON_VALUES}}))
    (tmp_path / "redis.json").write_text(json.dumps({"name": "redis", "config": {
        "connector.class": "RedisSink", "topics": "updates", "redis.key.prefix": prefix,
        **JSON_VALUES}}))
    w = Worker(tmp_path)

    def sink_offsets() -> list:
        r = httpx.get(f"{w.url}/connectors/redis/offsets", timeout=5)
        return r.json().get("offsets", []) if r.status_code == 200 else []

    w.start(tmp_path / "updates.json", tmp_path / "redis.json")
    try:
        wait_until(lambda: state(prefix) == expected, timeout=60, message="Redis holds it all",
                   on_timeout=lambda: w.log()[-3000:])
        assert sink_offsets() == []
        w.kill()
        (tmp_path / "worker.yaml").write_text(json.dumps({**settings,
                                                          "offset.flush.interval.ms": 100}))
        w.start()
        wait_until(lambda: [o["offset"]["kafka_offset"] for o in sink_offsets()] == [count],
                   timeout=60, message="the replayed records committed",
                   on_timeout=lambda: w.log()[-3000:])
        assert state(prefix) == expected
    finally:
        w.stop()
