"""Routers, Filter, the header SMTs and the predicates on records with and without schemas.

These transforms look only at the topic, timestamp or headers, so whatever the record carries
(Structs with their schemas, plain maps, a tombstone with a value schema) must come out exactly
as it went in: same schema objects, same values, same source offsets or Kafka offsets.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from kctl.api.data import (
    INT8_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    Struct,
    timestamp_schema,
)
from kctl.api.records import Headers, SinkRecord, SourceRecord
from kctl.transforms.chain import TransformationChain

WHEN_MS = 1709647629123  # 2024-03-05T14:07:09.123Z

KEY = SchemaBuilder.struct().name("shop.OrderKey").field("id", INT32_SCHEMA).build()
ORDER = (SchemaBuilder.struct().name("shop.Order").version(3).optional()
         .field("id", INT32_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA)
         .field("at", timestamp_schema()).build())


def _headers() -> Headers:
    return Headers().add("trace", "t-1", STRING_SCHEMA).add("tenant", "acme", None)


def _kinds() -> dict[str, Any]:
    """One record of each shape the runtime hands to transforms, built fresh for each test."""
    key = Struct(KEY, {"id": 1})
    value = Struct(ORDER, {"id": 1, "note": "gift", "at": dt.datetime(2024, 3, 5, tzinfo=dt.UTC)})
    return {
        "source-schemaless": SourceRecord("orders", 0, None, {"id": 1}, None, {"id": 1, "n": "x"},
                                          WHEN_MS, _headers(), {"file": "a"}, {"line": 4}),
        "source-struct": SourceRecord("orders", 0, KEY, key, ORDER, value, WHEN_MS, _headers(),
                                      {"file": "a"}, {"line": 5}),
        "sink-struct": SinkRecord("orders", 2, KEY, key, ORDER, value, WHEN_MS, _headers(),
                                  kafka_offset=41),
        "sink-tombstone-with-schema": SinkRecord("orders", 2, KEY, key, ORDER, None, WHEN_MS,
                                                 _headers(), kafka_offset=42),
        "sink-primitive-schemas": SinkRecord("orders", 2, STRING_SCHEMA, "k", INT32_SCHEMA, 7,
                                             WHEN_MS, _headers(), kafka_offset=43),
    }


KINDS = list(_kinds())
EACH_KIND = pytest.mark.parametrize("kind", KINDS)
TOMBSTONES = {"sink-tombstone-with-schema"}


def assert_only_changed(out: Any, original: Any, *changed: str) -> None:
    """Every attribute but `changed` is the very same object as in the input record."""
    assert type(out) is type(original)
    for f in dataclasses.fields(original):
        if f.name not in changed:
            assert getattr(out, f.name) is getattr(original, f.name), f.name


# --- routers ----------------------------------------------------------------------------------

@EACH_KIND
def test_timestamp_router_changes_only_the_topic(make, kind):
    rec = _kinds()[kind]
    out = make("TimestampRouter").apply(rec)  # defaults: ${topic}-${timestamp}, yyyyMMdd
    assert out.topic == "orders-20240305"
    assert_only_changed(out, rec, "topic")


@EACH_KIND
def test_timestamp_router_with_a_custom_format(make, kind):
    rec = _kinds()[kind]
    out = make("TimestampRouter", **{"topic.format": "archive.${timestamp}.${topic}",
                                     "timestamp.format": "yyyy-MM-dd'T'HH"}).apply(rec)
    assert out.topic == "archive.2024-03-05T14.orders"
    assert_only_changed(out, rec, "topic")


def test_timestamp_router_default_configuration_as_kafka_tests_it(make):
    rec = SourceRecord("test", 0, None, None, None, None, 1483425001864)
    assert make("TimestampRouter").apply(rec).topic == "test-20170103"


@EACH_KIND
def test_regex_router_changes_only_the_topic(make, kind):
    rec = _kinds()[kind]
    out = make("RegexRouter", regex="(ord)(ers)", replacement="$1-$2-v2").apply(rec)
    assert out.topic == "ord-ers-v2"
    assert_only_changed(out, rec, "topic")


@EACH_KIND
def test_regex_router_returns_the_record_itself_when_the_topic_does_not_match(make, kind):
    rec = _kinds()[kind]
    assert make("RegexRouter", regex="refunds", replacement="x").apply(rec) is rec


@pytest.mark.parametrize(("regex", "replacement", "topic", "expected"), [
    ("foo", "bar", "foo", "bar"),  # static replacement
    ("foo", "bar", "orig", "orig"),  # no match
    ("(.*)", "$1", "orig", "orig"),  # identity
    ("(.*)", "prefix-$1", "orig", "prefix-orig"),
    ("(.*)", "$1-suffix", "orig", "orig-suffix"),
    (r"(.*)-(\d\d\d\d\d\d\d\d)", "$1", "index-20160117", "index"),  # slice
])
def test_regex_router_cases_from_kafka(make, regex, replacement, topic, expected):
    rec = SinkRecord(topic, 0, KEY, Struct(KEY, {"id": 1}), None, None, None, kafka_offset=0)
    assert make("RegexRouter", regex=regex, replacement=replacement).apply(rec).topic == expected


# --- Filter -----------------------------------------------------------------------------------

@EACH_KIND
def test_filter_drops_records_of_every_shape(make, kind):
    assert make("Filter").apply(_kinds()[kind]) is None


# --- headers ----------------------------------------------------------------------------------

@EACH_KIND
def test_insert_header_adds_a_typed_header_and_changes_nothing_else(make, kind):
    rec = _kinds()[kind]
    out = make("InsertHeader", header="version", value_literal="3").apply(rec)
    assert [(h.key, h.value, h.schema) for h in out.headers] == [
        ("trace", "t-1", STRING_SCHEMA), ("tenant", "acme", None), ("version", 3, INT8_SCHEMA)]
    assert len(rec.headers) == 2  # the input's headers are not mutated
    assert_only_changed(out, rec, "headers")


@EACH_KIND
def test_insert_header_next_to_a_header_of_the_same_name(make, kind):
    rec = _kinds()[kind]
    out = make("InsertHeader", header="trace", value_literal="t-2").apply(rec)
    assert [h.value for h in out.headers.all_with_name("trace")] == ["t-1", "t-2"]
    assert out.headers.last_with_name("trace").schema == STRING_SCHEMA
    assert_only_changed(out, rec, "headers")


@EACH_KIND
def test_drop_headers_removes_headers_and_changes_nothing_else(make, kind):
    rec = _kinds()[kind]
    out = make("DropHeaders", headers="trace,absent").apply(rec)
    assert [h.key for h in out.headers] == ["tenant"]
    assert len(rec.headers) == 2
    assert_only_changed(out, rec, "headers")


@EACH_KIND
def test_drop_headers_of_absent_names_returns_the_record_itself(make, kind):
    rec = _kinds()[kind]
    assert make("DropHeaders", headers="absent").apply(rec) is rec


def test_drop_headers_needs_at_least_one_name(make):
    from kctl.errors import ValidationError

    with pytest.raises(ValidationError) as e:
        make("DropHeaders", headers="")
    assert "headers" in e.value.errors


# --- predicates -------------------------------------------------------------------------------

@EACH_KIND
def test_topic_name_matches_looks_only_at_the_topic(pred, kind):
    rec = _kinds()[kind]
    assert pred("TopicNameMatches", pattern="ord.*").test(rec)
    assert not pred("TopicNameMatches", pattern="ord").test(rec)  # a full match is needed
    assert not pred("TopicNameMatches", pattern="refunds|returns").test(rec)


@pytest.mark.parametrize(("topic", "matches"), [
    ("my-prefix-", True), ("my-prefix-foo", True), ("x-my-prefix-", False),
    ("x-my-prefix-foo", False), ("your-prefix-", False), ("your-prefix-foo", False),
])
def test_topic_name_matches_cases_from_kafka(pred, topic, matches):
    rec = SinkRecord(topic, 0, KEY, Struct(KEY, {"id": 1}), None, None, None, kafka_offset=0)
    assert pred("TopicNameMatches", pattern="my-prefix-.*").test(rec) is matches


@EACH_KIND
def test_has_header_key_looks_only_at_header_names(pred, kind):
    rec = _kinds()[kind]
    assert pred("HasHeaderKey", name="trace").test(rec)
    assert pred("HasHeaderKey", name="tenant").test(rec)  # a header without a schema counts too
    assert not pred("HasHeaderKey", name="id").test(rec)  # a field of the key/value is no header
    without = dataclasses.replace(rec, headers=Headers())
    assert not pred("HasHeaderKey", name="trace").test(without)


@pytest.mark.parametrize(("names", "has_foo"), [
    (["foo"], True), (["foo", "bar"], True), (["bar", "foo", "bar", "foo"], True),
    (["bar"], False), (["bar", "bar"], False), ([], False),
])
def test_has_header_key_cases_from_kafka(pred, names, has_foo):
    headers = Headers()
    for n in names:
        headers.add(n, None)
    rec = SourceRecord("t", None, None, None, None, None, None, headers)
    assert pred("HasHeaderKey", name="foo").test(rec) is has_foo


@EACH_KIND
def test_record_is_tombstone_only_for_a_null_value_whatever_the_schema(pred, kind):
    rec = _kinds()[kind]
    assert pred("RecordIsTombstone").test(rec) is (kind in TOMBSTONES)


def test_record_is_tombstone_ignores_the_key_and_empty_structs(pred):
    tomb = pred("RecordIsTombstone")
    empty_struct = Struct(ORDER)  # every field null, but the value itself is there
    assert not tomb.test(SinkRecord("t", 0, None, None, ORDER, empty_struct, None, kafka_offset=0))
    assert tomb.test(SinkRecord("t", 0, KEY, Struct(KEY, {"id": 1}), None, None, None,
                                kafka_offset=0))
    assert tomb.test(SourceRecord("t", 0, None, None, ORDER, None))


@EACH_KIND
def test_predicates_do_not_change_the_record(pred, kind):
    rec = _kinds()[kind]
    snapshot = dataclasses.replace(rec)
    for p in (pred("TopicNameMatches", pattern=".*"), pred("HasHeaderKey", name="trace"),
              pred("RecordIsTombstone")):
        p.test(rec)
    assert rec == snapshot and len(rec.headers) == 2


def test_topic_name_matches_config_checks_as_kafka(pred):
    from kctl.errors import ValidationError

    for props, message in (({}, 'Missing required configuration "pattern"'),
                           ({"pattern": ""}, "String must be non-empty"),
                           ({"pattern": "["}, "Invalid regular expression"),
                           ({"pattern": "*"}, "Invalid regular expression")):
        with pytest.raises(ValidationError) as e:
            pred("TopicNameMatches", **props)
        assert message in e.value.errors["pattern"][0], props


def test_has_header_key_config_checks_as_kafka(pred):
    from kctl.errors import ValidationError

    for props, message in (({}, 'Missing required configuration "name"'),
                           ({"name": ""}, "String must be non-empty")):
        with pytest.raises(ValidationError) as e:
            pred("HasHeaderKey", **props)
        assert message in e.value.errors["name"][0], props


# --- predicates with negate, in a chain, on records with schemas ------------------------------

CHAIN = {
    "transforms": "dropTombstones,daily,tagUntraced",
    "transforms.dropTombstones.type": "Filter",
    "transforms.dropTombstones.predicate": "isTombstone",
    "transforms.daily.type": "TimestampRouter",
    "transforms.daily.predicate": "isOrders",
    "transforms.daily.negate": "true",  # route everything but the orders topic
    "transforms.tagUntraced.type": "InsertHeader",
    "transforms.tagUntraced.header": "untraced",
    "transforms.tagUntraced.value.literal": "true",
    "transforms.tagUntraced.predicate": "hasTrace",
    "transforms.tagUntraced.negate": "true",
    "predicates": "isTombstone,isOrders,hasTrace",
    "predicates.isTombstone.type": "RecordIsTombstone",
    "predicates.isOrders.type": "TopicNameMatches",
    "predicates.isOrders.pattern": "orders",
    "predicates.hasTrace.type": "HasHeaderKey",
    "predicates.hasTrace.name": "trace",
}


@EACH_KIND
def test_a_chain_of_predicated_transforms_keeps_schemas_intact(kind):
    chain = TransformationChain.from_config(CHAIN)
    rec = _kinds()[kind]
    out = chain.apply(rec)
    if kind in TOMBSTONES:
        assert out is None
        return
    assert out is rec  # orders topic, traced: every stage's predicate kept it away

    elsewhere = dataclasses.replace(rec, topic="refunds", headers=Headers())
    routed = chain.apply(elsewhere)
    assert routed.topic == "refunds-20240305"
    assert [(h.key, h.value) for h in routed.headers] == [("untraced", True)]
    assert_only_changed(routed, elsewhere, "topic", "headers")
