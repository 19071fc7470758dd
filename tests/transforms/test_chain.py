"""The chain is configured with Kafka Connect's `transforms=`/`predicates=` syntax."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from kctl.api.data import INT32_SCHEMA, OPTIONAL_STRING_SCHEMA, SchemaBuilder, Struct
from kctl.api.records import Headers
from kctl.api.transform import Transformation
from kctl.errors import DataError, ValidationError
from kctl.transforms.chain import TransformationChain, validate_transforms

ORDER = (SchemaBuilder.struct().name("Order").field("id", INT32_SCHEMA)
         .field("card", OPTIONAL_STRING_SCHEMA).field("region", OPTIONAL_STRING_SCHEMA).build())

PIPELINE = {
    "connector.class": "FileSource",
    "transforms": "mask,route,tag",
    "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
    "transforms.mask.fields": "card",
    "transforms.mask.predicate": "isOrders",
    "transforms.route.type": "RegexRouter",
    "transforms.route.regex": "(.*)-raw",
    "transforms.route.replacement": "$1-clean",
    "transforms.tag.type": "InsertHeader",
    "transforms.tag.header": "masked",
    "transforms.tag.value.literal": "false",
    "transforms.tag.predicate": "isOrders",
    "transforms.tag.negate": "true",
    "predicates": "isOrders",
    "predicates.isOrders.type": "TopicNameMatches",
    "predicates.isOrders.pattern": "orders-.*",
}


def order(source, topic: str) -> Any:
    return source(Struct(ORDER, {"id": 1, "card": "4111", "region": "eu"}), ORDER, topic=topic)


def test_three_transforms_and_a_predicate_run_in_order(source):
    chain = TransformationChain.from_config(PIPELINE)
    assert [s.alias for s in chain] == ["mask", "route", "tag"]

    orders = chain.apply(order(source, "orders-raw"))
    assert orders.value["card"] == ""  # the predicate matched: masked
    assert orders.topic == "orders-clean"  # renamed by the router
    assert orders.headers.last_with_name("masked") is None  # negated predicate: not tagged

    refunds = chain.apply(order(source, "refunds-raw"))
    assert refunds.value["card"] == "4111"  # not an orders topic: left alone
    assert refunds.topic == "refunds-clean"
    assert refunds.headers.last_with_name("masked").value is False


def test_the_predicate_is_evaluated_against_the_record_as_it_reaches_the_stage(source):
    config = {**PIPELINE, "transforms": "route,mask"}
    out = TransformationChain.from_config(config).apply(order(source, "orders-raw"))
    assert out.topic == "orders-clean" and out.value["card"] == ""  # orders-clean still matches


def test_a_filter_with_a_predicate_drops_only_matching_records(source):
    chain = TransformationChain.from_config({
        "transforms": "dropTombstones,hoist",
        "transforms.dropTombstones.type": "Filter",
        "transforms.dropTombstones.predicate": "tomb",
        "transforms.hoist.type": "HoistField$Value",
        "transforms.hoist.field": "line",
        "predicates": "tomb",
        "predicates.tomb.type": "RecordIsTombstone",
    })
    assert chain.apply(source(None)) is None
    assert chain.apply(source("x")).value == {"line": "x"}


def test_no_transforms_means_records_pass_unchanged(source):
    rec = source({"a": 1})
    assert TransformationChain.from_config({}).apply(rec) is rec


def test_validation_errors_name_the_transform_and_key():
    errors = validate_transforms({
        "transforms": "mask,nope,cast,ins,router",
        "transforms.mask.type": "MaskField$Value",
        "transforms.mask.predicate": "missing",
        "transforms.nope.type": "NoSuchTransform",
        "transforms.cast.type": "Cast$Value",
        "transforms.cast.spec": "price:decimal",
        "transforms.ins.type": "InsertField",
        "transforms.router.type": "RegexRouter",
        "transforms.router.regex": "(unclosed",
        "transforms.router.replacement": "x",
        "transforms.router.negate": "maybe",
        "predicates": "p",
    })
    assert 'Missing required configuration "transforms.mask.fields"' in \
        errors["transforms.mask.fields"][0]
    assert "'missing' is not defined" in errors["transforms.mask.predicate"][0]
    assert "Unknown transformation 'NoSuchTransform'" in errors["transforms.nope.type"][0]
    assert "MaskField$Value" in errors["transforms.nope.type"][0]  # names the known ones
    assert "transforms.cast.spec" in errors["transforms.cast.spec"][0]
    assert "InsertField$Key or InsertField$Value" in errors["transforms.ins.type"][0]
    assert "Invalid regular expression" in errors["transforms.router.regex"][0]
    assert "true or false" in errors["transforms.router.negate"][0]
    assert "predicates.p.type" in errors


def test_from_config_refuses_a_bad_config_with_all_errors_attached():
    with pytest.raises(ValidationError) as e:
        TransformationChain.from_config({"transforms": "a", "transforms.a.type": "Cast$Value"})
    assert "transforms.a.spec" in str(e.value)
    assert set(e.value.errors) == {"transforms.a.spec"}


def test_a_good_config_validates_clean():
    assert validate_transforms(PIPELINE) == {}


class Upper(Transformation[Any]):
    """A plugin transform, found by dotted path or entry point."""

    def configure(self, props):
        self.field = props.get("field", "name")

    def apply(self, record):
        value = dict(record.value)
        value[self.field] = value[self.field].upper()
        return record.new_record(value=value)


class Explodes(Transformation[Any]):
    def apply(self, record):
        raise KeyError("boom")


def test_plugins_load_by_dotted_path(source):
    chain = TransformationChain.from_config({
        "transforms": "up", "transforms.up.type": f"{__name__}.Upper", "transforms.up.field": "n"})
    assert chain.apply(source({"n": "ann"})).value == {"n": "ANN"}


def test_plugins_load_from_the_kctl_transforms_entry_point_group(source, monkeypatch):
    ep = importlib.metadata.EntryPoint("Upper", f"{__name__}:Upper", "kctl.transforms")
    real = importlib.metadata.entry_points

    def fake(**kw):
        if kw.get("group") == "kctl.transforms":
            return importlib.metadata.EntryPoints([ep])
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    chain = TransformationChain.from_config({"transforms": "u", "transforms.u.type": "Upper"})
    assert chain.apply(source({"name": "bo"})).value == {"name": "BO"}


def test_a_transform_bug_keeps_its_type_and_gains_the_stage(source):
    chain = TransformationChain.from_config({
        "transforms": "bad", "transforms.bad.type": f"{__name__}.Explodes"})
    with pytest.raises(KeyError) as e:
        chain.apply(source({"a": 1}))
    assert e.value.__notes__ == [f"in transformation 'bad' ({__name__}.Explodes)"]
    assert chain.failed_stage is not None and chain.failed_stage.alias == "bad"


def test_data_errors_from_builtins_keep_their_type_and_gain_the_alias(source):
    chain = TransformationChain.from_config({
        "transforms": "x", "transforms.x.type": "ExtractField$Value", "transforms.x.field": "f"})
    with pytest.raises(DataError) as e:
        chain.apply(source("not a map"))
    assert any("'x'" in note for note in e.value.__notes__)


def test_header_changes_in_the_chain_do_not_leak_into_the_input_record(source):
    chain = TransformationChain.from_config({
        "transforms": "h", "transforms.h.type": "InsertHeader", "transforms.h.header": "k",
        "transforms.h.value.literal": "v"})
    rec = source({}, headers=Headers())
    chain.apply(rec)
    assert len(rec.headers) == 0


def test_yaml_style_numbers_and_booleans_are_accepted(source):
    chain = TransformationChain.from_config({
        "transforms": ["ins"], "transforms.ins.type": "InsertField$Value",
        "transforms.ins.static.field": "n", "transforms.ins.static.value": 5,
        "transforms.ins.replace.null.with.default": False})
    assert chain.apply(source({})).value == {"n": "5"}
