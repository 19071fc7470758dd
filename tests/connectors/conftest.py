"""One SparkSession for all connector tests (starting one costs ~5 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kctl.runtime.spark import SparkEngine, small_conf


@pytest.fixture(scope="session")
def engine() -> Iterator[SparkEngine]:
    eng = SparkEngine(small_conf("local[2]"))
    yield eng
    eng.stop()
