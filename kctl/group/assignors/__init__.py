"""Assignors: pure functions from group metadata to assignments.

`connect` holds Kafka Connect's worker assignors and the ids everyone shares
(TaskId, ConnectorsAndTasks); `consumer` holds the consumer partition assignors.
"""

from kctl.group.assignors.connect import (
    CONFIG_MISMATCH,
    DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS,
    EMPTY,
    NO_ERROR,
    AssignmentSets,
    AssignorMemory,
    ConnectAssignment,
    ConnectAssignor,
    ConnectAssignResult,
    ConnectorsAndTasks,
    EagerAssignor,
    IncrementalCooperativeAssignor,
    TaskId,
    WorkerMetadata,
    connect_assignor,
)
from kctl.group.assignors.consumer import (
    Assignment,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    available_consumer_assignors,
    consumer_assignor,
)

__all__ = [
    "CONFIG_MISMATCH",
    "DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS",
    "EMPTY",
    "NO_ERROR",
    "Assignment",
    "AssignmentSets",
    "AssignorMemory",
    "ConnectAssignResult",
    "ConnectAssignment",
    "ConnectAssignor",
    "ConnectorsAndTasks",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "EagerAssignor",
    "IncrementalCooperativeAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TaskId",
    "TopicPartition",
    "WorkerMetadata",
    "available_consumer_assignors",
    "connect_assignor",
    "consumer_assignor",
]
