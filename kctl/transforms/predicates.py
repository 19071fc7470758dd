"""Predicates: TopicNameMatches, HasHeaderKey, RecordIsTombstone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kctl.api.config import NO_DEFAULT, ConfigDef, ConfigType, Importance, NonEmptyString
from kctl.api.records import ConnectRecord
from kctl.api.transform import Predicate
from kctl.transforms._base import java_regex, java_regex_validator


class _Configured(Predicate[Any]):
    CONFIG_DEF = ConfigDef()

    def config(self) -> ConfigDef:
        return self.CONFIG_DEF

    def configure(self, props: Mapping[str, Any]) -> None:
        self.cfg = self.CONFIG_DEF.parse(props)


class _NonEmptyJavaRegex:
    """Kafka's CompositeValidator.of(NonEmptyString, RegexValidator) for `pattern`."""

    def __call__(self, name: str, value: Any) -> None:
        NonEmptyString()(name, value)
        java_regex_validator(name, value)

    def __str__(self) -> str:
        return "Java regular expression"


class TopicNameMatches(_Configured):
    """True for records whose topic fully matches `pattern`."""

    CONFIG_DEF = (
        ConfigDef()
        .define("pattern", ConfigType.STRING, NO_DEFAULT, _NonEmptyJavaRegex(), Importance.MEDIUM,
                "A Java regular expression for matching against the name of a record's topic."))

    def configure(self, props: Mapping[str, Any]) -> None:
        super().configure(props)
        self.pattern = java_regex(self.cfg["pattern"])

    def test(self, record: ConnectRecord) -> bool:
        return self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(_Configured):
    """True for records with at least one header named `name`."""

    CONFIG_DEF = (
        ConfigDef()
        .define("name", ConfigType.STRING, NO_DEFAULT, NonEmptyString(), Importance.MEDIUM,
                "The header name."))

    def configure(self, props: Mapping[str, Any]) -> None:
        super().configure(props)
        self.name = self.cfg["name"]

    def test(self, record: ConnectRecord) -> bool:
        return any(h.key == self.name for h in record.headers)


class RecordIsTombstone(Predicate[Any]):
    """True for records with a null value."""

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None
