"""ConfigDef: parsing, per-field validation, recommenders and generated docs."""

import pytest

from kctl.api import ConfigDef, ConfigType, Importance, Password, Range, ValidString
from kctl.errors import ValidationError


def connector_def() -> ConfigDef:
    return (
        ConfigDef()
        .define("path", ConfigType.STRING, doc="Where to read", importance=Importance.HIGH)
        .define("batch.max.rows", ConfigType.INT, 1000, Range.at_least(1), doc="Rows per batch")
        .define("format", ConfigType.STRING, "json", ValidString.in_("json", "csv"), doc="Format")
        .define("fields", ConfigType.LIST, [], doc="Fields")
        .define("enabled", ConfigType.BOOLEAN, True, doc="On")
        .define("connection.password", ConfigType.PASSWORD, None, doc="Secret")
    )


def test_parse_applies_defaults_and_types():
    values = connector_def().parse({"path": "/in", "batch.max.rows": "50", "fields": "a, b",
                                    "enabled": "false"})
    assert values == {"path": "/in", "batch.max.rows": 50, "format": "json",
                      "fields": ["a", "b"], "enabled": False, "connection.password": None}


def test_validate_reports_every_bad_field_without_raising():
    results = {v.name: v for v in connector_def().validate(
        {"batch.max.rows": "0", "format": "xml", "enabled": "maybe"})}
    assert results["path"].errors == ['Missing required configuration "path" which has no default value.']
    assert "at least 1" in results["batch.max.rows"].errors[0]
    assert "json, csv" in results["format"].errors[0]
    assert "true or false" in results["enabled"].errors[0]
    assert results["fields"].errors == []


def test_parse_raises_validation_error_naming_fields():
    with pytest.raises(ValidationError) as e:
        connector_def().parse({"batch.max.rows": "x"})
    assert set(e.value.errors) == {"path", "batch.max.rows"}
    assert "Expected an integer" in e.value.errors["batch.max.rows"][0]


def test_password_never_prints_its_value():
    values = connector_def().parse({"path": "p", "connection.password": "s3cret"})
    pw = values["connection.password"]
    assert isinstance(pw, Password) and pw.value() == "s3cret"
    assert "s3cret" not in repr(values) and str(pw) == "[hidden]"


def test_recommender_values_and_visibility():
    class Rec:
        def valid_values(self, name, parsed):
            return ["a", "b"] if parsed.get("format") == "csv" else []

        def visible(self, name, parsed):
            return parsed.get("format") == "csv"

    d = ConfigDef().define("format", ConfigType.STRING, "json").define(
        "delimiter", ConfigType.STRING, "a", recommender=Rec())
    json_result = {v.name: v for v in d.validate({})}["delimiter"]
    assert not json_result.visible and json_result.recommended_values == []
    csv_result = {v.name: v for v in d.validate({"format": "csv", "delimiter": "z"})}["delimiter"]
    assert csv_result.visible and csv_result.recommended_values == ["a", "b"]
    assert csv_result.errors


def test_duplicate_definition_is_an_error():
    with pytest.raises(Exception, match="defined twice"):
        ConfigDef().define("a", ConfigType.INT, 1).define("a", ConfigType.INT, 2)


def test_markdown_table_lists_keys_defaults_and_validators():
    md = connector_def().to_markdown()
    assert "| `batch.max.rows` | int | `1000` | [1,...,...] | medium | Rows per batch |" in md
    assert "`format`" in md and "[json, csv]" in md


def test_a_recommended_list_is_checked_item_by_item():
    class Tables:
        def valid_values(self, name, parsed):
            return ["orders", "users"]

        def visible(self, name, parsed):
            return True

    d = ConfigDef().define("tables", ConfigType.LIST, "", recommender=Tables())
    [ok] = d.validate({"tables": "users,orders"})
    assert ok.errors == [] and ok.recommended_values == ["orders", "users"]
    [bad] = d.validate({"tables": "users,nope"})
    assert bad.errors and "must be one of" in bad.errors[0]
