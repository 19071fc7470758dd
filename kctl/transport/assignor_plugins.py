"""Consumer assignors installed as plugins: the `kctl.assignors` entry points.

The sans-IO group core never scans for plugins (the import contract forbids it); the
consumers that run a group (embedded, Kafka) and the simulator find them here and hand
them to `kctl.group`.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from kctl.group.assignors.consumer import (
    AssignorPlugin,
    AssignorPlugins,
    ConsumerPartitionAssignor,
)
from kctl.group.assignors.consumer import available_consumer_assignors as _available
from kctl.group.assignors.consumer import consumer_assignor as _assignor
from kctl.group.consumer_coordinator import assignment_strategy as _strategy

__all__ = ["ENTRY_POINT_GROUP", "assignment_strategy", "available_consumer_assignors",
           "consumer_assignor", "installed_assignors"]

ENTRY_POINT_GROUP = "kctl.assignors"


def installed_assignors() -> AssignorPlugins:
    """Every assignor registered under `kctl.assignors`, by name (loaded when used)."""
    return {ep.name: AssignorPlugin(ep.name, ep.value, ep.load)
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def available_consumer_assignors() -> list[str]:
    return _available(installed_assignors())


def consumer_assignor(name: str) -> ConsumerPartitionAssignor:
    return _assignor(name, installed_assignors())


def assignment_strategy(value: Any = None) -> list[ConsumerPartitionAssignor]:
    """`partition.assignment.strategy` with the installed plugins (see
    kctl.group.consumer_coordinator.assignment_strategy)."""
    return _strategy(value, installed_assignors())
