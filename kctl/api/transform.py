"""Single message transforms and predicates (Kafka Connect's Transformation and Predicate).

Both work on any ConnectRecord (SourceRecord or SinkRecord) and return changed copies
through `record.new_record(...)`, so the same transform runs in source and sink pipelines.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from kctl.api.config import ConfigDef
from kctl.api.records import ConnectRecord

R = TypeVar("R", bound=ConnectRecord)


class Transformation(ABC, Generic[R]):
    """Changes, reroutes or drops one record; `apply` returning None drops it."""

    def configure(self, props: Mapping[str, Any]) -> None:
        """Called once with the transform's own keys (the `transforms.<alias>.` prefix stripped).

        Raise kctl.errors.ConfigError (with `key`) for an invalid combination of keys.
        """

    @abstractmethod
    def apply(self, record: R) -> R | None: ...

    def config(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:
        """Release resources; called once when the task stops."""


class Predicate(ABC, Generic[R]):
    """Decides whether a transform applies to a record (`transforms.<alias>.predicate`)."""

    def configure(self, props: Mapping[str, Any]) -> None:
        """Called once with the predicate's own keys (the `predicates.<alias>.` prefix stripped)."""

    @abstractmethod
    def test(self, record: R) -> bool: ...

    def config(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:
        """Release resources; called once when the task stops."""
