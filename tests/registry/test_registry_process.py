"""The registry a `kctl worker start` process serves, driven by Confluent's own Python
client from PyPI, unmodified: every call answers as Confluent documents it, and the ids
survive the worker's restart (they live in the `_schemas` topic of its log)."""

from __future__ import annotations

import json

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from support.worker import LISTENER, Worker

pytestmark = pytest.mark.slow

ORDER_V1 = json.dumps({"type": "record", "name": "order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": {
        "type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}}]})
ORDER_V2 = json.dumps({"type": "record", "name": "order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": {
        "type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "note", "type": ["null", "string"], "default": None}]})
ORDER_RENAMED_ID = json.dumps({"type": "record", "name": "order", "namespace": "shop",
                               "fields": [{"name": "id", "type": "string"}]})


def start_worker(tmp_path, **settings: str) -> Worker:
    lines = [f"listeners: {LISTENER}", f"state.dir: {tmp_path / 'state'}", "spark.start: lazy",
             *(f"{k}: {v}" for k, v in settings.items())]
    (tmp_path / "worker.yaml").write_text("\n".join(lines) + "\n")
    worker = Worker(tmp_path)
    worker.start()
    return worker


def client(worker: Worker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": f"{worker.url}/schema-registry"})


def refused(call, *args) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as caught:
        call(*args)
    return caught.value


def test_confluents_client_registers_evolves_checks_and_deletes_and_ids_survive_a_restart(tmp_path):
    worker = start_worker(tmp_path)
    try:
        sr = client(worker)
        first = sr.register_schema("orders-value", Schema(ORDER_V1, "AVRO"))
        assert sr.register_schema("orders-value", Schema(ORDER_V1, "AVRO")) == first
        assert sr.test_compatibility("orders-value", Schema(ORDER_V2, "AVRO")) is True
        assert sr.test_compatibility("orders-value", Schema(ORDER_RENAMED_ID, "AVRO")) is False
        second = sr.register_schema("orders-value", Schema(ORDER_V2, "AVRO"))
        assert second != first and sr.get_versions("orders-value") == [1, 2]

        incompatible = refused(sr.register_schema, "orders-value",
                               Schema(ORDER_RENAMED_ID, "AVRO"))
        assert (incompatible.http_status_code, incompatible.error_code) == (409, 409)
        malformed = refused(sr.register_schema, "orders-value",
                            Schema('{"type": "record", "name": 1}', "AVRO"))
        assert (malformed.http_status_code, malformed.error_code) == (422, 42201)

        latest = sr.get_latest_version("orders-value")
        assert (latest.schema_id, latest.version, latest.subject) == (second, 2, "orders-value")
        assert json.loads(sr.get_schema(first).schema_str)["fields"][0]["name"] == "id"
        assert sr.lookup_schema("orders-value", Schema(ORDER_V1, "AVRO")).version == 1
        assert sr.set_compatibility("orders-value", "FULL") == {"compatibility": "FULL"}
        assert sr.get_compatibility("orders-value") == "FULL"
        assert sr.set_compatibility(level="FORWARD") == {"compatibility": "FORWARD"}
        assert sr.get_compatibility() == "FORWARD"

        assert sr.register_schema("gone-value", Schema(ORDER_V1, "AVRO")) == first
        assert sr.delete_subject("gone-value") == [1]
        assert sr.get_subjects() == ["orders-value"]
        assert sr.delete_subject("gone-value", permanent=True) == [1]
        missing = refused(sr.get_versions, "gone-value")
        assert (missing.http_status_code, missing.error_code) == (404, 40401)
        unknown = refused(sr.get_schema, 9999)
        assert (unknown.http_status_code, unknown.error_code) == (404, 40403)
    finally:
        worker.stop()

    worker.start()  # the same state.dir: the registry reads its topic back
    try:
        sr = client(worker)
        assert json.loads(sr.get_schema(second).schema_str)["fields"][2]["name"] == "note"
        assert sr.get_versions("orders-value") == [1, 2]
        assert sr.get_compatibility("orders-value") == "FULL"
        third = sr.register_schema("other-value", Schema(ORDER_RENAMED_ID, "AVRO"))
        assert third not in (first, second), "a restarted worker never reuses an id"
    finally:
        worker.stop()


def test_kctl_schema_lists_shows_checks_and_sets_levels(tmp_path):
    worker = start_worker(tmp_path)
    try:
        sr = client(worker)
        sr.register_schema("orders-value", Schema(ORDER_V1, "AVRO"))
        second = sr.register_schema("orders-value", Schema(ORDER_V2, "AVRO"))
        listed = json.loads(worker.kctl("schema", "list", "-o", "json").stdout)
        assert listed == [{"subject": "orders-value", "version": 2, "id": second,
                           "type": "AVRO"}]
        assert "orders-value" in worker.kctl("schema", "list").stdout
        assert json.loads(worker.kctl("schema", "versions", "orders-value",
                                      "-o", "json").stdout) == [1, 2]
        shown = worker.kctl("schema", "show", "orders-value", "--version", "1").stdout
        assert "orders-value version 1" in shown and '"amount"' in shown and "note" not in shown

        good, bad = tmp_path / "good.avsc", tmp_path / "bad.avsc"
        good.write_text(ORDER_V2)
        bad.write_text(ORDER_RENAMED_ID)
        assert "compatible with orders-value" in worker.kctl(
            "schema", "compat", "orders-value", str(good)).stdout
        refused = worker.kctl("schema", "compat", "orders-value", str(bad), check=False)
        assert refused.returncode == 1 and "NOT compatible" in refused.stdout
        assert "id" in refused.stdout  # the incompatible field is named

        assert worker.kctl("schema", "config").stdout.strip() == "BACKWARD"
        assert "orders-value: FULL" in worker.kctl("schema", "config", "orders-value",
                                                    "--level", "full").stdout
        assert worker.kctl("schema", "config", "orders-value").stdout.strip() == "FULL"
        assert sr.get_compatibility("orders-value") == "FULL"
        missing = worker.kctl("schema", "versions", "nosuch", check=False)
        assert missing.returncode == 3 and "nosuch" in missing.stderr
    finally:
        worker.stop()


def test_a_worker_with_the_registry_disabled_serves_none(tmp_path):
    worker = start_worker(tmp_path, **{"schema.registry.enable": "false"})
    try:
        r = httpx.get(f"{worker.url}/schema-registry/subjects", timeout=10)
        assert r.status_code == 404
        assert "schema.registry.enable=false" in r.json()["message"]
    finally:
        worker.stop()
