"""The consumer's half of the group protocol (Kafka's ConsumerCoordinator), written once.

What a consumer puts in JoinGroup (one Subscription per configured assignor: its topics,
the partitions it still owns, the generation it got them in and that assignor's user
data), what the leader runs (the selected assignor, on the leader's own instance) and what
every member does with its assignment (its own assignor's `on_assignment`, which
partitions to stop and start, whether to rejoin after a cooperative revocation) live here.
The simulator behind `kctl rebalance explain` and the embedded log's consumer groups both
use this class, so what explain shows is what an embedded sink group does.

`partition.assignment.strategy` is parsed here too, accepting what Kafka accepts (short
names, Kafka's class names, a comma-separated list in order of preference) plus
ConsumerPartitionAssignor classes and the names of the plugins it is handed (the
`kctl.assignors` entry points a worker found, `kctl.transport.assignor_plugins`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kctl.errors import ConfigError, PluginError
from kctl.group.assignors.consumer import (
    NO_PLUGINS,
    Assignment,
    AssignorPlugins,
    ConsumerPartitionAssignor,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
    consumer_assignor,
)
from kctl.group.messages import JoinMember
from kctl.group.protocol import AssignmentOutcome

__all__ = [
    "ASSIGNMENT_STRATEGY_CONFIG",
    "DEFAULT_ASSIGNMENT_STRATEGY",
    "ConsumerHandler",
    "Partitions",
    "assignment_strategy",
    "rebalance_protocol",
]

ASSIGNMENT_STRATEGY_CONFIG = "partition.assignment.strategy"
# Kafka's default: range is chosen; listing cooperative-sticky second lets a group move to
# it with two rolling restarts. Range supports only EAGER, so such a consumer is eager.
DEFAULT_ASSIGNMENT_STRATEGY = ("range", "cooperative-sticky")

Partitions = frozenset[TopicPartition]
Strategy = str | type[ConsumerPartitionAssignor]


def _strategy_items(value: Any) -> list[Strategy]:
    if value is None:
        return list(DEFAULT_ASSIGNMENT_STRATEGY)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, type):
        return [value]
    if isinstance(value, Iterable):
        items: list[Strategy] = []
        for item in value:
            items += _strategy_items(item) if isinstance(item, str) else [item]
        return items
    return [value]


def _instantiate(item: Any, plugins: AssignorPlugins) -> ConsumerPartitionAssignor:
    if isinstance(item, str):
        return consumer_assignor(item, plugins)
    if isinstance(item, type) and issubclass(item, ConsumerPartitionAssignor):
        return item()
    raise PluginError(
        f"{item!r} is not an assignor name or a ConsumerPartitionAssignor class "
        "(an instance would be shared by every member)"
    )


def assignment_strategy(value: Any = None, plugins: AssignorPlugins = NO_PLUGINS
                        ) -> list[ConsumerPartitionAssignor]:
    """Fresh assignors for one member, most preferred first, from the value of
    `partition.assignment.strategy` (None: Kafka's default, range then cooperative-sticky).

    Each member needs its own instances: sticky assignors remember what `on_assignment`
    told them and send it back in their subscription user data.
    """
    items = _strategy_items(value)
    if not items:
        raise ConfigError(f"{ASSIGNMENT_STRATEGY_CONFIG} names no assignor",
                          key=ASSIGNMENT_STRATEGY_CONFIG)
    assignors: dict[str, ConsumerPartitionAssignor] = {}
    for item in items:
        try:
            assignor = _instantiate(item, plugins)
        except PluginError as exc:
            raise ConfigError(f"{ASSIGNMENT_STRATEGY_CONFIG}: {exc}",
                              key=ASSIGNMENT_STRATEGY_CONFIG) from exc
        assignors.setdefault(assignor.name, assignor)
    chosen = list(assignors.values())
    rebalance_protocol(chosen)
    return chosen


def rebalance_protocol(assignors: Sequence[ConsumerPartitionAssignor]) -> RebalanceProtocol:
    """Kafka's rule: a consumer uses the highest rebalance protocol all its assignors
    support, so listing range anywhere keeps the consumer eager."""
    common = set(assignors[0].supported_protocols()) if assignors else set()
    for assignor in assignors[1:]:
        common &= set(assignor.supported_protocols())
    if not common:
        names = ", ".join(a.name for a in assignors)
        raise ConfigError(
            f"{ASSIGNMENT_STRATEGY_CONFIG}: assignors [{names}] have no rebalance protocol "
            "in common",
            key=ASSIGNMENT_STRATEGY_CONFIG,
        )
    return max(common, key=lambda p: p.value)


class ConsumerHandler:
    """One consumer's protocol half for `GroupMember`, with that consumer's own assignors.

    `cluster` returns the partition count of every topic, as the leader's metadata shows
    it when it computes an assignment.
    """

    protocol_type = "consumer"

    def __init__(
        self,
        name: str,
        topics: Iterable[str],
        assignors: Sequence[ConsumerPartitionAssignor],
        cluster: Callable[[], Mapping[str, int]],
    ):
        self.name = name
        self.topics = tuple(topics)
        self.assignors = {a.name: a for a in assignors}
        self.protocol = rebalance_protocol(list(self.assignors.values()))
        self.cluster = cluster
        self.reports: dict[int, tuple[dict[str, Any], int]] = {}

    @property
    def assignor_names(self) -> tuple[str, ...]:
        """The protocols this member offers in JoinGroup, most preferred first."""
        return tuple(self.assignors)

    def empty(self) -> Partitions:
        return frozenset()

    def is_empty(self, work: Partitions) -> bool:
        return not work

    def is_eager(self, protocol: str) -> bool:
        """Eager whatever assignor the group selected: the consumer's protocol is fixed
        by all the assignors it lists."""
        return self.protocol is RebalanceProtocol.EAGER

    def metadata(self, owned: Partitions, generation: int) -> tuple[tuple[str, Any], ...]:
        """One Subscription per assignor; an eager member has revoked everything before
        it joins, so `owned` is then empty."""
        topics = set(self.topics)
        return tuple(
            (
                name,
                Subscription(
                    topics=self.topics,
                    user_data=assignor.subscription_user_data(topics),
                    owned_partitions=tuple(sorted(owned)),
                    generation_id=generation,
                ),
            )
            for name, assignor in self.assignors.items()
        )

    def assign(
        self,
        *,
        leader: str,
        protocol: str,
        generation: int,
        members: Sequence[JoinMember],
        now_ms: int,
        last_completed_generation: int,
    ) -> Mapping[str, Assignment]:
        subscriptions = {m.member_id: m.metadata for m in members}
        result = self.assignors[protocol].assign(dict(self.cluster()), subscriptions)
        self.reports[generation] = ({}, 0)
        return result

    def on_assignment(
        self,
        *,
        protocol: str,
        assignment: Assignment | None,
        owned: Partitions,
        generation: int,
        now_ms: int,
    ) -> AssignmentOutcome[Partitions]:
        if assignment is None:
            assignment = Assignment(())
        self.assignors[protocol].on_assignment(assignment, generation)
        after = frozenset(assignment.partitions)
        stop = owned - after
        return AssignmentOutcome(
            owned=after,
            stop=stop,
            start=after - owned,
            rejoin=not self.is_eager(protocol) and bool(stop),
        )
