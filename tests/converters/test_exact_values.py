"""Values cross the converters exactly (issue 23): decimals at every precision and scale Spark
(38 digits) and the databases (PostgreSQL's numeric: far more) allow, timestamps from year 1
to 9999 in any time zone, times of day, doubles including NaN, infinities and -0.0, unicode
text and raw bytes, through JsonConverter with and without schemas, in both decimal formats,
record by record and as whole Arrow columns.

Finding 1 of the issue: `numeric(38,10)` 1234567890123456789012345678.0123456789 arrived as
...678.0000000000 (the decimal context's 28 digits), and the 38-digit
-9999999999999999999999999999.9999999999 came back as a 29-digit value no Arrow
decimal(38,10) could hold.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kctl.api.arrow import PRECISION_PARAM, connect_to_arrow_type
from kctl.api.data import (
    FLOAT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from kctl.errors import DataError
from kctl.runtime.converters import (
    JsonConverter,
    bytes_to_decimal,
    decimal_to_bytes,
    load_converter,
)

PROPS = settings(max_examples=200, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def conv(enable: bool = True, numeric: bool = False) -> JsonConverter:
    c = load_converter("json", {"schemas.enable": str(enable).lower(),
                                "decimal.format": "NUMERIC" if numeric else "BASE64"}, False)
    assert isinstance(c, JsonConverter)
    return c


def decimal_type(precision: int, scale: int, optional: bool = True) -> Schema:
    base = decimal_schema(scale, optional)
    return Schema(base.type, optional=optional, name=base.name, version=base.version,
                  parameters={"scale": str(scale), PRECISION_PARAM: str(precision)})


@st.composite
def decimals(draw: Any, max_precision: int = 38) -> tuple[int, int, decimal.Decimal]:
    """(precision, scale, value): any value a column of that type holds, at its scale."""
    precision = draw(st.integers(1, max_precision))
    scale = draw(st.integers(0, precision))
    digits = draw(st.integers(0, precision))
    unscaled = draw(st.integers(-(10 ** digits) + 1, 10 ** digits - 1))
    sign, text = (1 if unscaled < 0 else 0), str(abs(unscaled))
    return precision, scale, decimal.Decimal((sign, tuple(map(int, text)), -scale))


def same_decimal(a: decimal.Decimal, b: decimal.Decimal) -> bool:
    """Equal value and equal scale (Java's BigDecimal.equals, minus the sign of zero)."""
    return a == b and a.as_tuple().exponent == b.as_tuple().exponent


# --- the findings, as they were seen --------------------------------------------------------


@pytest.mark.parametrize("text", ["1234567890123456789012345678.0123456789",
                                  "-9999999999999999999999999999.9999999999",
                                  "9999999999999999999999999999.9999999999"])
def test_finding_1_decimals_of_38_digits_keep_every_digit(text):
    value = decimal.Decimal(text)
    raw = decimal_to_bytes(value, 10)
    back = bytes_to_decimal(raw, 10)
    assert same_decimal(back, value)
    assert pa.array([back], pa.decimal128(38, 10))[0].as_py() == value  # fits numeric(38,10)
    schema = SchemaBuilder.struct().field("n", decimal_type(38, 10)).build()
    for c in (conv(), conv(numeric=True)):
        out = c.to_connect_data("t", c.from_connect_data("t", schema, Struct(schema, {"n": value})))
        assert same_decimal(out.value.get("n"), value)


def test_finding_1_unconstrained_numeric_keeps_its_fraction():
    value = decimal.Decimal("12345678901234567890.123456789012")
    assert same_decimal(bytes_to_decimal(decimal_to_bytes(value, 12), 12), value)


def test_a_decimal_with_more_fraction_than_its_scale_is_refused_not_rounded():
    with pytest.raises(DataError, match="does not fit scale 2"):
        decimal_to_bytes(decimal.Decimal("1.005"), 2)
    assert bytes_to_decimal(decimal_to_bytes(decimal.Decimal("1.500"), 1), 1) == \
        decimal.Decimal("1.5")  # trailing zeros are no loss


# --- properties -----------------------------------------------------------------------------


@PROPS
@given(decimals(max_precision=1000), st.integers(-5, 0))
def test_unscaled_bytes_round_trip_at_any_precision(case, extra_scale):
    """Kafka's Decimal encoding is exact at any size (PostgreSQL's numeric goes to 1000
    digits of precision); a negative scale too."""
    _, scale, value = case
    scale += extra_scale
    if extra_scale and value != value.quantize(decimal.Decimal(1).scaleb(-scale),
                                               context=decimal.Context(prec=2000)):
        with pytest.raises(DataError):
            decimal_to_bytes(value, scale)
        return
    back = bytes_to_decimal(decimal_to_bytes(value, scale), scale)
    assert back == value and back.as_tuple().exponent == -scale


@PROPS
@given(decimals(max_precision=100), st.booleans(), st.booleans())
def test_decimals_round_trip_through_json_envelopes(case, numeric, optional_null):
    precision, scale, value = case
    schema = SchemaBuilder.struct().field("n", decimal_type(precision, scale)).build()
    c = conv(numeric=numeric)
    v = None if optional_null else value
    out = c.to_connect_data("t", c.from_connect_data("t", schema, Struct(schema, {"n": v})))
    got = out.value.get("n")
    if v is None:
        assert got is None
    else:
        assert got == value
        if not numeric:
            assert same_decimal(got, value)


@PROPS
@given(decimals(max_precision=100))
def test_without_schemas_the_json_holds_the_exact_digits(case):
    """Schemaless readers get the payload alone: the base64 of the exact unscaled value, or
    (NUMERIC) a JSON number with every digit."""
    _, scale, value = case
    schema = decimal_schema(scale)
    b64 = json.loads(conv(enable=False).from_connect_data("t", schema, value))
    assert bytes_to_decimal(base64.b64decode(b64), scale) == value
    text = conv(enable=False, numeric=True).from_connect_data("t", schema, value).decode()
    assert decimal.Decimal(text) == value


@PROPS
@given(st.lists(decimals(max_precision=38), min_size=1, max_size=20), st.booleans())
def test_decimal_columns_encode_as_records_do_and_read_back_exactly(cases, numeric):
    """The columnar path (Arrow decimal128, Spark's 38 digits) writes what the per-record
    path writes, and it reads back to the same values."""
    precision = max(p for p, _, _ in cases)
    scale = min(s for _, s, _ in cases)
    values = [v for p, s, v in cases if len(v.as_tuple().digits) - s <= precision - scale]
    values = [v.quantize(decimal.Decimal(1).scaleb(-scale), context=decimal.Context(prec=100))
              if v == v.quantize(decimal.Decimal(1).scaleb(-scale),
                                 context=decimal.Context(prec=100)) else None for v in values]
    schema = SchemaBuilder.struct().field("n", decimal_type(precision, scale)).build()
    arr = pa.array([{"n": v} for v in values], connect_to_arrow_type(schema))
    c = conv(numeric=numeric)
    encoded = c.from_arrow("t", schema, arr)
    assert encoded is not None
    for v, raw in zip(values, encoded.to_pylist(), strict=True):
        assert raw == c.from_connect_data("t", schema, Struct(schema, {"n": v}))
        got = c.to_connect_data("t", raw).value.get("n")
        assert got == v


TIMESTAMPS = st.datetimes(min_value=dt.datetime(1, 1, 1, 0, 0),
                          max_value=dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
                          timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=14)),
                                                     dt.timezone(dt.timedelta(hours=-12)),
                                                     dt.timezone(dt.timedelta(hours=5,
                                                                              minutes=30))]))


def millis(t: dt.datetime) -> dt.datetime:
    """The instant Connect's Timestamp holds: epoch milliseconds (Kafka floors)."""
    u = t.astimezone(dt.UTC)
    return u.replace(microsecond=u.microsecond // 1000 * 1000)


@PROPS
@given(TIMESTAMPS)
def test_timestamps_from_year_1_to_9999_in_any_zone_keep_their_instant(t):
    try:
        t.astimezone(dt.UTC)
    except OverflowError:
        return  # year 1 minus a zone's offset: no such UTC instant
    schema = SchemaBuilder.struct().field("at", timestamp_schema(True)).build()
    for c in (conv(), conv(enable=True, numeric=True)):
        back = c.to_connect_data("t", c.from_connect_data("t", schema, Struct(schema, {"at": t})))
        assert back.value.get("at") == millis(t)
    arr = pa.array([{"at": t.astimezone(dt.UTC)}], connect_to_arrow_type(schema))
    assert conv().from_arrow("t", schema, arr).to_pylist() == \
        [conv().from_connect_data("t", schema, Struct(schema, {"at": t}))]


@PROPS
@given(st.times())
def test_times_of_day_round_trip_to_the_millisecond(t):
    schema = SchemaBuilder.struct().field("t", time_schema(True)).build()
    c = conv()
    raw = c.from_connect_data("t", schema, Struct(schema, {"t": t}))
    assert c.to_connect_data("t", raw).value.get("t") == t.replace(
        microsecond=t.microsecond // 1000 * 1000)
    arr = pa.array([{"t": t}], connect_to_arrow_type(schema))
    assert c.from_arrow("t", schema, arr).to_pylist() == [raw]


DOUBLES = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, 1.7976931348623157e308])


def same_double(a: float, b: float) -> bool:
    if math.isnan(a):
        return math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


@PROPS
@given(st.lists(DOUBLES, min_size=1, max_size=10))
def test_doubles_keep_every_bit_nan_infinities_and_negative_zero(xs):
    schema = SchemaBuilder.struct().field("x", FLOAT64_SCHEMA).build()
    c = conv()
    arr = pa.array([{"x": x} for x in xs], connect_to_arrow_type(schema))
    encoded = c.from_arrow("t", schema, arr).to_pylist()
    for x, raw in zip(xs, encoded, strict=True):
        assert raw == c.from_connect_data("t", schema, Struct(schema, {"x": x}))
        assert same_double(c.to_connect_data("t", raw).value.get("x"), x)
    decoded = c.to_arrow("t", encoded)
    if decoded is not None:  # the columnar reader, when it takes them, agrees bit for bit
        for x, got in zip(xs, decoded[1].field("x").to_pylist(), strict=True):
            assert same_double(got, x)


@PROPS
@given(st.lists(st.tuples(st.text(), st.binary()), min_size=1, max_size=10))
def test_unicode_text_and_bytes_round_trip(rows):
    schema = (SchemaBuilder.struct().field("s", STRING_SCHEMA)
              .field("b", Schema(Type.BYTES)).build())
    c = conv()
    arr = pa.array([{"s": s, "b": b} for s, b in rows], connect_to_arrow_type(schema))
    encoded = c.from_arrow("t", schema, arr).to_pylist()
    for (s, b), raw in zip(rows, encoded, strict=True):
        assert raw == c.from_connect_data("t", schema, Struct(schema, {"s": s, "b": b}))
        back = c.to_connect_data("t", raw).value
        assert (back.get("s"), back.get("b")) == (s, b)
    decoded = c.to_arrow("t", encoded)
    if decoded is not None:
        assert decoded[1].to_pylist() == [{"s": s, "b": b} for s, b in rows]
