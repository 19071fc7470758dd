from __future__ import annotations

from typing import Any

import pytest

from kctl.api.records import Headers, SinkRecord, SourceRecord
from kctl.transforms.chain import resolve_predicate, resolve_transformation


def _make(name: str, **props: Any) -> Any:
    t = resolve_transformation(name)()
    t.configure({k.replace("_", "."): v for k, v in props.items()})
    return t


def _pred(type_name: str, **props: Any) -> Any:
    p = resolve_predicate(type_name)()
    p.configure(props)
    return p


def _source(value: Any = None, value_schema: Any = None, key: Any = None, key_schema: Any = None,
            topic: str = "orders", timestamp: int | None = None,
            headers: Headers | None = None) -> SourceRecord:
    return SourceRecord(topic, 0, key_schema, key, value_schema, value, timestamp,
                        headers or Headers(), {"file": "a"}, {"line": 1})


def _sink(value: Any = None, value_schema: Any = None, key: Any = None, key_schema: Any = None,
          topic: str = "orders", timestamp: int | None = None, offset: int = 7) -> SinkRecord:
    return SinkRecord(topic, 3, key_schema, key, value_schema, value, timestamp, Headers(),
                      kafka_offset=offset)


@pytest.fixture
def make():
    return _make


@pytest.fixture
def pred():
    return _pred


@pytest.fixture
def source():
    return _source


@pytest.fixture
def sink():
    return _sink
