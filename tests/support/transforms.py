"""Transforms for tests that run a worker in its own process (loaded by dotted path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kctl.api import ConfigDef, ConfigType
from kctl.api.records import ConnectRecord
from kctl.api.transform import Transformation


class FailOn(Transformation[ConnectRecord]):
    """Raises on integer values with `value % modulo == remainder`; `modulo: 0` is the fix."""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("modulo", ConfigType.INT, 10, doc="0 lets every record through")
                .define("remainder", ConfigType.INT, 0, doc="Which values fail"))

    def configure(self, props: Mapping[str, Any]) -> None:
        self.modulo = int(props.get("modulo", 10))
        self.remainder = int(props.get("remainder", 0))

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        v = record.value
        if self.modulo and isinstance(v, int) and v % self.modulo == self.remainder:
            raise ValueError(f"FailOn rejects {v}")
        return record
