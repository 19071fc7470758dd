"""MqttSource: MQTT messages into the log, none lost that the broker counts as delivered.

Config names follow Confluent's MQTT source connector where they fit (`mqtt.server.uri`,
`mqtt.topics`, `kafka.topic`, `mqtt.qos`, `mqtt.clean.session.enabled`, `mqtt.username`,
`mqtt.password`). Each message becomes a record whose key is its MQTT topic and whose value
is its payload (bytes); `kafka.topic` may name the MQTT topic as `{mqtt.topic}`, so
`mqtt.{mqtt.topic}` writes `sensors/room1` to `mqtt.sensors.room1`.

Why nothing is lost at QoS 1: the task subscribes in a persistent session (a fixed client
id, clean session off), so the broker keeps what arrives while the worker is down, and it
acknowledges a message (PUBACK, paho's manual acks) only in `commit_record`, once the log
has acknowledged its record. A worker killed before that gets the message again from the
broker when it reconnects: a duplicate (counted, and marked with the `mqtt.duplicate`
header), never a loss.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import paho.mqtt.client as mqtt

from kctl.api import (
    ConfigDef,
    ConfigType,
    ConnectError,
    Headers,
    Importance,
    NonEmptyString,
    Range,
    RecordMetadata,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from kctl.api.data import OPTIONAL_BYTES_SCHEMA, STRING_SCHEMA

__version__ = "0.1.0"
log = logging.getLogger(__name__)

CONFIG = (
    ConfigDef()
    .define("mqtt.server.uri", ConfigType.LIST, "tcp://127.0.0.1:1883",
            importance=Importance.HIGH, doc="The broker, as tcp://host:port (the first "
            "of the list).", group="MQTT")
    .define("mqtt.topics", ConfigType.LIST, importance=Importance.HIGH,
            doc="MQTT topic filters to subscribe to (wildcards + and # allowed).", group="MQTT")
    .define("kafka.topic", ConfigType.STRING, validator=NonEmptyString(),
            importance=Importance.HIGH, doc="Topic the records go to; {mqtt.topic} stands "
            "for the message's MQTT topic with / as . (other characters not allowed in a "
            "topic name become _).", group="MQTT")
    .define("mqtt.qos", ConfigType.INT, 1, Range.between(0, 2), Importance.MEDIUM,
            "Subscription QoS: 0 may lose messages, 1 and 2 lose none the broker "
            "delivered.", group="MQTT")
    .define("mqtt.clean.session.enabled", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Start without the broker's stored session. Off (unlike Confluent's default): "
            "the stored session is what keeps messages while the worker is down.",
            group="MQTT")
    .define("mqtt.client.id", ConfigType.STRING, "", None, Importance.MEDIUM,
            "The session's client id (default kctl-<connector name>); keep it stable.",
            group="MQTT")
    .define("mqtt.username", ConfigType.STRING, "", None, Importance.LOW, "", group="MQTT")
    .define("mqtt.password", ConfigType.PASSWORD, "", None, Importance.LOW, "", group="MQTT")
    .define("mqtt.connect.timeout.seconds", ConfigType.INT, 30, Range.at_least(1),
            Importance.LOW, "How long start waits for the broker.", group="MQTT")
    .define("mqtt.keepalive.interval.seconds", ConfigType.INT, 60, Range.at_least(1),
            Importance.LOW, "", group="MQTT")
    .define("max.batch.size", ConfigType.INT, 1000, Range.at_least(1), Importance.LOW,
            "Most messages one poll returns.", group="MQTT")
)

_BAD_TOPIC_CHARS = re.compile(r"[^a-zA-Z0-9._-]")


def kafka_topic(template: str, mqtt_topic: str) -> str:
    """`kafka.topic` for one message: {mqtt.topic} replaced by its MQTT topic, / as ."""
    if "{mqtt.topic}" not in template:
        return template
    name = _BAD_TOPIC_CHARS.sub("_", mqtt_topic.strip("/").replace("/", "."))
    return template.replace("{mqtt.topic}", name)


def server(uri: str) -> tuple[str, int]:
    parts = urlsplit(uri)
    if parts.scheme not in ("tcp", "mqtt") or not parts.hostname:
        raise ConnectError(f"mqtt.server.uri {uri!r}: expected tcp://host:port")
    return parts.hostname, parts.port or 1883


class MqttSourceConnector(SourceConnector):
    """One task: an MQTT session is one subscriber, and its stored messages follow its
    client id, so splitting the topics would strand them when the split changes."""

    def version(self) -> str:
        return __version__

    def config(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        CONFIG.parse(props)
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return MqttSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class MqttSourceTask(SourceTask):
    def version(self) -> str:
        return __version__

    def start(self, props: Mapping[str, str]) -> None:
        cfg = CONFIG.parse(props)
        self.template = cfg["kafka.topic"]
        self.qos = cfg["mqtt.qos"]
        self.batch = cfg["max.batch.size"]
        self.topics = cfg["mqtt.topics"]
        self.client_id = cfg["mqtt.client.id"] or f"kctl-{props.get('name', 'mqtt')}"
        self.received: dict[str, int] = {}  # MQTT topic -> messages received, ever
        self.duplicates = 0  # messages the broker marked as sent again
        self.messages: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
        self.unacked: dict[int, tuple[SourceRecord, int, int]] = {}
        self.connected = threading.Event()
        self.refused: str | None = None
        host, port = server(cfg["mqtt.server.uri"][0])
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id,
                             clean_session=cfg["mqtt.clean.session.enabled"], manual_ack=True)
        if cfg["mqtt.username"]:
            password = cfg["mqtt.password"]
            client.username_pw_set(cfg["mqtt.username"], password.value() if password else None)
        client.on_connect = self._on_connect
        client.on_message = lambda _c, _u, message: self.messages.put(message)
        self.client = client
        try:
            client.connect(host, port, keepalive=cfg["mqtt.keepalive.interval.seconds"])
        except OSError as e:
            raise ConnectError(f"cannot reach the MQTT broker at {host}:{port}: {e}") from e
        client.loop_start()  # paho's network thread; it reconnects by itself
        if not self.connected.wait(cfg["mqtt.connect.timeout.seconds"]) or self.refused:
            client.loop_stop()
            raise ConnectError(f"the MQTT broker at {host}:{port} did not accept the "
                               f"connection: {self.refused or 'no answer'}")

    def _on_connect(self, client: mqtt.Client, _userdata: Any, _flags: Any, reason: Any,
                    _properties: Any) -> None:
        if reason.is_failure:
            self.refused = str(reason)
        else:  # (again after a reconnect: a stored session keeps them, a clean one not)
            client.subscribe([(t, self.qos) for t in self.topics])
        self.connected.set()

    def poll(self) -> Sequence[SourceRecord]:
        try:
            first = self.messages.get(timeout=0.1)
        except queue.Empty:
            return []
        out = [self._record(first)]
        while len(out) < self.batch:
            try:
                out.append(self._record(self.messages.get_nowait()))
            except queue.Empty:
                break
        return out

    def _count(self, topic: str) -> int:
        """The offset: how many messages of this MQTT topic were received (informative:
        resumption is the broker's session, not the offset)."""
        n = self.received.get(topic)
        if n is None:
            stored = self.context.offset_storage_reader.offset({"mqtt.topic": topic}) or {}
            n = int(stored.get("received", 0))
        self.received[topic] = n + 1
        return n + 1

    def _record(self, m: mqtt.MQTTMessage) -> SourceRecord:
        self.duplicates += bool(m.dup)
        headers = (Headers().add("mqtt.message.id", str(m.mid)).add("mqtt.qos", str(m.qos))
                   .add("mqtt.retained", str(m.retain).lower())
                   .add("mqtt.duplicate", str(bool(m.dup)).lower()))
        record = SourceRecord(kafka_topic(self.template, m.topic), None, STRING_SCHEMA, m.topic,
                              OPTIONAL_BYTES_SCHEMA, bytes(m.payload), headers=headers,
                              source_partition={"mqtt.topic": m.topic},
                              source_offset={"received": self._count(m.topic)})
        if m.qos > 0:
            self.unacked[id(record)] = (record, m.mid, m.qos)
        return record

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """The log has the record (or it was filtered or dead-lettered): now the broker
        may forget the message."""
        pending = self.unacked.pop(id(record), None)
        if pending is not None:
            self.client.ack(pending[1], pending[2])

    def stop(self) -> None:
        client = getattr(self, "client", None)
        if client is None:
            return
        client.disconnect()  # the session (and what was not acknowledged) stays
        client.loop_stop()
        if self.duplicates:
            log.info("MQTT client %s received %d duplicate message(s)", self.client_id,
                     self.duplicates)
