"""Avro, Protobuf and JSON Schema with Confluent's clients on the test broker, through a
`kctl worker start` process whose own registry holds the schemas: kctl's JdbcSource writes
the format and Confluent's deserializer reads every row exactly, Confluent's serializer
writes it and kctl's JdbcSink puts every row into PostgreSQL exactly, a compatible evolution
(a new optional field) reaches the table through auto.evolve, and an incompatible one is
refused by the registry (409 under BACKWARD) before anything is written. Each also runs on
the embedded log (a standalone worker, no Kafka); Protobuf also from a schema registered as
.proto text, as Confluent's Java serializer registers it."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, SerializingProducer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from support.cluster import SINK_CONSUMERS
from support.registry_formats import FORMATS, Format, payment, wire_key
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROWS = 300


def payments_in(db, table: str) -> list[tuple]:
    """The payments a sink wrote, in id order; none while the sink has not created the table."""
    try:
        return db.query(f"SELECT id, payer, amount, at FROM {table} ORDER BY id")
    except Exception:
        return []


def config(path: Path, settings: dict) -> Path:
    path.write_text(json.dumps(settings))
    return path


def orders_table(db) -> None:
    db.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, name TEXT, amount NUMERIC(12,2) "
               "NOT NULL, placed TIMESTAMP(3) NOT NULL, paid BOOLEAN NOT NULL)",
               f"INSERT INTO orders SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'n' || g END, "
               f"g * 1.25 - 100.01, TIMESTAMP '2024-01-01' + g * INTERVAL '1.001 second', "
               f"g % 2 = 0 FROM generate_series(1, {ROWS}) g")


def order(i: int) -> dict:
    """Row i of `orders` as Confluent's deserializer reads it."""
    return {"id": i, "name": None if i % 7 == 0 else f"n{i}",
            "amount": decimal.Decimal(i) * decimal.Decimal("1.25") - decimal.Decimal("100.01"),
            "placed": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + i * dt.timedelta(seconds=1.001),
            "paid": i % 2 == 0}


def refusal(error: BaseException) -> SchemaRegistryError | None:
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, SchemaRegistryError):
        cause = cause.__cause__ or cause.__context__
    return cause


@pytest.mark.parametrize("fmt", FORMATS.values(), ids=FORMATS.keys())
def test_a_format_through_a_worker_with_confluents_clients(fmt: Format, tmp_path, postgres_db,
                                                         kafka_broker):
    db = postgres_db
    orders_table(db)
    topic, payments = f"{fmt.topic_prefix}orders", f"{fmt.name}-payments"
    config(tmp_path / "worker.yaml", {
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "bootstrap.servers": kafka_broker.bootstrap,
        "topic.creation.default.replication.factor": 1, **SINK_CONSUMERS,
        "key.converter": fmt.converter, "value.converter": fmt.converter,
        "offset.flush.interval.ms": 500, "spark.master": "local[1]",
        "spark.driver.memory": "1g"})
    worker = Worker(tmp_path)
    worker.start()
    try:
        registry = {"url": f"{worker.url}/schema-registry"}
        client = SchemaRegistryClient(registry)
        # 1. kctl's JdbcSource writes the format; Confluent's deserializer reads every row
        worker.kctl("connector", "create", str(config(tmp_path / "source.yaml", {
            "name": "pg", "connector.class": "JdbcSource", "connection.url": db.url,
            "mode": "bulk", "table.include.list": "orders", "topic.prefix": fmt.topic_prefix,
            "poll.interval.ms": 3600000})))
        consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap,
                             "group.id": f"confluent-reader-{fmt.name}",
                             "auto.offset.reset": "earliest"})
        wait_until(lambda: topic in consumer.list_topics(timeout=5).topics,
                   timeout=240, interval=0.5, message="the source's topic",
                   on_timeout=lambda: worker.log()[-3000:])
        partitions = consumer.list_topics(topic, timeout=5).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        raw: list[bytes] = []

        def read_all() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                raw.append(message.value())
            return len(raw) >= ROWS

        wait_until(read_all, timeout=240, interval=0, message="every row of the source",
                   on_timeout=lambda: worker.log()[-3000:])
        consumer.close()
        read = fmt.reader(client, f"{topic}-value")
        seen = {row["id"]: row for row in (read(value, topic) for value in raw)}
        for i in (1, 7, 150, ROWS):
            assert seen[i] == order(i), i
        assert sorted(seen) == list(range(1, ROWS + 1))
        assert {f"{topic}-key", f"{topic}-value"} <= set(client.get_subjects())

        # 2. Confluent's serializer writes the format; kctl's JdbcSink writes every row exactly
        worker.kctl("connector", "create", str(config(tmp_path / "sink.yaml", {
            "name": "payments-db", "connector.class": "JdbcSink", "topics": payments,
            "table.name.format": "payments", "connection.url": db.url,
            "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id",
            "auto.create": "true", "auto.evolve": "true"})))

        def producer(evolved: bool) -> SerializingProducer:
            key, value = fmt.writers(client, evolved)
            return SerializingProducer({"bootstrap.servers": kafka_broker.bootstrap,
                                        "key.serializer": key, "value.serializer": value})

        first = producer(False)
        for i in range(1, ROWS + 1):
            first.produce(payments, key=wire_key(fmt, i, False),
                          value=fmt.to_wire(payment(i), False))
        first.flush(30)

        def table() -> list[tuple]:
            return payments_in(db, "payments")

        wait_until(lambda: len(table()) >= ROWS, timeout=180, interval=0.5,
                   message="every payment in PostgreSQL", on_timeout=lambda: worker.log()[-3000:])
        rows = table()
        assert [r[0] for r in rows] == list(range(1, ROWS + 1))
        for r in rows:
            expected = payment(r[0])
            assert r[1:3] == (expected["payer"], expected["amount"]), r
            assert r[3] in (expected["at"], expected["at"].replace(tzinfo=None)), r

        # 3. a compatible evolution (a new optional field) reaches the table by auto.evolve
        evolved = producer(True)
        evolved.produce(payments, key=wire_key(fmt, ROWS + 1, True),
                        value=fmt.to_wire(payment(ROWS + 1, memo="evolved"), True))
        evolved.flush(30)

        def memo() -> list[tuple]:
            try:
                return db.query(f"SELECT memo, amount FROM payments WHERE id = {ROWS + 1}")
            except Exception:
                return []

        wait_until(lambda: memo() == [("evolved", payment(ROWS + 1)["amount"])], timeout=120,
                   interval=0.5, message="the evolved row with its new column",
                   on_timeout=lambda: worker.log()[-3000:])
        assert db.query("SELECT count(*) FROM payments WHERE memo IS NULL") == [(ROWS,)]

        # 4. an incompatible schema is refused (409 under BACKWARD) before anything is sent
        serializer, value = fmt.broken(client)
        broken = SerializingProducer({"bootstrap.servers": kafka_broker.bootstrap,
                                      "value.serializer": serializer})
        with pytest.raises(Exception) as refused:
            broken.produce(payments, value=value)
        cause = refusal(refused.value)
        assert cause is not None and cause.http_status_code == 409, refused.value
        assert worker.status("payments-db")["tasks"][0]["state"] == "RUNNING"
    finally:
        worker.stop()


@pytest.mark.parametrize("fmt", FORMATS.values(), ids=FORMATS.keys())
def test_a_format_on_the_embedded_log(fmt: Format, tmp_path, postgres_db):
    """A standalone worker with no Kafka: its JdbcSource writes the format into the embedded
    log, its JdbcSink copies every row exactly, `kctl topic read` shows the rows decoded,
    a column the table gains reaches the copy through a compatible schema and auto.evolve,
    and Confluent's registry client finds both versions (for Protobuf also: it is refused
    an incompatible one)."""
    from confluent_kafka.schema_registry import Schema
    from google.protobuf import descriptor_pb2

    db = postgres_db
    orders_table(db)
    topic = f"{fmt.name}-orders"
    config(tmp_path / "worker.yaml", {
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "key.converter": fmt.converter, "value.converter": fmt.converter,
        "offset.flush.interval.ms": 500, "spark.master": "local[1]",
        "spark.driver.memory": "1g"})
    worker = Worker(tmp_path)
    worker.start()
    try:
        client = SchemaRegistryClient({"url": f"{worker.url}/schema-registry"})
        worker.kctl("connector", "create", str(config(tmp_path / "source.yaml", {
            "name": "pg", "connector.class": "JdbcSource", "connection.url": db.url,
            "mode": "incrementing", "incrementing.column.name": "id",
            "table.include.list": "orders", "topic.prefix": f"{fmt.name}-",
            "poll.interval.ms": 300})))
        worker.kctl("connector", "create", str(config(tmp_path / "sink.yaml", {
            "name": "copy", "connector.class": "JdbcSink", "topics": topic,
            "table.name.format": "orders_copy", "connection.url": db.url,
            "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
            "auto.create": "true", "auto.evolve": "true"})))

        def copied(where: str = "") -> int:
            try:
                return db.query(f"SELECT count(*) FROM orders_copy {where}")[0][0]
            except Exception:
                return -1

        wait_until(lambda: copied() >= ROWS, timeout=240, interval=0.5,
                   message="every order copied through the embedded log",
                   on_timeout=lambda: worker.log()[-3000:])
        assert db.query("SELECT id, name, amount, placed, paid FROM orders EXCEPT "
                        "SELECT id, name, amount, placed, paid FROM orders_copy") == []

        shown = worker.kctl("topic", "read", topic, "--connector", "pg",
                            "--max", str(ROWS), "-o", "json").stdout
        values = {v["id"]: v for v in (json.loads(line)["value"] for line in shown.splitlines())}
        assert sorted(values) == list(range(1, ROWS + 1))
        for i in (1, 7, 150, ROWS):
            row = order(i)
            assert values[i] == {**row, "amount": str(row["amount"]),
                                 "placed": row["placed"].isoformat()}, i

        # a column the table gains: a new optional field, registered as a compatible version
        # (JSON Schema: Confluent's rules refuse a property added to an open content model,
        # which is how Confluent's converter and kctl's write structs, under BACKWARD)
        if fmt.name == "json":
            client.set_compatibility(f"{topic}-value", "FORWARD")
        db.execute("ALTER TABLE orders ADD COLUMN note TEXT",
                   f"INSERT INTO orders VALUES ({ROWS + 1}, 'late', 1.50, "
                   f"TIMESTAMP '2024-02-01 10:00:00.123', true, 'evolved')")
        wait_until(lambda: copied("WHERE note = 'evolved'") == 1, timeout=120, interval=0.5,
                   message="the new column in the copy", on_timeout=lambda: worker.log()[-3000:])
        assert copied("WHERE note IS NULL") == ROWS
        versions = client.get_versions(f"{topic}-value")
        assert len(versions) == 2
        assert worker.status("copy")["tasks"][0]["state"] == "RUNNING"
        if fmt.name != "protobuf":
            return
        latest = client.get_latest_version(f"{topic}-value").schema
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(latest.schema_str))
        note = [f for f in file.message_type[0].field if f.name == "note"]
        assert len(note) == 1 and note[0].proto3_optional

        # an incompatible change: a field number changes its kind
        file.message_type[0].field[0].type = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
        broken = base64.b64encode(file.SerializeToString()).decode()
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema(f"{topic}-value", Schema(broken, "PROTOBUF"))
        assert refused.value.http_status_code == 409
        assert worker.status("copy")["tasks"][0]["state"] == "RUNNING"
    finally:
        worker.stop()


PAYMENT_PROTO = """syntax = "proto3";
package bank;

import "google/protobuf/timestamp.proto";
import "confluent/type/decimal.proto";
import "confluent/meta.proto";

message Payment {
  int64 id = 1;
  optional string payer = 2;
  confluent.type.Decimal amount = 3 [(confluent.field_meta) = {
    params: [{key: "scale", value: "2"}, {key: "precision", value: "12"}]
  }];
  google.protobuf.Timestamp at = 4;
}
"""


def test_protobuf_registered_as_proto_text_reaches_the_table(tmp_path, postgres_db,
                                                              kafka_broker):
    """What Confluent's Java serializer registers: the schema as .proto text. A producer
    frames each message with that schema's id; kctl's JdbcSink reads them all exactly."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import Schema

    db = postgres_db
    fmt = FORMATS["protobuf"]
    topic, rows = "proto-text-payments", 50
    config(tmp_path / "worker.yaml", {
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "bootstrap.servers": kafka_broker.bootstrap,
        "topic.creation.default.replication.factor": 1, **SINK_CONSUMERS,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": fmt.converter, "spark.master": "local[1]",
        "spark.driver.memory": "1g"})
    worker = Worker(tmp_path)
    worker.start()
    try:
        client = SchemaRegistryClient({"url": f"{worker.url}/schema-registry"})
        schema_id = client.register_schema(f"{topic}-value", Schema(PAYMENT_PROTO, "PROTOBUF"))
        assert client.get_schema(schema_id).schema_str == PAYMENT_PROTO
        worker.kctl("connector", "create", str(config(tmp_path / "sink.yaml", {
            "name": "text-db", "connector.class": "JdbcSink", "topics": topic,
            "table.name.format": "text_payments", "connection.url": db.url,
            "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
            "auto.create": "true"})))
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
        frame = b"\x00" + schema_id.to_bytes(4, "big") + b"\x00"  # message indexes [0]
        for i in range(1, rows + 1):
            producer.produce(topic, key=str(i),
                             value=frame + fmt.to_wire(payment(i), False).SerializeToString())
        producer.flush(30)

        def table() -> list[tuple]:
            return payments_in(db, "text_payments")

        wait_until(lambda: len(table()) >= rows, timeout=180, interval=0.5,
                   message="every payment in PostgreSQL", on_timeout=lambda: worker.log()[-3000:])
        for r in table():
            expected = payment(r[0])
            assert r[1:3] == (expected["payer"], expected["amount"]), r
            assert r[3] in (expected["at"], expected["at"].replace(tzinfo=None)), r
        assert [r[0] for r in table()] == list(range(1, rows + 1))
    finally:
        worker.stop()
