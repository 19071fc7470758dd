"""`kctl dlq show`: JSON gives every rejected record whole, and the table shows what was
rejected, not the start of the JsonConverter envelope (its schema comes first: a preview of
the value showed only `{"schema": {"type": "struct", ...` and never the payload)."""

from __future__ import annotations

import json

from kctl.transport.base import ProducerRecord

SCHEMA = {"type": "struct", "optional": False, "name": "orders", "fields": [
    {"field": f, "type": t, "optional": o} for f, t, o in (
        ("id", "int64", False), ("customer", "string", False), ("note", "string", True),
        ("amount", "double", True), ("created_at", "int64", True))]}
PAYLOAD = {"id": 42, "customer": "Ada Lovelace", "note": "x" * 300, "amount": 12.5,
           "created_at": 1700000000000}


def test_dlq_show_prints_whole_values_and_the_payload_in_the_table(kctl, worker, monkeypatch):
    kctl.ok("connector", "create", "--initial-state", "STOPPED", kctl.file("sink.yaml", """
name: orders-out
connector.class: FileSink
topics: orders
path: /tmp/never-written
errors.tolerance: all
errors.deadletterqueue.topic.name: orders-dlq
errors.deadletterqueue.topic.replication.factor: 1
errors.deadletterqueue.context.headers.enable: true
"""))
    value = json.dumps({"schema": SCHEMA, "payload": PAYLOAD})
    key = json.dumps({"schema": {"type": "int64", "optional": False}, "payload": 42})
    assert len(value) > 600
    producer = worker.transport.producer()
    producer.send(ProducerRecord("orders-dlq", value.encode(), key=key.encode(), headers=[
        ("__connect.errors.stage", b"TASK_PUT"),
        ("__connect.errors.exception.class.name", b"kctl.errors.DataError"),
        ("__connect.errors.exception.message", b"value too long for type varchar(20)"),
        ("__connect.errors.topic", b"orders"), ("__connect.errors.partition", b"0"),
        ("__connect.errors.offset", b"7")]))
    assert producer.flush(10) == 0
    producer.close()

    shown = json.loads(kctl.ok("dlq", "show", "orders-out", "-o", "json"))
    assert len(shown) == 1
    assert shown[0]["value"] == value, "the whole value, not a preview"
    assert shown[0]["key"] == key
    assert json.loads(shown[0]["value_payload"]) == PAYLOAD
    assert json.loads(shown[0]["key_payload"]) == 42

    monkeypatch.setenv("COLUMNS", "250")  # a wide terminal: cells are not folded
    table = kctl.ok("dlq", "show", "orders-out")
    assert '"customer": "Ada Lovelace"' in table, table
    assert '"schema"' not in table
    assert "value too long for type varchar(20)" in table
