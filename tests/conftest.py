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


@pytest.fixture(params=["embedded", "broker"])
def transport_settings(request):
    """Worker settings for each transport: the embedded log, then the real broker."""
    if request.param == "broker":
        return {"bootstrap.servers": request.getfixturevalue("kafka_broker").bootstrap,
                "topic.creation.default.replication.factor": 1}
    return {}
