"""Avro's binary encoding of a whole Arrow column at once, both ways, without a Python
object per field: numpy does the varints, the zigzags, the unions' branches and the
length-prefixed strings for every row together.

Flat records of primitives, strings, bytes, decimals (up to 38 digits), dates, times and
timestamps, each optional or not, are covered; anything else (nested records, arrays,
maps, enums, decimal256) answers None and goes record by record through fastavro, as does
a batch whose bytes do not decode exactly (the per-record path then names the record).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kctl.api.arrow import connect_to_arrow_type
from kctl.api.data import DATE, DECIMAL, TIME, TIMESTAMP, Schema, Type

_SHIFTS = np.arange(10, dtype=np.uint64) * np.uint64(7)
_LONGS = {Type.INT8, Type.INT16, Type.INT32, Type.INT64}


class Unsupported(Exception):
    """This column or batch takes the record-by-record path."""


# --- encoding -----------------------------------------------------------------------------


def _binary(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    n = len(offsets) - 1
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(data)])


def _fixed(rows: np.ndarray) -> pa.Array:
    """(n, w) bytes -> n binary values of w bytes."""
    n, w = rows.shape
    return _binary(np.arange(n + 1, dtype=np.int64) * w, np.ascontiguousarray(rows).reshape(-1))


def _constant(value: bytes, n: int) -> pa.Array:
    return _fixed(np.tile(np.frombuffer(value, np.uint8), (n, 1)))


def _varints(z: np.ndarray) -> pa.Array:
    """Unsigned 64-bit values as Avro's varints (7 bits a byte, low first)."""
    z = z.astype(np.uint64, copy=False)
    lengths = np.ones(len(z), dtype=np.int64)
    for k in range(1, 10):
        lengths += z >= (np.uint64(1) << np.uint64(7 * k))
    offsets = np.zeros(len(z) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    for k in range(10):
        rows = lengths > k
        if not rows.any():
            break
        byte = (z[rows] >> _SHIFTS[k]) & np.uint64(0x7F)
        more = (lengths[rows] > k + 1).astype(np.uint64) << np.uint64(7)
        data[offsets[:-1][rows] + k] = (byte | more).astype(np.uint8)
    return _binary(offsets, data)


def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _ints(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False))


def _encode_value(schema: Schema, arr: pa.Array) -> pa.Array:
    """Every row of `arr` (nulls filled) as the Avro binary of the non-null type."""
    t = arr.type
    if schema.name == TIMESTAMP:
        micros = _ints(arr.cast(pa.int64()))
        return _varints(_zigzag(np.floor_divide(micros, 1000)))
    if schema.name == DATE:
        return _varints(_zigzag(_ints(arr.cast(pa.int32()))))
    if schema.name == TIME:
        return _varints(_zigzag(_ints(arr.cast(pa.int64())) // 1000))
    if schema.name == DECIMAL:
        if not pa.types.is_decimal128(t):
            raise Unsupported("decimal256")
        filled = arr.fill_null(pa.scalar(0, t).cast(t)) if arr.null_count else arr
        raw = np.frombuffer(filled.buffers()[1], dtype=np.uint8)
        raw = raw[filled.offset * 16:(filled.offset + len(filled)) * 16].reshape(-1, 16)
        big = raw[:, ::-1]  # little-endian 128-bit -> big-endian two's complement
        # the fewest bytes that keep the sign, as Avro's writers (and fastavro) write them
        redundant = ((big[:, :-1] == 0) & (big[:, 1:] < 0x80)) | \
            ((big[:, :-1] == 0xFF) & (big[:, 1:] >= 0x80))
        lead = np.where(redundant.all(axis=1), 15, np.argmin(redundant, axis=1))
        lengths = 16 - lead
        offsets = np.zeros(len(big) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], lengths) \
            + np.repeat(np.arange(len(big), dtype=np.int64) * 16 + lead, lengths)
        digits = _binary(offsets, np.ascontiguousarray(big).reshape(-1)[gather])
        return pc.binary_join_element_wise(_varints(_zigzag(lengths)), digits, b"")
    if schema.type in _LONGS:
        return _varints(_zigzag(_ints(arr)))
    if schema.type is Type.BOOLEAN:
        flags = np.asarray(arr.fill_null(False).to_numpy(zero_copy_only=False))
        return _fixed(flags.astype(np.uint8).reshape(-1, 1))
    if schema.type is Type.FLOAT32:
        return _fixed(_ints(arr).astype("<f4").view(np.uint8).reshape(-1, 4))
    if schema.type is Type.FLOAT64:
        return _fixed(_ints(arr).astype("<f8").view(np.uint8).reshape(-1, 8))
    if schema.type in (Type.STRING, Type.BYTES):
        as_binary = arr.cast(pa.binary()).fill_null(b"")
        lengths = pc.binary_length(as_binary).to_numpy(zero_copy_only=False)
        return pc.binary_join_element_wise(_varints(_zigzag(lengths)), as_binary, b"")
    raise Unsupported(f"{schema.type.value} {schema.name or ''}")


def _encode_field(schema: Schema, arr: pa.Array) -> pa.Array:
    value = _encode_value(schema, arr)
    if not schema.optional:
        if arr.null_count:
            raise Unsupported("a null in a required field")
        return value
    # Confluent's unions are [null, T] (branch 0 is null) unless T has a default
    if schema.default is not None:
        raise Unsupported("a union with its default first")
    branch = _constant(b"\x02", len(arr))
    present = pc.binary_join_element_wise(branch, value, b"")
    if not arr.null_count:
        return present
    return pc.if_else(arr.is_null(), pa.scalar(b"\x00", pa.binary()), present)


def encode(schema: Schema, values: pa.Array, schema_id: int) -> pa.Array:
    """Each row as Confluent's wire format: 0, the id, the Avro binary."""
    if values.null_count:
        raise Unsupported("null records")
    header = b"\x00" + schema_id.to_bytes(4, "big")
    parts = [_constant(header, len(values))]
    if schema.type is Type.STRUCT:
        if not isinstance(values, pa.StructArray):
            raise Unsupported("not a struct column")
        for i, field in enumerate(schema.fields):
            if field.schema.type in (Type.STRUCT, Type.ARRAY, Type.MAP):
                raise Unsupported("nested")
            parts.append(_encode_field(field.schema, values.field(i)))
    else:
        parts.append(_encode_field(schema, values))
    return pc.binary_join_element_wise(*parts, b"")


# --- decoding -----------------------------------------------------------------------------


class _Reader:
    """Every row's read position in one buffer; each read advances the rows it reads."""

    def __init__(self, data: pa.Array):
        self.n = len(data)
        offsets = np.frombuffer(data.buffers()[1], dtype=np.int32)[data.offset:data.offset + self.n + 1]
        raw = np.frombuffer(data.buffers()[2], dtype=np.uint8) if data.buffers()[2] else \
            np.zeros(0, np.uint8)
        self.buf = np.concatenate([raw, np.zeros(16, np.uint8)])  # reads may look ahead
        self.start = offsets[:-1].astype(np.int64)
        self.end = offsets[1:].astype(np.int64)
        self.pos = self.start.copy()

    def varint(self, rows: np.ndarray) -> np.ndarray:
        pos = self.pos[rows]
        if not len(pos):
            return np.zeros(0, np.uint64)
        window = self.buf[pos[:, None] + np.arange(10)]
        ends = (window & 0x80) == 0
        last = np.argmax(ends, axis=1)
        if not ends[np.arange(len(last)), last].all():
            raise Unsupported("a varint longer than 10 bytes")
        width = int(last.max()) + 1  # only as many byte columns as the longest varint
        keep = np.arange(width)[None, :] <= last[:, None]
        parts = ((window[:, :width] & 0x7F) * keep).astype(np.uint64) << _SHIFTS[None, :width]
        z = np.bitwise_or.reduce(parts, axis=1) if width > 1 else parts[:, 0]
        self.pos[rows] = pos + last + 1
        return z

    def long(self, rows: np.ndarray) -> np.ndarray:
        z = self.varint(rows)
        return (z >> np.uint64(1)).view(np.int64) ^ -(z & np.uint64(1)).view(np.int64)

    def fixed(self, rows: np.ndarray, width: int) -> np.ndarray:
        pos = self.pos[rows]
        out = self.buf[pos[:, None] + np.arange(width)]
        self.pos[rows] = pos + width
        return out

    def sized(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Length-prefixed bytes: (lengths, start positions) of `rows`, and their bytes."""
        lengths = self.long(rows)
        if (lengths < 0).any():
            raise Unsupported("a negative length")
        starts = self.pos[rows]
        self.pos[rows] = starts + lengths
        total = int(lengths.sum())
        out_offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=out_offsets[1:])
        gather = np.arange(total, dtype=np.int64) - np.repeat(out_offsets[:-1], lengths) + \
            np.repeat(starts, lengths)
        if total and gather.max() >= len(self.buf):
            raise Unsupported("a length beyond the record")
        return lengths, out_offsets, self.buf[gather]


def _validity(valid: np.ndarray) -> pa.Buffer | None:
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid.astype(np.uint8), bitorder="little"))


def _spread(valid: np.ndarray, values: np.ndarray, fill: Any = 0) -> np.ndarray:
    out = np.full(len(valid), fill, dtype=values.dtype) if values.ndim == 1 else \
        np.zeros((len(valid), *values.shape[1:]), dtype=values.dtype)
    out[valid] = values
    return out


def _decode_field(reader: _Reader, schema: Schema, avro: Any) -> pa.Array:
    rows = np.arange(reader.n)
    valid = np.ones(reader.n, dtype=bool)
    if schema.optional:
        if not (isinstance(avro, list) and len(avro) == 2 and avro[0] == "null"):
            raise Unsupported("a union other than [null, T]")
        branch = reader.long(rows)
        if ((branch != 0) & (branch != 1)).any():
            raise Unsupported("a union branch out of range")
        valid = branch == 1
        rows = rows[valid]
        avro = avro[1]
    arrow_type = connect_to_arrow_type(schema)
    validity = _validity(valid)
    avro_type = avro.get("type") if isinstance(avro, dict) else avro
    logical = avro.get("logicalType") if isinstance(avro, dict) else None
    if schema.name == DECIMAL:
        if avro_type != "bytes" or not pa.types.is_decimal128(arrow_type):
            raise Unsupported("decimal")
        lengths, offsets, data = reader.sized(rows)
        if (lengths > 16).any():
            raise Unsupported("a decimal wider than 16 bytes")
        big = np.zeros((len(rows), 16), np.uint8)
        negative = np.zeros(len(rows), bool)
        for i in range(16):  # right-align each value's bytes, sign-extended
            has = lengths > i
            src = offsets[:-1][has] + lengths[has] - 1 - i
            big[has, 15 - i] = data[src]
        first = np.where(lengths > 0, data[np.minimum(offsets[:-1], max(len(data) - 1, 0))]
                         if len(data) else 0, 0)
        negative = (lengths > 0) & ((first & 0x80) != 0)
        for i in range(16):
            pad = negative & (lengths <= i)
            big[pad, 15 - i] = 0xFF
        little = _spread(valid, big[:, ::-1])
        return pa.Array.from_buffers(arrow_type, reader.n,
                                     [validity, pa.py_buffer(np.ascontiguousarray(little))])
    if avro_type in ("int", "long"):
        values = _spread(valid, reader.long(rows))
        if schema.name == TIMESTAMP:
            if logical != "timestamp-millis":
                raise Unsupported("a timestamp that is not timestamp-millis")
            values = values * 1000
        elif schema.name == TIME:
            values = values * 1000
        elif schema.name == DATE:
            values = values.astype(np.int32)
        storage = {TIMESTAMP: pa.int64(), TIME: pa.int64(), DATE: pa.int32()}.get(
            schema.name or "", arrow_type)
        arr = pa.Array.from_buffers(storage, reader.n, [validity, pa.py_buffer(
            np.ascontiguousarray(values.astype(storage.to_pandas_dtype())))])
        return arr if storage == arrow_type else arr.view(arrow_type)
    if avro_type == "boolean":
        values = _spread(valid, reader.fixed(rows, 1)[:, 0])
        if (values > 1).any():
            raise Unsupported("a boolean byte other than 0 or 1")
        return pa.Array.from_buffers(pa.bool_(), reader.n, [validity, pa.py_buffer(
            np.packbits(values.astype(np.uint8), bitorder="little"))])
    if avro_type in ("float", "double"):
        width = 4 if avro_type == "float" else 8
        raw = np.ascontiguousarray(reader.fixed(rows, width)).view("<f4" if width == 4 else "<f8")
        values = _spread(valid, raw[:, 0]).astype(arrow_type.to_pandas_dtype())
        return pa.Array.from_buffers(arrow_type, reader.n, [validity, pa.py_buffer(values)])
    if avro_type in ("string", "bytes"):
        lengths, _, data = reader.sized(rows)
        all_lengths = _spread(valid, lengths)
        offsets = np.zeros(reader.n + 1, np.int64)
        np.cumsum(all_lengths, out=offsets[1:])
        if offsets[-1] >= 2**31:
            raise Unsupported("more than 2 GiB of text")
        arr = pa.Array.from_buffers(arrow_type, reader.n, [
            validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])
        if avro_type == "string":
            try:
                arr.validate(full=True)  # valid UTF-8, or the records go one by one
            except pa.ArrowInvalid as e:
                raise Unsupported("invalid UTF-8") from e
        return arr
    raise Unsupported(f"Avro type {avro_type}")


def decode(schema: Schema, avro: Any, values: pa.Array) -> pa.Array:
    """Records that all carry one schema id, read into one Arrow column of `schema`."""
    if values.null_count or not len(values):
        raise Unsupported("null records")
    if not (pa.types.is_binary(values.type)):
        values = values.cast(pa.binary())
    reader = _Reader(values)
    header = reader.fixed(np.arange(reader.n), 5)
    if not (header == header[0]).all() or header[0, 0] != 0:
        raise Unsupported("records of several schema ids")
    if schema.type is Type.STRUCT:
        fields = avro.get("fields") if isinstance(avro, dict) else None
        if not fields or len(fields) != len(schema.fields):
            raise Unsupported("a record other than the reader's")
        children, arrow_fields = [], []
        for field, avro_field in zip(schema.fields, fields, strict=True):
            if field.name != avro_field["name"] or field.schema.type in (
                    Type.STRUCT, Type.ARRAY, Type.MAP):
                raise Unsupported("nested or reordered fields")
            children.append(_decode_field(reader, field.schema, avro_field["type"]))
            arrow_fields.append(pa.field(field.name, children[-1].type,
                                         nullable=field.schema.optional))
        column = pa.StructArray.from_arrays(children, fields=arrow_fields)
    else:
        column = _decode_field(reader, schema, avro)
    if not (reader.pos == reader.end).all():
        raise Unsupported("bytes left over in a record")
    return column
