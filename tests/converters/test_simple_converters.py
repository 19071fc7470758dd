"""String and byte-array converters, and how a worker finds converters by name."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl.api.converter import Converter
from kctl.api.data import (
    INT32_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    SchemaAndValue,
)
from kctl.errors import ConfigError, DataError, PluginError
from kctl.runtime.converters import (
    ByteArrayConverter,
    JsonConverter,
    StringConverter,
    load_converter,
)


@given(st.text())
def test_strings_round_trip_in_utf8(s):
    c = load_converter("string", {}, False)
    assert c.to_connect_data("t", c.from_connect_data("t", None, s)) == \
        SchemaAndValue(OPTIONAL_STRING_SCHEMA, s)


def test_string_converter_writes_other_values_as_text_and_honours_the_encoding():
    c = load_converter("StringConverter", {"converter.encoding": "latin-1"}, True)
    assert c.from_connect_data("t", INT32_SCHEMA, 42) == b"42"
    assert c.from_connect_data("t", None, "café") == "café".encode("latin-1")
    assert c.to_connect_data("t", "café".encode("latin-1")).value == "café"
    assert c.from_connect_data("t", None, None) is None


def test_string_converter_rejects_bytes_it_cannot_decode_and_unknown_encodings():
    with pytest.raises(DataError, match="utf-8"):
        load_converter("string", {}, False).to_connect_data("t", b"\xff\xfe")
    with pytest.raises(ConfigError, match=r"key\.converter\.converter\.encoding"):
        load_converter("string", {"converter.encoding": "klingon"}, True)


@given(st.binary() | st.none())
def test_bytes_pass_through_untouched(b):
    c = load_converter("bytes", {}, False)
    raw = c.from_connect_data("t", OPTIONAL_BYTES_SCHEMA, b)
    assert raw == b
    assert c.to_connect_data("t", raw) == SchemaAndValue(OPTIONAL_BYTES_SCHEMA, b)


def test_byte_array_converter_refuses_non_bytes_data():
    c = ByteArrayConverter()
    with pytest.raises(DataError, match="Invalid schema type for ByteArrayConverter: INT32"):
        c.from_connect_data("t", INT32_SCHEMA, 1)
    with pytest.raises(DataError, match="not compatible with objects of type str"):
        c.from_connect_data("t", None, "text")


class UpperCaseConverter(Converter):
    def configure(self, configs, is_key):
        self.configs = dict(configs)

    def from_connect_data(self, topic, schema, value, headers=None):
        return str(value).upper().encode()

    def to_connect_data(self, topic, value, headers=None):
        return SchemaAndValue(None, value.decode().lower())


@pytest.mark.parametrize(("name", "cls"), [
    ("json", JsonConverter), ("JsonConverter", JsonConverter),
    ("org.apache.kafka.connect.json.JsonConverter", JsonConverter),
    ("org.apache.kafka.connect.storage.StringConverter", StringConverter),
    ("org.apache.kafka.connect.converters.ByteArrayConverter", ByteArrayConverter),
    ("kctl.runtime.converters.StringConverter", StringConverter),
    (f"{__name__}.UpperCaseConverter", UpperCaseConverter),
    (f"{__name__}:UpperCaseConverter", UpperCaseConverter),
])
def test_converters_are_found_by_short_kafka_or_python_name(name, cls):
    assert type(load_converter(name, {}, False)) is cls


def test_a_plugin_converter_receives_its_configs():
    c = load_converter(f"{__name__}.UpperCaseConverter", {"x": "1"}, True)
    assert c.configs == {"x": "1"}
    assert c.from_connect_data("t", None, "abc") == b"ABC"


@pytest.mark.parametrize("name", ["thrift", "no.such.module.Conv", f"{__name__}.pytest", ""])
def test_unknown_converters_name_the_known_ones(name):
    with pytest.raises(PluginError) as e:
        load_converter(name, {}, False)
    assert "json" in str(e.value) and "ByteArrayConverter" in str(e.value)
