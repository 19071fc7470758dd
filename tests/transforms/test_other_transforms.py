"""Timestamp, routing, header and filter SMTs and the predicates."""

from __future__ import annotations

import datetime as dt

import pytest

from kctl.api.data import (
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    Struct,
    date_schema,
    time_schema,
    timestamp_schema,
)
from kctl.api.records import Headers
from kctl.errors import ConfigError, DataError, ValidationError

UTC = dt.UTC
WHEN = dt.datetime(2024, 3, 5, 14, 7, 9, 123000, tzinfo=UTC)
WHEN_MS = 1709647629123


# --- TimestampConverter -----------------------------------------------------------------------

def test_timestamp_converter_turns_a_unix_field_into_a_timestamp_with_schema(make, source):
    schema = SchemaBuilder.struct().field("id", INT32_SCHEMA).field("at", INT64_SCHEMA).build()
    t = make("TimestampConverter$Value", field="at", target_type="Timestamp")
    out = t.apply(source(Struct(schema, {"id": 1, "at": WHEN_MS}), schema))
    assert out.value_schema.field("at").schema == timestamp_schema()
    assert out.value["at"] == WHEN


@pytest.mark.parametrize(("target", "extra", "expected"), [
    ("string", {"format": "yyyy-MM-dd'T'HH:mm:ss.SSSX"}, "2024-03-05T14:07:09.123Z"),
    ("string", {"format": "dd/MMM/yy hh:mm a"}, "05/Mar/24 02:07 PM"),
    ("unix", {}, WHEN_MS),
    ("unix", {"unix.precision": "seconds"}, WHEN_MS // 1000),
    ("unix", {"unix.precision": "microseconds"}, WHEN_MS * 1000),
    ("Date", {}, dt.date(2024, 3, 5)),
    ("Time", {}, dt.time(14, 7, 9, 123000)),
    ("Timestamp", {}, WHEN),
])
def test_timestamp_converter_schemaless_targets(make, source, target, extra, expected):
    t = make("TimestampConverter$Value", field="at", target_type=target, **{
        k.replace(".", "_"): v for k, v in extra.items()})
    assert t.apply(source({"at": WHEN, "x": 1})).value == {"at": expected, "x": 1}


def test_timestamp_converter_parses_strings_in_the_given_pattern(make, source):
    t = make("TimestampConverter$Value", target_type="unix", format="yyyy-MM-dd HH:mm:ss.SSS")
    out = t.apply(source("2024-03-05 14:07:09.123", STRING_SCHEMA))
    assert out.value == WHEN_MS and out.value_schema == INT64_SCHEMA
    zoned = make("TimestampConverter$Value", target_type="Timestamp",
                 format="yyyy-MM-dd'T'HH:mmXXX").apply(source("2024-03-05T15:07+01:00"))
    assert zoned.value == WHEN.replace(second=0, microsecond=0)
    with pytest.raises(DataError, match="does not match pattern"):
        t.apply(source("yesterday", STRING_SCHEMA))


def test_timestamp_converter_whole_key_and_logical_schemas(make, source):
    out = make("TimestampConverter$Key", target_type="Date").apply(
        source(key=WHEN, key_schema=timestamp_schema(True)))
    assert out.key == dt.date(2024, 3, 5) and out.key_schema == date_schema(True)
    out = make("TimestampConverter$Value", target_type="Time").apply(source(WHEN, timestamp_schema()))
    assert out.value_schema == time_schema()


def test_timestamp_converter_config_errors(make):
    with pytest.raises(ConfigError, match="requires format"):
        make("TimestampConverter$Value", target_type="string")
    with pytest.raises(ValidationError):
        make("TimestampConverter$Value", target_type="epoch")
    with pytest.raises(ValidationError) as e:
        make("TimestampConverter$Value", target_type="string", format="yyyy-QQ")
    assert "Illegal pattern character 'Q'" in e.value.errors["format"][0]


# --- routers ----------------------------------------------------------------------------------

def test_timestamp_router_appends_the_record_day(make, source):
    t = make("TimestampRouter", topic_format="${topic}_${timestamp}", timestamp_format="yyyy.MM.dd")
    assert t.apply(source({}, timestamp=WHEN_MS)).topic == "orders_2024.03.05"
    with pytest.raises(DataError, match="Timestamp missing"):
        t.apply(source({}))


def test_regex_router_rewrites_matching_topics_with_java_group_references(make, source):
    t = make("RegexRouter", regex=r"(\w+)-(?<env>prod|dev)", replacement="$2.${env}.$1\\$")
    assert t.apply(source(topic="orders-prod")).topic == "prod.prod.orders$"
    assert t.apply(source(topic="orders-prod-eu")).topic == "orders-prod-eu"  # full match only
    with pytest.raises(ValidationError):
        make("RegexRouter", regex="(", replacement="x")


def test_filter_drops_everything(make, source, sink):
    assert make("Filter").apply(source({"a": 1})) is None
    assert make("Filter").apply(sink({"a": 1})) is None


# --- headers ----------------------------------------------------------------------------------

def test_insert_header_infers_the_literal_type_and_never_mutates_the_input(make, source):
    original = source({"a": 1}, headers=Headers().add("trace", "t1"))
    out = make("InsertHeader", header="version", value_literal="3").apply(original)
    h = out.headers.last_with_name("version")
    assert (h.value, h.schema) == (3, INT8_SCHEMA)
    assert len(original.headers) == 1
    assert make("InsertHeader", header="pi", value_literal="3.14").apply(original) \
        .headers.last_with_name("pi").schema == FLOAT64_SCHEMA
    assert make("InsertHeader", header="who", value_literal="kctl").apply(original) \
        .headers.last_with_name("who").value == "kctl"


def test_drop_headers_removes_every_header_with_those_names(make, source):
    rec = source({}, headers=Headers().add("a", 1).add("b", 2).add("a", 3))
    out = make("DropHeaders", headers="a,c").apply(rec)
    assert [h.key for h in out.headers] == ["b"]
    assert len(rec.headers) == 3


def test_header_from_moves_struct_fields_into_headers(make, source):
    schema = SchemaBuilder.struct().field("id", INT32_SCHEMA) \
        .field("trace", OPTIONAL_STRING_SCHEMA).build()
    rec = source(Struct(schema, {"id": 1, "trace": "abc"}), schema)
    moved = make("HeaderFrom$Value", fields="trace", headers="x-trace", operation="move").apply(rec)
    assert [f.name for f in moved.value_schema.fields] == ["id"]
    h = moved.headers.last_with_name("x-trace")
    assert (h.value, h.schema) == ("abc", OPTIONAL_STRING_SCHEMA)
    copied = make("HeaderFrom$Value", fields="trace", headers="x-trace", operation="copy").apply(rec)
    assert copied.value["trace"] == "abc" and copied.headers.last_with_name("x-trace").value == "abc"


def test_header_from_without_schema_and_its_config_checks(make, source):
    out = make("HeaderFrom$Key", fields="a,b", headers="ha,hb", operation="move").apply(
        source({}, key={"a": 1, "b": 2, "c": 3}))
    assert out.key == {"c": 3}
    assert [(h.key, h.value) for h in out.headers] == [("ha", 1), ("hb", 2)]
    with pytest.raises(ConfigError, match="same number of elements"):
        make("HeaderFrom$Value", fields="a,b", headers="h", operation="copy")
    with pytest.raises(ValidationError):
        make("HeaderFrom$Value", fields="a", headers="h", operation="teleport")


# --- predicates -------------------------------------------------------------------------------

def test_predicates(pred, source):
    assert pred("TopicNameMatches", pattern="ord.*").test(source(topic="orders"))
    assert not pred("TopicNameMatches", pattern="ord").test(source(topic="orders"))
    has = pred("HasHeaderKey", name="trace")
    assert has.test(source({}, headers=Headers().add("trace", None)))
    assert not has.test(source({}))
    tomb = pred("org.apache.kafka.connect.transforms.predicates.RecordIsTombstone")
    assert tomb.test(source(None)) and not tomb.test(source({"a": 1}))
