"""JsonConverter's columnar path: whole Arrow columns to and from its wire format.

`JsonConverter.from_arrow` and `to_arrow` call into this module (lazily: it imports
pyarrow). Each function here gives exactly what the per-record converter gives for every
row, or None when it cannot guarantee that; the runtime then converts record by record,
and that path names the bad record and raises the precise error.

Encoding builds each row's text with pyarrow compute kernels: integers and booleans are
cast, floats are cast where Arrow's shortest repr matches Python's (the other rows go
through json.dumps), strings get their quotes in the join and, when one C pass over the
column finds a character to escape, only the rows a regex flags go through json.dumps;
a struct's row is one `binary_join_element_wise` of its field texts between the field
names (nested structs inline unless they have null rows). Decoding parses the payloads with
`pyarrow.json.read_json` under an explicit schema, after checks that make the Arrow
parser and Python's json agree (see `decode_envelopes`).

Supported schemas: INT8/16/32/64, FLOAT32/64, BOOLEAN, STRING, BYTES and STRUCTs of them,
with no default anywhere; encoding and decoding also take the logical types Timestamp, Date,
Time and Decimal (what database rows hold; decimals decode from base64, the default
decimal.format). Everything else returns None.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from kctl.api.arrow import connect_to_arrow_type
from kctl.api.data import DATE, DECIMAL, TIME, TIMESTAMP, Schema, Type
from kctl.errors import DataError
from kctl.runtime.converters.common import _EXACT, unscaled_to_decimal

__all__ = [
    "SUSPECT_NUMBERS",
    "decode_envelopes",
    "encode_column",
    "envelope_prefix",
    "supported",
]

# Exactly what the per-record encoder's json.JSONEncoder writes for one string or float.
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_raw_decode = json.JSONDecoder().raw_decode

_INT_RANGES = {
    Type.INT8: (-(2**7), 2**7 - 1),
    Type.INT16: (-(2**15), 2**15 - 1),
    Type.INT32: (-(2**31), 2**31 - 1),
    Type.INT64: (-(2**63), 2**63 - 1),
}
_PRIMITIVES = {*_INT_RANGES, Type.FLOAT32, Type.FLOAT64, Type.BOOLEAN, Type.STRING, Type.BYTES}
_LOGICAL = {DECIMAL, DATE, TIME, TIMESTAMP}

# With ensure_ascii=False, json escapes only these; a row without them is its own JSON text.
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
_ESCAPED_BYTES = bytes(range(0x20)) + b'"\\'

# Number forms where Arrow's JSON parser (RapidJSON) and Python's json disagree: RapidJSON
# also reads -NaN, Inf and -Inf; it reads the integer -0 as -0.0 where Python's float(0)
# is 0.0; it reads integers too large for a double as inf where Python raises. Only checked
# when a float column holds a non-finite value or -0.0 (which these forms produce), so a
# match inside a string costs a fallback, never a wrong value.
SUSPECT_NUMBERS = r"[:,\[]\s*(?:-NaN|-?Inf(?:[^i]|$)|-0\s*(?:[,}\]]|$))|[0-9]{309}"

_HEAD = b'{"schema":'
_PAYLOAD = ',"payload":'
_WRAP = "p"  # each payload is parsed as the only field of {"p": ...}


# decimal.format of the converter encoding now (NUMERIC: True), for `_logical`
_NUMERIC: contextvars.ContextVar[bool] = contextvars.ContextVar("numeric", default=False)


class _Bail(Exception):
    """The column cannot be converted exactly; the caller returns None."""


# --- schemas ------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def supported(schema: Schema, logical: bool = False) -> bool:
    """Whether the columnar path handles `schema` (supported types, no defaults, no logical
    types; with `logical`, what `encode_column` also writes: Timestamp, Date, Time and
    Decimal, the types of database rows)."""
    if schema.default is not None:
        return False
    if schema.name in _LOGICAL:
        return logical
    if schema.type in _PRIMITIVES:
        return True
    if schema.type is not Type.STRUCT:
        return False
    names = [f.name for f in schema.fields]
    if len(set(names)) != len(names):
        return False  # a dict would keep one of them
    return all(isinstance(f.name, str) and f.index == i and supported(f.schema, logical)
               for i, f in enumerate(schema.fields))


@lru_cache(maxsize=256)
def decodable(schema: Schema) -> bool:
    """Whether `decode_envelopes` reads `schema`: what `supported` takes, plus Timestamp,
    Date, Time (epoch integers) and Decimal (base64; a number goes record by record):
    database rows are full of them."""
    if schema.default is not None:
        return False
    if schema.name in _EPOCH_RANGES or schema.name == DECIMAL:
        return True
    if schema.type is Type.STRUCT:
        return supported(schema, logical=True) and all(decodable(f.schema)
                                                       for f in schema.fields)
    return supported(schema)


# The integers the per-record decoder turns into values (else DataError or OverflowError):
# Timestamp ms and Date days within years 1..9999, Time ms within one day.
_EPOCH_RANGES = {
    TIMESTAMP: (-62_135_596_800_000, 253_402_300_799_999),
    DATE: (-719_162, 2_932_896),
    TIME: (0, 86_399_999),
}


@lru_cache(maxsize=256)
def _keys(schema: Schema) -> tuple[str, ...]:
    """The text before each field's value: '{"a":', ',"b":' (names through json once)."""
    return tuple(("{" if i == 0 else ",") + _dumps(f.name) + ":"
                 for i, f in enumerate(schema.fields))


@lru_cache(maxsize=256)
def _parse_type(schema: Schema) -> pa.DataType:
    """The Arrow type read_json parses into: all nullable, floats as double, bytes as text."""
    if schema.type is Type.STRUCT:
        return pa.struct([pa.field(f.name, _parse_type(f.schema)) for f in schema.fields])
    if schema.name in _EPOCH_RANGES:
        return pa.int64()  # the epoch integer; _finish makes it the temporal value
    if schema.type in (Type.FLOAT32, Type.FLOAT64):
        return pa.float64()
    if schema.type is Type.BYTES:
        return pa.string()  # base64, Decimal's included
    return connect_to_arrow_type(schema)


# --- small kernels ------------------------------------------------------------------------


def _any(mask: pa.Array) -> bool:
    return pc.any(mask).as_py() is True


def _plain(arr: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(arr.type):
        return arr.dictionary_decode()
    return arr


def _and(live: pa.Array | None, valid: pa.Array) -> pa.Array:
    return valid if live is None else pc.and_(live, valid)


def _check_required(arr: pa.Array, schema: Schema, live: pa.Array | None) -> None:
    """A null in a required field is an error unless its row is under a null struct."""
    if arr.null_count and not schema.optional and (
            live is None or _any(pc.and_(arr.is_null(), live))):
        raise _Bail


def _span(arr: pa.Array) -> pa.Buffer:
    """The bytes of a (string or binary) array's rows, back to back."""
    n = len(arr)
    bounds = pa.Array.from_buffers(pa.int32(), n + 1, [None, arr.buffers()[1]], offset=arr.offset)
    start, end = bounds[0].as_py(), bounds[n].as_py()
    return arr.buffers()[2].slice(start, end - start)


def _join(parts: list[Any], n: int) -> pa.Array:
    """Concatenate string arrays and str pieces row-wise into one string array."""
    merged: list[Any] = []
    for p in parts:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    if not any(isinstance(p, pa.Array) for p in merged):
        return pa.array(["".join(merged)] * n, pa.string())
    args = [pa.scalar(p, pa.string()) if isinstance(p, str) else p for p in merged]
    return pc.binary_join_element_wise(*args, "")


# --- Arrow -> JSON ------------------------------------------------------------------------


def encode_column(values: pa.Array | pa.ChunkedArray, schema: Schema,
                  prefix: bytes | None, numeric_decimals: bool = False) -> pa.Array | None:
    """Every row of `values` as the per-record encoder writes it (a binary array), or None.

    `prefix` is the envelope head (`{"schema":...,"payload":`) when schemas are enabled,
    None for bare payloads; `numeric_decimals`: the converter's decimal.format is NUMERIC
    (decimals as bare numbers, else base64 of their unscaled bytes).
    """
    if schema is None or not supported(schema, logical=True):
        return None
    token = _NUMERIC.set(numeric_decimals)
    try:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not isinstance(values, pa.Array):
            return None
        n = len(values)
        if n == 0:
            return pa.array([], pa.binary())
        parts = _encode(values, schema, None)
        if prefix is not None:
            parts = [prefix.decode("utf-8"), *parts, "}"]
        rows = _join(parts, n).cast(pa.binary())
    except (_Bail, pa.ArrowException, ValueError, TypeError, OverflowError, DataError):
        return None
    finally:
        _NUMERIC.reset(token)
    return rows if len(rows) == n else None


def _encode(arr: pa.Array, schema: Schema, live: pa.Array | None) -> list[Any]:
    """The parts whose row-wise concatenation is each row's JSON text (nulls as null)."""
    arr = _plain(arr)
    _check_required(arr, schema, live)
    n = len(arr)
    t = arr.type
    if pa.types.is_null(t):
        if schema.type is Type.STRUCT:
            raise _Bail  # array_to_connect cannot read it
        return ["null"]
    if schema.type is Type.STRUCT:
        parts = _encode_struct(arr, schema, live)
        if not arr.null_count:
            return parts
        return [pc.if_else(arr.is_valid(), _join(parts, n), "null")]
    if schema.name in _LOGICAL:
        return _logical(arr, schema)
    if schema.type in (Type.STRING, Type.BYTES):
        inner = _string_inner(arr, schema)
        if not inner.null_count:
            return ['"', inner, '"']
        return [pc.fill_null(_join(['"', inner, '"'], n), "null")]
    text = _primitive_text(arr, schema)
    if text.null_count:
        text = pc.fill_null(text, "null")
    return [text]


def _floor_div(arr: pa.Array, by: int) -> pa.Array:
    """Integer division rounding down (as Python's //), nulls kept."""
    import numpy as np

    filled = pc.fill_null(arr, 0).to_numpy(zero_copy_only=False)
    out = np.floor_divide(filled, by)
    return pa.array(out, pa.int64(), mask=arr.is_null().to_numpy(zero_copy_only=False)
                    if arr.null_count else None)


def _logical(arr: pa.Array, schema: Schema) -> list[Any]:
    """Timestamp (epoch ms), Date (epoch days), Time (ms of the day) and Decimal (base64
    of the unscaled two's complement bytes, or a bare number) as the per-record encoder
    writes them from the values `array_to_connect` gives."""
    t = arr.type
    if schema.name == TIMESTAMP:
        if not pa.types.is_timestamp(t):
            raise _Bail
        micros = pc.cast(pc.cast(arr, pa.timestamp("us", tz=t.tz)), pa.int64())
        text = pc.cast(_floor_div(micros, 1000), pa.string())
    elif schema.name == DATE:
        if not pa.types.is_date32(t):
            raise _Bail
        text = pc.cast(pc.cast(arr, pa.int32()), pa.string())
    elif schema.name == TIME:
        if not pa.types.is_time(t):
            raise _Bail
        micros = pc.cast(pc.cast(arr, pa.time64("us")), pa.int64())
        text = pc.cast(_floor_div(micros, 1000), pa.string())
    else:  # DECIMAL
        if not pa.types.is_decimal(t):
            raise _Bail
        scale = int((schema.parameters or {}).get("scale", "0"))
        if t.scale != scale:
            raise _Bail
        if _NUMERIC.get():
            values = arr.to_pylist()
            text = pa.array([None if v is None else format(v, "f") for v in values],
                            pa.string())
        else:
            text = _b64_int64_text(arr)
            if text is None:
                b64 = base64.b64encode
                text = pa.array([None if v is None else
                                 '"' + b64(v.to_bytes(max(1, (v + (v < 0)).bit_length() // 8
                                                          + 1), "big", signed=True))
                                 .decode("ascii") + '"'
                                 for v in _unscaled(arr)], pa.string())
    if text.null_count:
        text = pc.fill_null(text, "null")
    return [text]


_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _int64_words(arr: pa.Array) -> Any:
    """The unscaled values of a decimal128 array as int64 (numpy), or None when one does
    not fit (or the array is another kind)."""
    import numpy as np

    if not pa.types.is_decimal128(arr.type):
        return None
    n = len(arr)
    words = np.frombuffer(arr.buffers()[1], dtype="<i8")[2 * arr.offset:2 * (arr.offset + n)]
    low, high = words[0::2], words[1::2]
    valid = np.ones(n, bool) if not arr.null_count else \
        arr.is_valid().to_numpy(zero_copy_only=False)
    if not bool(((high == (low >> 63)) | ~valid).all()):
        return None
    return np.where(valid, low, 0)


def _b64_int64_text(arr: pa.Array) -> pa.Array | None:
    """Each decimal as `"<base64 of its unscaled two's complement bytes>"` (Kafka's
    Decimal, the fewest bytes that hold it, as Java's BigInteger.toByteArray), computed
    with numpy for unscaled values that fit an int64; None for others."""
    import numpy as np

    v = _int64_words(arr)
    if v is None or not len(v):
        return None
    n = len(v)
    m = np.where(v < 0, ~v, v)  # the magnitude bit_length is taken of
    length = np.ones(n, np.int64)
    for k in range(1, 8):
        length += m >= (1 << (8 * k - 1))
    big = v.astype(">i8").view(np.uint8).reshape(n, 8)
    width = 4 * ((length + 2) // 3) + 2  # base64 characters and the quotes
    nulls = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    if nulls is not None:
        width = np.where(nulls, 4, width)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(width, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    alphabet = np.frombuffer(_B64, np.uint8)
    for size in range(1, 9):
        rows = np.nonzero((length == size) if nulls is None else
                          ((length == size) & ~nulls))[0]
        if not len(rows):
            continue
        padded = -(-size // 3) * 3
        raw = np.zeros((len(rows), padded), np.uint8)
        raw[:, :size] = big[rows, 8 - size:]
        b = raw.reshape(len(rows), -1, 3).astype(np.uint16)
        sextets = np.stack([b[..., 0] >> 2, ((b[..., 0] & 3) << 4) | (b[..., 1] >> 4),
                            ((b[..., 1] & 15) << 2) | (b[..., 2] >> 6), b[..., 2] & 63],
                           axis=-1).reshape(len(rows), -1)
        chars = alphabet[sextets]
        if padded - size:
            chars[:, -(padded - size):] = ord("=")
        text = np.concatenate([np.full((len(rows), 1), ord('"'), np.uint8), chars,
                               np.full((len(rows), 1), ord('"'), np.uint8)], axis=1)
        at = offsets[rows][:, None] + np.arange(text.shape[1])
        out[at] = text
    if nulls is not None:
        rows = np.nonzero(nulls)[0]
        out[offsets[rows][:, None] + np.arange(4)] = np.frombuffer(b"null", np.uint8)
    if offsets[-1] >= 2**31:
        return None
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(out)])


def _b64_int64_values(arr: pa.Array) -> Any:
    """Base64 texts (no nulls) of at most 8 bytes each as int64 (numpy, sign-extended
    big-endian two's complement), or None when one is not plain base64 of 1 to 8 bytes
    (the caller then decodes with Python's base64, which judges it)."""
    import numpy as np

    if arr.null_count or not len(arr) or arr.type != pa.string():
        return None
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset:arr.offset + n + 1]
    sizes = np.diff(offsets)
    data = np.frombuffer(arr.buffers()[2], np.uint8)
    lookup = np.full(256, 255, np.uint8)
    lookup[np.frombuffer(_B64, np.uint8)] = np.arange(64, dtype=np.uint8)
    result = np.zeros(n, np.int64)
    for width in (4, 8, 12):
        rows = np.nonzero(sizes == width)[0]
        if not len(rows):
            continue
        chars = data[offsets[rows][:, None].astype(np.int64) + np.arange(width)]
        pads = (chars[:, -1] == ord("=")).astype(np.int64) + (chars[:, -2] == ord("="))
        body = lookup[chars]
        body[:, -2:] = np.where(chars[:, -2:] == ord("="), 0, body[:, -2:])
        if (body == 255).any() or ((chars[:, :-2] == ord("=")).any()) or \
                ((chars[:, -1] != ord("=")) & (chars[:, -2] == ord("="))).any():
            return None
        q = body.reshape(len(rows), -1, 4).astype(np.uint32)
        triples = np.stack([(q[..., 0] << 2) | (q[..., 1] >> 4),
                            ((q[..., 1] & 15) << 4) | (q[..., 2] >> 2),
                            ((q[..., 2] & 3) << 6) | q[..., 3]], axis=-1)
        raw = triples.reshape(len(rows), -1).astype(np.uint8)
        nbytes = raw.shape[1] - pads
        if (nbytes > 8).any() or (nbytes < 1).any():
            return None
        for size in np.unique(nbytes):
            sel = nbytes == size
            full = np.zeros((int(sel.sum()), 8), np.uint8)
            full[:, 8 - size:] = raw[sel, :size]
            negative = full[:, 8 - size] >= 128
            full[negative, :8 - size] = 255  # sign extension
            result[rows[sel]] = full.view(">i8").reshape(-1).astype(np.int64)
    if not np.isin(sizes, (4, 8, 12)).all():
        return None
    return result


def _unscaled(arr: pa.Array) -> list[int | None]:
    """Each decimal's unscaled integer (Kafka's Decimal bytes hold it), read from the
    decimal128 words with numpy when they fit an int64, the common case."""
    import numpy as np

    n = len(arr)
    if pa.types.is_decimal128(arr.type) and n:
        words = np.frombuffer(arr.buffers()[1], dtype="<i8")[2 * arr.offset:2 * (arr.offset + n)]
        low, high = words[0::2], words[1::2]
        if bool((high == (low >> 63)).all()):
            ints: list[Any] = low.tolist()
        else:
            ints = [(lo & 0xFFFF_FFFF_FFFF_FFFF) | (hi << 64)
                    for lo, hi in zip(low.tolist(), high.tolist(), strict=True)]
        if arr.null_count:
            ints = [v if ok else None for v, ok in zip(ints, arr.is_valid().to_pylist(),
                                                       strict=True)]
        return ints
    scale = arr.type.scale
    return [None if v is None else int(v.scaleb(scale, _EXACT)) for v in arr.to_pylist()]


def _decimal_value(arr: pa.Array, schema: Schema) -> pa.Array:
    """Base64 Decimal texts as the Arrow decimal of `schema`; a value that is not base64
    or does not fit the precision makes the column go record by record (which names it)."""
    import numpy as np

    t = connect_to_arrow_type(schema)
    n = len(arr)
    fast = _b64_int64_values(arr) if pa.types.is_decimal128(t) and t.precision <= 18 \
        else None
    if fast is not None:
        limit = 10 ** t.precision
        if n and bool(((fast >= limit) | (fast <= -limit)).any()):
            raise _Bail
        words = np.empty(2 * n, dtype="<i8")
        words[0::2], words[1::2] = fast, fast >> 63
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(words.tobytes())])
    b64decode = base64.b64decode
    try:
        ints = [None if s is None else int.from_bytes(b64decode(s, validate=True), "big",
                                                      signed=True)
                for s in arr.to_pylist()]
    except (binascii.Error, ValueError) as e:
        raise _Bail from e
    if pa.types.is_decimal128(t) and t.precision <= 18:
        valid = [v is not None for v in ints]
        low = np.array([0 if v is None else v for v in ints], dtype=np.int64)
        limit = 10 ** t.precision
        if n and bool(((low >= limit) | (low <= -limit)).any()):
            raise _Bail
        words = np.empty(2 * n, dtype="<i8")
        words[0::2], words[1::2] = low, low >> 63
        mask = None if all(valid) else pa.array(valid, pa.bool_())
        validity = None if mask is None else mask.buffers()[1]
        return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(words.tobytes())],
                                     null_count=n - sum(valid))
    scale = t.scale
    return pa.array([None if v is None else unscaled_to_decimal(v, scale) for v in ints], t)


def _encode_struct(arr: pa.Array, schema: Schema, live: pa.Array | None) -> list[Any]:
    t = arr.type
    if not pa.types.is_struct(t) or t.num_fields != len(schema.fields) or \
            [t.field(i).name for i in range(t.num_fields)] != [f.name for f in schema.fields]:
        raise _Bail  # array_to_connect looks fields up by name; keep to exact layouts
    if not schema.fields:
        return ["{}"]
    child_live = _and(live, arr.is_valid()) if arr.null_count else live
    parts: list[Any] = []
    for i, (key, f) in enumerate(zip(_keys(schema), schema.fields, strict=True)):
        parts.append(key)
        parts.extend(_encode(arr.field(i), f.schema, child_live))
    parts.append("}")
    return parts


def _string_inner(arr: pa.Array, schema: Schema) -> pa.Array:
    """String text between the quotes (nulls stay null)."""
    t = arr.type
    if schema.type is Type.BYTES:
        if not (pa.types.is_binary(t) or pa.types.is_large_binary(t)
                or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t)):
            raise _Bail
        b64 = base64.b64encode
        return pa.array([None if v is None else b64(v).decode("ascii") for v in arr.to_pylist()],
                        pa.string())
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
        raise _Bail
    if t != pa.string():
        arr = arr.cast(pa.string())
    raw = _span(arr).to_pybytes()
    if len(raw.translate(None, _ESCAPED_BYTES)) == len(raw):
        return arr  # nothing to escape anywhere in the column (one C pass, no regex)
    flagged = pc.fill_null(pc.match_substring_regex(arr, _NEEDS_ESCAPE), False)
    if _any(flagged):
        escaped = [_dumps(v)[1:-1] for v in arr.filter(flagged).to_pylist()]
        arr = pc.replace_with_mask(arr, flagged, pa.array(escaped, pa.string()))
    return arr


def _primitive_text(arr: pa.Array, schema: Schema) -> pa.Array:
    """Numbers and booleans as JSON text (nulls stay null)."""
    t = arr.type
    st = schema.type
    if st in _INT_RANGES:
        if not pa.types.is_integer(t):
            raise _Bail
        lo, hi = _INT_RANGES[st]
        bits = t.bit_width
        alo, ahi = ((0, 2**bits - 1) if pa.types.is_unsigned_integer(t)
                    else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
        if (alo < lo or ahi > hi) and len(arr) > arr.null_count:
            mm = pc.min_max(arr)
            if mm["min"].as_py() < lo or mm["max"].as_py() > hi:
                raise _Bail
        return pc.cast(arr, pa.string())
    if st in (Type.FLOAT32, Type.FLOAT64):
        if pa.types.is_float32(t):
            arr = pc.cast(arr, pa.float64())
        elif not pa.types.is_float64(t):
            raise _Bail
        return _float_text(arr)
    if st is Type.BOOLEAN:
        if not pa.types.is_boolean(t):
            raise _Bail
        return pc.if_else(arr, "true", "false")
    raise _Bail


def _float_text(x: pa.Array) -> pa.Array:
    """repr-exact float text: Arrow's cast writes the same shortest digits as Python's repr
    but its own notation, so only the ranges where both are plain decimals take the cast."""
    text = pc.cast(x, pa.string())
    ax = pc.abs(x)
    integral = pc.equal(x, pc.floor(x))  # false for NaN; true for inf (excluded by < 1e16)
    small = pc.less(ax, 1e9)  # Arrow writes fixed notation between 1e-6 and 1e10
    int_small = pc.and_(integral, small)
    frac = pc.and_(pc.invert(integral), pc.and_(small, pc.greater_equal(ax, 1e-4)))
    int_big = pc.and_(integral, pc.and_(pc.invert(small), pc.less(ax, 1e16)))
    text = pc.if_else(int_small, pc.binary_join_element_wise(text, ".0", ""), text)
    if _any(int_big):
        whole = pc.cast(pc.if_else(int_big, x, 0.0), pa.int64())
        text = pc.if_else(int_big, pc.binary_join_element_wise(
            pc.cast(whole, pa.string()), ".0", ""), text)
    rest = pc.fill_null(pc.invert(pc.or_(pc.or_(int_small, frac), int_big)), False)
    if _any(rest):  # NaN, inf, |x| >= 1e16, 0 < |x| < 1e-4, non-integers above 1e9
        exact = [_dumps(v) for v in x.filter(rest).to_pylist()]
        text = pc.replace_with_mask(text, rest, pa.array(exact, pa.string()))
    return text


# --- JSON -> Arrow ------------------------------------------------------------------------


def envelope_prefix(value: bytes) -> tuple[bytes, str] | None:
    """The `{"schema":...,"payload":` head of one compact envelope and its schema text."""
    if not value.startswith(_HEAD):
        return None
    try:
        text = value.decode("utf-8")
        _, end = _raw_decode(text, len(_HEAD))
    except (ValueError, RecursionError):
        return None
    if not text.startswith(_PAYLOAD, end):
        return None
    return text[: end + len(_PAYLOAD)].encode("utf-8"), text[len(_HEAD):end]


class _Payloads:
    """The lines read_json parsed; the number-form check runs on them at most once."""

    def __init__(self, lines: pa.Array):
        self.lines = lines
        self.checked = False

    def check_numbers(self) -> None:
        if not self.checked:
            if _any(pc.match_substring_regex(self.lines, SUSPECT_NUMBERS)):
                raise _Bail
            self.checked = True


def decode_envelopes(values: pa.Array | Sequence[bytes | None], prefix: bytes,
                     schema: Schema) -> pa.Array | None:
    """Each value's payload as one row of a column of `schema` (a supported STRUCT), or None.

    Every value must be `prefix + payload + b"}"`. The payloads are parsed by read_json as
    the lines `{"p":<payload>}` with unexpected fields an error, so a line holds exactly one
    JSON value per payload; then:
    - no raw CR/LF anywhere, every line starts with `{` (read_json's line splitting, and a
      block must not start with `null`), and one row per line (two objects on one line);
    - valid UTF-8 (Python's json would refuse it; read_json might not);
    - nulls in required fields fail unless under a null struct; duplicate keys, extra
      fields, wrong JSON types and out-of-range integers fail in read_json;
    - floats: number forms where the parsers disagree (SUSPECT_NUMBERS) fail, and FLOAT32
      values must be exact in float32 (Python keeps the double);
    - BYTES are decoded with Python's own base64.b64decode(validate=True).
    Integers written as 1.0 or 1e2 (Python accepts them for int fields) fail in read_json.
    """
    if schema.type is not Type.STRUCT or not decodable(schema):
        return None
    n = len(values)
    if n == 0:
        return None
    if isinstance(values, pa.Array):
        if not pa.types.is_binary(values.type):
            return None
    elif not all(type(v) is bytes for v in values):
        # bytes(v) is what the per-record path reads; anything else (str, None) fails there
        if not all(isinstance(v, bytes | bytearray | memoryview) for v in values):
            return None
        values = [bytes(v) for v in values]
    try:
        arr = values if isinstance(values, pa.Array) else pa.array(values, pa.binary())
        if not isinstance(arr, pa.Array) or arr.null_count or len(arr) != n:
            return None
        if not (pc.all(pc.starts_with(arr, prefix)).as_py()
                and pc.all(pc.ends_with(arr, "}")).as_py()):
            return None
        raw = _span(arr).to_pybytes()
        if b"\n" in raw or b"\r" in raw:
            return None
        del raw
        lines = pc.binary_replace_slice(arr, start=0, stop=len(prefix),
                                        replacement="\n{" + _dumps(_WRAP) + ":")
        lines = lines.cast(pa.string())  # validates UTF-8
        data = _span(lines)
        table = pa_json.read_json(
            pa.BufferReader(data),
            # one block on this thread: the same time as Arrow's thread pool here and half
            # the CPU, which the worker's other tasks and Spark need
            read_options=pa_json.ReadOptions(use_threads=False,
                                             block_size=max(1 << 20, min(len(data) + 1, 1 << 30))),
            parse_options=pa_json.ParseOptions(
                explicit_schema=pa.schema([pa.field(_WRAP, _parse_type(schema))]),
                unexpected_field_behavior="error", newlines_in_values=False))
        if table.num_rows != n or table.num_columns != 1:
            return None
        column = table.column(0).combine_chunks()
        out = _finish(column, schema, None, _Payloads(lines))
    except (_Bail, pa.ArrowException, ValueError, TypeError, OverflowError):
        return None
    if out.type != connect_to_arrow_type(schema) or len(out) != n:
        return None
    return out


def _epoch_value(arr: pa.Array, name: str) -> pa.Array:
    """Epoch integers as the Arrow temporal the per-record decoder's values become; a
    value it would refuse (out of range) makes the column go record by record."""
    lo, hi = _EPOCH_RANGES[name]
    if arr.null_count < len(arr):
        mm = pc.min_max(arr)
        if mm["min"].as_py() < lo or mm["max"].as_py() > hi:
            raise _Bail
    if name == DATE:
        return pc.cast(pc.cast(arr, pa.int32()), pa.date32())
    micros = pc.multiply(arr, 1000)  # in range: no overflow
    if name == TIME:
        return pc.cast(micros, pa.time64("us"))
    return pc.cast(micros, pa.timestamp("us", tz="UTC"))


def _finish(arr: pa.Array, schema: Schema, live: pa.Array | None,
            payloads: _Payloads) -> pa.Array:
    """The parsed column as the Arrow type of `schema`, checked as the Python decoder checks."""
    _check_required(arr, schema, live)
    st = schema.type
    if schema.name in _EPOCH_RANGES:
        return _epoch_value(arr, schema.name)
    if schema.name == DECIMAL:
        return _decimal_value(arr, schema)
    if st is Type.STRUCT:
        if not schema.fields:
            return arr
        child_live = _and(live, arr.is_valid()) if arr.null_count else live
        children = [_finish(arr.field(i), f.schema, child_live, payloads)
                    for i, f in enumerate(schema.fields)]
        fields = [pa.field(f.name, c.type, nullable=f.schema.optional)
                  for f, c in zip(schema.fields, children, strict=True)]
        return pa.StructArray.from_arrays(children, fields=fields,
                                          mask=arr.is_null() if arr.null_count else None)
    if st in (Type.FLOAT32, Type.FLOAT64):
        if arr.null_count < len(arr):
            if _any(pc.invert(pc.is_finite(arr))):
                payloads.check_numbers()
            zero = pc.equal(arr, 0.0)
            if _any(zero) and _any(pc.and_(zero, pc.less(pc.divide(1.0, arr), 0.0))):
                payloads.check_numbers()  # -0.0
        if st is Type.FLOAT64:
            return arr
        narrow = pc.cast(arr, pa.float32(), safe=False)
        same = pc.or_(pc.equal(pc.cast(narrow, pa.float64()), arr), pc.is_nan(arr))
        if _any(pc.invert(same)):
            raise _Bail  # Python keeps the double; float32 cannot hold it
        return narrow
    if st is Type.BYTES:
        b64decode = base64.b64decode
        try:
            decoded = [None if s is None else b64decode(s, validate=True)
                       for s in arr.to_pylist()]
        except (binascii.Error, ValueError) as e:
            raise _Bail from e
        return pa.array(decoded, pa.binary())
    return arr
