"""examples/plugins/kctl-mqtt: MQTT topics become keys and Kafka topics, and at QoS 1 no
message the broker delivered is lost when the task dies; what comes twice is counted.

Against the Mosquitto broker on 127.0.0.1:1883 (scripts/test-deps.sh starts it). Each test
uses its own topics and client ids, and removes its persistent session at the end.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import paho.mqtt.client as mqtt
import pytest
from kctl_mqtt import MqttSourceConnector, kafka_topic
from support.waiting import wait_until
from support.worker import LISTENER, Worker

from kctl.runtime.dlq import read_topic
from kctl.testing import ConnectorHarness, assert_delivered, delivery
from kctl.transport.embedded import EmbeddedTransport

BROKER = ("127.0.0.1", 1883)
PLUGINS = Path(__file__).resolve().parents[2] / "examples" / "plugins"


def publish(messages: list[tuple[str, str]]) -> None:
    """Publish at QoS 1 and wait for the broker's PUBACK of each."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"pub-{uuid.uuid4().hex[:8]}")
    c.connect(*BROKER)
    c.loop_start()
    try:
        for topic, payload in messages:
            c.publish(topic, payload, qos=1).wait_for_publish(10)
    finally:
        c.disconnect()
        c.loop_stop()


@pytest.fixture
def session() -> Iterator[str]:
    """A client id whose persistent session is removed afterwards."""
    client_id = f"kctl-test-{uuid.uuid4().hex[:8]}"
    yield client_id
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True)
    c.connect(*BROKER)
    c.disconnect()


def config(prefix: str, client_id: str, **extra: str) -> dict[str, str]:
    return {"mqtt.topics": f"{prefix}/#", "kafka.topic": "mqtt.{mqtt.topic}",
            "mqtt.client.id": client_id, "mqtt.qos": "1",
            "key.converter": "StringConverter", "value.converter": "StringConverter", **extra}


def payloads(h: ConnectorHarness, topic: str) -> list[str]:
    return [r.value for r in h.written(topic)]


def drop_connection(task) -> None:
    """What the broker sees of a killed process: the socket closes, no DISCONNECT."""
    task.client.loop_stop()
    task.client.socket().close()


def test_mqtt_topics_become_keys_and_kafka_topics():
    assert kafka_topic("mqtt.{mqtt.topic}", "/home/room 1/t") == "mqtt.home.room_1.t"
    assert kafka_topic("fixed", "a/b") == "fixed"


def test_each_message_is_a_record_keyed_by_its_mqtt_topic(session):
    prefix = f"kctl-{uuid.uuid4().hex[:8]}"
    with ConnectorHarness(MqttSourceConnector, config(prefix, session)) as h:
        h.start()
        publish([(f"{prefix}/room1", "21.5"), (f"{prefix}/room2", "19.0"),
                 (f"{prefix}/room1", "21.7")])
        room1, room2 = f"mqtt.{prefix}.room1", f"mqtt.{prefix}.room2"
        h.run_until(lambda: len(h.raw(room1)) == 2 and len(h.raw(room2)) == 1)
        assert [(r.key, r.value) for r in h.written(room1)] == [
            (f"{prefix}/room1", "21.5"), (f"{prefix}/room1", "21.7")]
        headers = dict(h.written(room2)[0].headers)
        assert headers["mqtt.qos"] == b"1" and headers["mqtt.duplicate"] == b"false"
        h.clock.advance(10)
        h.poll()
        assert h.source_offsets()[(("mqtt.topic", f"{prefix}/room1"),)] == {"received": 2}


def test_messages_not_yet_acknowledged_come_again_after_a_crash_and_none_is_lost(session):
    prefix = f"kctl-{uuid.uuid4().hex[:8]}"
    topic, sent = f"mqtt.{prefix}.data", [str(i) for i in range(15)]
    with ConnectorHarness(MqttSourceConnector, config(prefix, session)) as h:
        h.start()
        # the log takes every record, but the process dies before it acknowledges any
        h.inject(RuntimeError("killed before the PUBACK"), into="commit_record", times=1000)
        publish([(f"{prefix}/data", p) for p in sent])
        h.run_until(lambda: len(h.raw(topic)) == 15)
        dead = h.task()
        h.crash_tasks()
        drop_connection(dead)

        h.restart_tasks()  # the same session: the broker sends them again
        h.run_until(lambda: len(h.raw(topic)) == 30)
        d = assert_delivered(sent, payloads(h, topic), duplicates_allowed=True)
        assert d.duplicates == 15 and h.task().duplicates == 15
        assert {dict(r.headers)["mqtt.duplicate"] for r in h.written(topic)[15:]} == {b"true"}

        h.restart_tasks()  # these were acknowledged: nothing comes a third time
        publish([(f"{prefix}/data", "last")])
        h.run_until(lambda: len(h.raw(topic)) == 31)
        assert delivery([*sent, "last"], payloads(h, topic)).duplicates == 15


def test_messages_published_while_the_task_is_stopped_wait_in_its_session(session):
    prefix = f"kctl-{uuid.uuid4().hex[:8]}"
    topic = f"mqtt.{prefix}.data"
    with ConnectorHarness(MqttSourceConnector, config(prefix, session)) as h:
        h.start()
        publish([(f"{prefix}/data", "before")])
        h.run_until(lambda: len(h.raw(topic)) == 1)
        h.stop_tasks()
        publish([(f"{prefix}/data", str(i)) for i in range(5)])
        h.restart_tasks()
        h.run_until(lambda: len(h.raw(topic)) == 6)
        assert_delivered(["before", *map(str, range(5))], payloads(h, topic))


def test_a_broker_that_does_not_answer_fails_the_task_naming_it(session):
    with ConnectorHarness(MqttSourceConnector, {**config("x", session),
                                                "mqtt.server.uri": "tcp://127.0.0.1:9"}) as h:
        h.start()
        assert h.task_state().value == "FAILED"
        assert "cannot reach the MQTT broker at 127.0.0.1:9" in h.task_trace()


@pytest.mark.slow
def test_story_a_worker_killed_mid_stream_loses_no_message(tmp_path, session):
    """`kctl worker start` with the plugin on plugin.path; kill -9 while messages arrive;
    more arrive while it is down; after the restart every message is in the log once or
    more, and the duplicates are counted."""
    prefix = f"kctl-{uuid.uuid4().hex[:8]}"
    (tmp_path / "worker.yaml").write_text(json.dumps({
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER, "spark.start": "lazy",
        "offset.flush.interval.ms": 100, "plugin.path": str(PLUGINS / "kctl-mqtt")}))
    (tmp_path / "mqtt.json").write_text(json.dumps({"name": "mqtt", "config": {
        "connector.class": "MqttSource", **config(prefix, session)}}))
    w = Worker(tmp_path)

    def received(topic: str) -> int:
        r = httpx.get(f"{w.url}/connectors/mqtt/offsets", timeout=5)
        return sum(o["offset"]["received"] for o in r.json().get("offsets", [])
                   if o["partition"].get("mqtt.topic") == topic) if r.status_code == 200 else 0

    data = f"{prefix}/data"
    w.start(tmp_path / "mqtt.json")
    try:
        publish([(data, str(i)) for i in range(300)])
        wait_until(lambda: received(data) >= 50, timeout=60, message="some messages committed")
        w.kill()
        publish([(data, str(i)) for i in range(300, 600)])  # kept by the broker meanwhile
        w.start()
        publish([(f"{prefix}/end", "end")])  # after every data message, in the session's order
        wait_until(lambda: received(f"{prefix}/end") >= 1, timeout=120,
                   message="the end marker committed", on_timeout=lambda: w.log()[-3000:])
    finally:
        w.stop()
    log = EmbeddedTransport(tmp_path / "state")
    try:
        values = [r.value.decode() for r in read_topic(log, f"mqtt.{prefix}.data", stall_s=5)]
    finally:
        log.close()
    d = assert_delivered([str(i) for i in range(600)], values, duplicates_allowed=True)
    print(f"600 messages, {d.duplicates} duplicate(s) after kill -9")
