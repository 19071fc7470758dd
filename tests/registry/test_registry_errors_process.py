"""Bad input around the registry never loses data or stops the worker: a record the
registry refuses fails its task naming the subject and the incompatibility, bytes that are
not Confluent's wire format go to the dead letter queue saying what they look like, and a
registry that cannot be reached fails the task, after its retries, naming the URL."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from support.broker import free_port
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = pytest.mark.slow

AVRO = "io.confluent.connect.avro.AvroConverter"
COUNTER = "support.connectors.CounterSourceConnector"
SINK = "support.sinks.JsonLinesSinkConnector"


def create(worker: Worker, tmp_path, name: str, settings: dict) -> None:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, **settings}))
    worker.kctl("connector", "create", str(path))


def task_state(worker: Worker, name: str) -> tuple[str, str]:
    tasks = worker.status(name)["tasks"]
    return (tasks[0]["state"], tasks[0].get("trace") or "") if tasks else ("", "")


def test_refused_schemas_foreign_bytes_and_an_unreachable_registry(tmp_path):
    (tmp_path / "worker.yaml").write_text(
        f"listeners: {LISTENER}\nstate.dir: {tmp_path / 'state'}\nspark.start: lazy\n"
        "offset.flush.interval.ms: 200\n")
    worker = Worker(tmp_path)
    worker.start()
    try:
        registry = SchemaRegistryClient({"url": f"{worker.url}/schema-registry"})
        # 1. the subject holds a record schema; a source now writes plain longs to it
        registry.register_schema("numbers-value", Schema(json.dumps(
            {"type": "record", "name": "n", "fields": [{"name": "v", "type": "long"}]}),
            "AVRO"))
        create(worker, tmp_path, "numbers", {"connector.class": COUNTER, "topic": "numbers",
                                             "count": 5, "value.converter": AVRO})
        wait_until(lambda: task_state(worker, "numbers")[0] == "FAILED", timeout=60,
                   message="the source refused by the registry")
        trace = task_state(worker, "numbers")[1]
        assert "numbers-value" in trace and "incompatible" in trace, trace

        # 2. JSON on a topic, read as Avro: each record to the DLQ, saying what it looks like
        create(worker, tmp_path, "plain", {"connector.class": COUNTER, "topic": "plain",
                                           "count": 5, "value.converter": "JsonConverter"})
        create(worker, tmp_path, "reader", {
            "connector.class": SINK, "topics": "plain", "path": str(tmp_path / "out.jsonl"),
            "value.converter": AVRO, "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "plain-dlq",
            "errors.deadletterqueue.context.headers.enable": "true"})

        def dead_letters() -> list[dict]:
            r = worker.kctl("dlq", "show", "reader", "-o", "json", check=False)
            return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else []

        wait_until(lambda: len(dead_letters()) >= 5, timeout=60, interval=0.5,
                   message="five records in the DLQ")
        text = json.dumps(dead_letters())
        assert "magic byte 0x7b" in text and "looks like JSON" in text
        assert task_state(worker, "reader")[0] == "RUNNING"

        # 3. a registry nobody answers at: retried, then the task fails naming the URL
        nowhere = f"http://127.0.0.1:{free_port()}"
        create(worker, tmp_path, "lost", {
            "connector.class": COUNTER, "topic": "lost", "count": 5, "value.converter": AVRO,
            "value.converter.schema.registry.url": nowhere, "errors.retry.timeout": 1500,
            "errors.retry.delay.max.ms": 200})
        wait_until(lambda: task_state(worker, "lost")[0] == "FAILED", timeout=60,
                   message="the source without its registry")
        assert nowhere.split("//")[1] in task_state(worker, "lost")[1]
        assert worker.proc is not None and worker.proc.poll() is None, "the worker runs on"
    finally:
        worker.stop()
