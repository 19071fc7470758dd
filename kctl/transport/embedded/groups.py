"""Consumer groups in process: the group state the transport keeps for its consumers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.api.records import TopicPartition
from kctl.group.assignors.consumer import TopicPartition as GroupTopicPartition
from kctl.group.consumer_coordinator import (
    ConsumerHandler,
)

if TYPE_CHECKING:
    pass



# A cooperative assignor needs two rounds to move a partition; more than this is a bug in a
# custom assignor that keeps revoking, and the group stops rebalancing rather than spin.
MAX_ROUNDS_PER_REBALANCE = 16


class _Member:
    """One consumer in a group: its protocol half and what the last rebalance gave it."""

    def __init__(self, member_id: str, handler: ConsumerHandler):
        self.id = member_id
        self.handler = handler
        self.assignment: frozenset[GroupTopicPartition] = frozenset()
        self.generation = -1  # the generation of `assignment` (Kafka: -1 before the first)
        # Bumped by every rebalance that makes an eager member give up all it holds;
        # `seen_epoch` is the last one its consumer picked up.
        self.revoke_all_epoch = 0
        self.seen_epoch = 0

    def target(self) -> set[TopicPartition]:
        return {TopicPartition(tp.topic, tp.partition) for tp in self.assignment}


class _Group:
    """In-process group coordinator state; guarded by the transport's group lock."""

    def __init__(self, group_id: str):
        self.id = group_id
        self.generation = 0
        self.protocol: str | None = None  # the assignor the group selected
        self.members: dict[str, _Member] = {}  # join order: the first is the leader
        self.watched: dict[str, int] = {}  # subscribed topics' partitions at the last round
        self.owners: dict[TopicPartition, str] = {}  # who holds a partition (claimed, not revoked)

