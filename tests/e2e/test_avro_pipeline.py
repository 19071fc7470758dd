"""Avro with Confluent's clients on the test broker, through a `kctl worker start` process
whose own registry holds the schemas: kctl's JdbcSource writes Avro that Confluent's
deserializer reads exactly, Confluent's serializer writes Avro that kctl's JdbcSink puts
into PostgreSQL exactly, a compatible evolution reaches the table through auto.evolve, and
an incompatible one is refused by the registry before anything is written."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    DeserializingConsumer,
    SerializingProducer,
    TopicPartition,
)
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from support.cluster import SINK_CONSUMERS
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROWS = 300
AVRO = "io.confluent.connect.avro.AvroConverter"


def config(path: Path, settings: dict) -> Path:
    path.write_text(json.dumps(settings))
    return path


def payment_schema(*extra: dict) -> str:
    return json.dumps({"type": "record", "name": "Payment", "namespace": "bank", "fields": [
        {"name": "id", "type": "long"},
        {"name": "payer", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        *extra]})


def at(i: int) -> dt.datetime:
    return dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i, milliseconds=i % 1000)


def test_avro_through_a_worker_with_confluents_clients(tmp_path, postgres_db, kafka_broker):
    db = postgres_db
    db.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, name TEXT, amount NUMERIC(12,2) "
               "NOT NULL, placed TIMESTAMP(3) NOT NULL, paid BOOLEAN NOT NULL)",
               f"INSERT INTO orders SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'n' || g END, "
               f"g * 1.25 - 100.01, TIMESTAMP '2024-01-01' + g * INTERVAL '1.001 second', "
               f"g % 2 = 0 FROM generate_series(1, {ROWS}) g")
    config(tmp_path / "worker.yaml", {
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "bootstrap.servers": kafka_broker.bootstrap,
        "topic.creation.default.replication.factor": 1, **SINK_CONSUMERS,
        "key.converter": AVRO, "value.converter": AVRO, "offset.flush.interval.ms": 500,
        "spark.master": "local[1]", "spark.driver.memory": "1g"})
    worker = Worker(tmp_path)
    worker.start()
    try:
        registry = {"url": f"{worker.url}/schema-registry"}
        # 1. kctl's JdbcSource writes Avro; Confluent's deserializer reads every row exactly
        worker.kctl("connector", "create", str(config(tmp_path / "source.yaml", {
            "name": "pg", "connector.class": "JdbcSource", "connection.url": db.url,
            "mode": "bulk", "table.include.list": "orders", "topic.prefix": "avro-",
            "poll.interval.ms": 3600000})))
        consumer = DeserializingConsumer({
            "bootstrap.servers": kafka_broker.bootstrap, "group.id": "confluent-reader",
            "auto.offset.reset": "earliest",
            "value.deserializer": AvroDeserializer(SchemaRegistryClient(registry))})
        wait_until(lambda: "avro-orders" in consumer.list_topics(timeout=5).topics,
                   timeout=240, interval=0.5, message="the source's topic",
                   on_timeout=lambda: worker.log()[-3000:])
        partitions = consumer.list_topics("avro-orders", timeout=5).topics["avro-orders"].partitions
        consumer.assign([TopicPartition("avro-orders", p, OFFSET_BEGINNING) for p in partitions])
        seen: dict[int, dict] = {}

        def read_all() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen[message.value()["id"]] = message.value()
            return len(seen) >= ROWS

        wait_until(read_all, timeout=240, interval=0, message="every row read by Confluent's "
                   "deserializer", on_timeout=lambda: worker.log()[-3000:])
        consumer.close()
        for i in (1, 7, 150, ROWS):
            assert seen[i] == {
                "id": i, "name": None if i % 7 == 0 else f"n{i}",
                "amount": decimal.Decimal(i) * decimal.Decimal("1.25") - decimal.Decimal("100.01"),
                "placed": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + i * dt.timedelta(seconds=1.001),
                "paid": i % 2 == 0}, i
        assert sorted(seen) == list(range(1, ROWS + 1))
        subjects = SchemaRegistryClient(registry).get_subjects()
        assert {"avro-orders-key", "avro-orders-value"} <= set(subjects)

        # 2. Confluent's serializer writes Avro; kctl's JdbcSink writes every row exactly
        worker.kctl("connector", "create", str(config(tmp_path / "sink.yaml", {
            "name": "payments-db", "connector.class": "JdbcSink", "topics": "payments",
            "connection.url": db.url, "insert.mode": "upsert", "pk.mode": "record_key",
            "pk.fields": "id", "auto.create": "true", "auto.evolve": "true"})))
        client = SchemaRegistryClient(registry)

        def producer(schema: str) -> SerializingProducer:
            return SerializingProducer({
                "bootstrap.servers": kafka_broker.bootstrap,
                "key.serializer": AvroSerializer(client, '"long"'),
                "value.serializer": AvroSerializer(client, schema)})

        first = producer(payment_schema())
        for i in range(1, ROWS + 1):
            first.produce("payments", key=i, value={
                "id": i, "payer": None if i % 5 == 0 else f"p{i}",
                "amount": decimal.Decimal(i) / 100, "at": at(i)})
        first.flush(30)

        def table() -> list[tuple]:
            try:
                return db.query("SELECT id, payer, amount, at FROM payments ORDER BY id")
            except Exception:
                return []

        wait_until(lambda: len(table()) >= ROWS, timeout=180, interval=0.5,
                   message="every payment in PostgreSQL", on_timeout=lambda: worker.log()[-3000:])
        rows = table()
        assert rows[0] == (1, "p1", decimal.Decimal("0.01"), at(1).replace(tzinfo=None)) or \
            rows[0] == (1, "p1", decimal.Decimal("0.01"), at(1))
        assert [r[0] for r in rows] == list(range(1, ROWS + 1))
        assert rows[4][1] is None and rows[-1][2] == decimal.Decimal(ROWS) / 100

        # 3. a compatible evolution (a new optional field) reaches the table by auto.evolve
        evolved = producer(payment_schema({"name": "memo", "type": ["null", "string"],
                                           "default": None}))
        evolved.produce("payments", key=ROWS + 1, value={
            "id": ROWS + 1, "payer": "late", "amount": decimal.Decimal("9.99"), "at": at(1),
            "memo": "evolved"})
        evolved.flush(30)

        def memo() -> list[tuple]:
            try:
                return db.query(f"SELECT memo FROM payments WHERE id = {ROWS + 1}")
            except Exception:
                return []

        wait_until(lambda: memo() == [("evolved",)], timeout=120, interval=0.5,
                   message="the evolved row with its new column")
        assert db.query("SELECT count(*) FROM payments WHERE memo IS NULL") == [(ROWS,)]

        # 4. an incompatible schema is refused (409 under BACKWARD) before anything is sent
        broken = producer(json.dumps({"type": "record", "name": "Payment", "namespace": "bank",
                                      "fields": [{"name": "id", "type": "string"}]}))
        with pytest.raises(Exception) as refused:
            broken.produce("payments", key=ROWS + 2, value={"id": "x"})
        cause = refused.value
        while cause is not None and not isinstance(cause, SchemaRegistryError):
            cause = cause.__cause__ or cause.__context__
        assert cause is not None and cause.http_status_code == 409
        assert worker.status("payments-db")["tasks"][0]["state"] == "RUNNING"
    finally:
        worker.stop()
