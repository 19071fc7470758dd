"""Kafka Connect's single message transforms and predicates, and the chain that runs them."""

from kctl.transforms.fields import (
    Cast,
    CastKey,
    CastValue,
    ExtractField,
    ExtractFieldKey,
    ExtractFieldValue,
    Flatten,
    FlattenKey,
    FlattenValue,
    HoistField,
    HoistFieldKey,
    HoistFieldValue,
    InsertField,
    InsertFieldKey,
    InsertFieldValue,
    MaskField,
    MaskFieldKey,
    MaskFieldValue,
    ReplaceField,
    ReplaceFieldKey,
    ReplaceFieldValue,
    ValueToKey,
)
from kctl.transforms.headers import (
    DropHeaders,
    HeaderFrom,
    HeaderFromKey,
    HeaderFromValue,
    InsertHeader,
)
from kctl.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from kctl.transforms.routing import Filter, RegexRouter
from kctl.transforms.timestamps import (
    TimestampConverter,
    TimestampConverterKey,
    TimestampConverterValue,
    TimestampRouter,
)

__all__ = [
    "Cast", "CastKey", "CastValue", "DropHeaders", "ExtractField", "ExtractFieldKey",
    "ExtractFieldValue", "Filter", "Flatten", "FlattenKey", "FlattenValue", "HasHeaderKey",
    "HeaderFrom", "HeaderFromKey", "HeaderFromValue", "HoistField", "HoistFieldKey",
    "HoistFieldValue", "InsertField", "InsertFieldKey", "InsertFieldValue", "InsertHeader",
    "MaskField", "MaskFieldKey", "MaskFieldValue", "RecordIsTombstone", "RegexRouter",
    "ReplaceField", "ReplaceFieldKey", "ReplaceFieldValue", "TimestampConverter",
    "TimestampConverterKey", "TimestampConverterValue", "TimestampRouter", "TopicNameMatches",
    "ValueToKey",
]
