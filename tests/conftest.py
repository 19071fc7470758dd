import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from support.broker import start_broker


@pytest.fixture(scope="session")
def kafka_broker():
    """One real Kafka-protocol broker for the test session (in-memory: fresh every run)."""
    broker = start_broker()
    yield broker
    broker.stop()
