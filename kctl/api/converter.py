"""Converters turn connector data into bytes on the log and back (Kafka's Converter)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kctl.api.config import ConfigDef
from kctl.api.data import Schema, SchemaAndValue
from kctl.api.records import Headers

if TYPE_CHECKING:
    import pyarrow as pa


class Converter(ABC):
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        """Called once with the converter's own keys (prefix already stripped)."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    @abstractmethod
    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None: ...

    @abstractmethod
    def to_connect_data(
        self, topic: str, value: bytes | None, headers: Headers | None = None
    ) -> SchemaAndValue: ...

    # The columnar path. A converter that can encode or decode a whole column at once
    # overrides these; the runtime uses them for batches of records that need nothing
    # per record (no transforms, no headers to convert) and otherwise, or when they
    # return None, converts record by record. Both must give exactly what the per-record
    # methods give, and report bad data by returning None (the per-record path then
    # names the record and applies the error tolerance).

    def from_arrow(self, topic: str, schema: Schema, values: pa.Array) -> pa.Array | None:
        """Each row of `values` (of `schema`) as `from_connect_data` encodes it, as a
        binary array (null for a null encoding), or None."""
        return None

    def to_arrow(self, topic: str, values: pa.Array | Sequence[bytes | None]
                 ) -> tuple[Schema, pa.Array] | None:
        """Values that share one schema (a binary array, or the byte strings themselves),
        decoded into one Arrow column, or None."""
        return None


class HeaderConverter(ABC):
    @abstractmethod
    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None: ...

    @abstractmethod
    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue: ...
