"""Reading a topic as `kctl topic` does, on the embedded log without a worker: a value
schema that changes is a new version, values keep their exact form as JSON shows them,
and pages are bounded and say where to read on."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from kctl.api import SchemaBuilder, Struct
from kctl.api.data import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, decimal_schema, timestamp_schema
from kctl.runtime.converters import JsonConverter, StringConverter
from kctl.runtime.secrets import HIDDEN, REDACTOR
from kctl.runtime.topics import Decoders, ReadRequest, describe_topic, plain, read_records
from kctl.transport.base import ProducerRecord, TopicSpec
from kctl.transport.embedded import EmbeddedTransport

V1 = SchemaBuilder.struct().name("row").field("id", INT64_SCHEMA).build()
V2 = (SchemaBuilder.struct().name("row").field("id", INT64_SCHEMA)
      .field("note", OPTIONAL_STRING_SCHEMA).build())


@pytest.fixture
def log(tmp_path):
    with EmbeddedTransport(tmp_path / "log") as t:
        t.admin().create_topics([TopicSpec("rows", 2)])
        yield t


def write(t, rows: list[tuple[int, Struct]]) -> None:
    conv = JsonConverter()
    producer = t.producer()
    for partition, value in rows:
        producer.send(ProducerRecord("rows", conv.from_connect_data("rows", value.schema, value),
                                     partition=partition, headers=(("origin", b"test"),)))
    producer.flush(10)
    producer.close()


def json_decoders() -> Decoders:
    return Decoders(StringConverter(), JsonConverter(), "worker defaults")


def test_a_schema_that_gains_a_field_is_a_second_version(log):
    write(log, [(0, Struct(V1, {"id": 1})), (1, Struct(V1, {"id": 2})),
                (0, Struct(V2, {"id": 3, "note": "new"}))])
    described = describe_topic(log, "rows", JsonConverter())
    assert [(p["partition"], p["start_offset"], p["end_offset"])
            for p in described["partitions"]] == [(0, 0, 2), (1, 0, 1)]
    v1, v2 = described["schemas"]
    assert (v1["version"], v1["records"], v2["version"], v2["records"]) == (1, 2, 2, 1)
    assert (v2["first_partition"], v2["first_offset"]) == (0, 1)
    assert [f["field"] for f in v2["schema"]["fields"]] == ["id", "note"]

    page = read_records(log, "rows", ReadRequest(partition=0), json_decoders())
    assert [(r["value"], r["schema"]) for r in page["records"]] == \
        [({"id": 1}, v1["id"]), ({"id": 3, "note": "new"}, v2["id"])]
    assert page["records"][0]["headers"] == [["origin", "test"]]


def test_pages_are_bounded_and_continue_where_the_last_one_ended(log):
    write(log, [(0, Struct(V1, {"id": i})) for i in range(5)])
    first = read_records(log, "rows", ReadRequest(partition=0, max_records=2), json_decoders())
    assert [r["offset"] for r in first["records"]] == [0, 1]
    assert first["next"] == {"0": 2} and first["more"]
    rest = read_records(log, "rows", ReadRequest(positions={0: 2}, max_records=10),
                        json_decoders())
    assert [r["offset"] for r in rest["records"]] == [2, 3, 4]
    assert rest["next"] == {"0": 5, "1": 0} and not rest["more"]
    one = read_records(log, "rows", ReadRequest(max_bytes=1), json_decoders())
    assert len(one["records"]) == 1 and one["more"]


def test_bytes_a_converter_cannot_decode_are_shown_as_text_with_its_error(log):
    producer = log.producer()
    producer.send(ProducerRecord("rows", b"not json", partition=1))
    producer.flush(10)
    [record] = read_records(log, "rows", ReadRequest(), json_decoders())["records"]
    assert record["value"] == "not json"
    assert record["errors"] and record["errors"][0].startswith("value: ")


def test_decoded_values_keep_their_exact_form():
    amount = decimal_schema(2)
    row = SchemaBuilder.struct().field("amount", amount).field(
        "at", timestamp_schema()).build()
    at = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)
    assert plain(Struct(row, {"amount": Decimal("12.30"), "at": at})) == \
        {"amount": "12.30", "at": "2024-05-01T12:30:00+00:00"}
    assert plain([b"text", b"\xff\x00"]) == ["text", "base64:/wA="]


def test_a_secret_the_worker_knows_is_hidden_in_the_records_shown(log, monkeypatch):
    monkeypatch.setattr(REDACTOR, "_values", set(REDACTOR._values))  # as it was, after
    monkeypatch.setattr(REDACTOR, "_pattern", REDACTOR._pattern)
    REDACTOR.add(["t0p-s3cret"])
    producer = log.producer()
    producer.send(ProducerRecord("rows", b'{"connection.password": "t0p-s3cret"}',
                                 partition=0, headers=(("pw", b"t0p-s3cret"),)))
    producer.flush(10)
    schemaless = JsonConverter()
    schemaless.configure({"schemas.enable": "false"}, False)
    [record] = read_records(log, "rows", ReadRequest(),
                            Decoders(StringConverter(), schemaless, "options"))["records"]
    assert record["value"] == {"connection.password": HIDDEN}
    assert record["headers"] == [["pw", HIDDEN]]
