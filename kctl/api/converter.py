"""Converters turn connector data into bytes on the log and back (Kafka's Converter)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from kctl.api.config import ConfigDef
from kctl.api.data import Schema, SchemaAndValue
from kctl.api.records import Headers


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


class HeaderConverter(ABC):
    @abstractmethod
    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None: ...

    @abstractmethod
    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue: ...
