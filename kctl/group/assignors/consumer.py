"""Kafka's consumer partition assignors: range, roundrobin, sticky, cooperative-sticky.

The interface is Kafka's ConsumerPartitionAssignor: a name, `assign` run by
the group leader, `on_assignment` run by every member, the rebalance protocols it
supports, a version and the user data a member attaches to its subscription. Third-party
assignors register under the entry-point group `kctl.assignors`.

Behaviour follows Kafka's RangeAssignor, RoundRobinAssignor, AbstractStickyAssignor
(constrained path for equal subscriptions, general path otherwise), StickyAssignor and
CooperativeStickyAssignor, without rack awareness (a Mapping of partition counts carries
no replica racks). Where Java leaves an order to a HashMap, members and topics are taken
in sorted order, so the result does not depend on the order of the input mappings.
Every member's partitions come back sorted by topic, then partition.
"""

from __future__ import annotations

import bisect
import struct
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from operator import attrgetter
from typing import Any, TypeVar

from kctl.api.records import TopicPartition
from kctl.errors import PluginError

__all__ = [
    "DEFAULT_GENERATION",
    "AbstractPartitionAssignor",
    "AbstractStickyAssignor",
    "Assignment",
    "AssignorPlugin",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "MemberData",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TopicPartition",
    "available_consumer_assignors",
    "consumer_assignor",
    "decode_generation",
    "decode_sticky_user_data",
    "encode_generation",
    "encode_sticky_user_data",
]

DEFAULT_GENERATION = -1


T = TypeVar("T")


def _tuple_of(values: Iterable[T]) -> tuple[T, ...]:
    return values if isinstance(values, tuple) else tuple(values)


@dataclass(frozen=True)
class Subscription:
    """What a member sends in JoinGroup (ConsumerProtocolSubscription v3).

    `owned_partitions` and `generation_id` are what a cooperative member still runs and
    the generation it got them in; `generation_id` -1 means "not sent" (older clients),
    in which case cooperative-sticky falls back to the generation in `user_data`.
    `group_instance_id` is static membership: range and roundrobin order static members
    by it so their assignment survives a restart under a new member id.
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", _tuple_of(self.topics))
        object.__setattr__(self, "owned_partitions", _tuple_of(self.owned_partitions))


@dataclass(frozen=True)
class Assignment:
    """What SyncGroup hands one member."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", _tuple_of(self.partitions))


class RebalanceProtocol(Enum):
    """EAGER revokes everything before rejoining; COOPERATIVE keeps what it can."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True)
class MemberData:
    """A member's previous assignment as the sticky assignors read it."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None = None
    rack_id: str | None = None


# --------------------------------------------------------------------------- user data
# Kafka's wire layout (Struct schemas, big-endian): sticky v1 is
#   [int32 n][n x (int16 len, utf8 topic, int32 m, m x int32 partition)][int32 generation]
# and v0 is the same without the generation; cooperative-sticky v0 is a lone int32.

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def encode_sticky_user_data(
    partitions: Iterable[TopicPartition], generation: int | None
) -> bytes:
    """StickyAssignor's user data (v1, or v0 when there is no generation)."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic, numbers in by_topic.items():
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(numbers))
        out += struct.pack(f">{len(numbers)}i", *numbers)
    if generation is not None:
        out += _I32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> MemberData:
    """Read v1, else v0; unreadable data means "no previous assignment" (as Kafka)."""
    try:
        (count,) = _I32.unpack_from(data, 0)
        offset = 4
        if count < 0:
            raise ValueError("negative array length")
        partitions: list[TopicPartition] = []
        for _ in range(count):
            (length,) = _I16.unpack_from(data, offset)
            offset += 2
            if length < 0 or offset + length > len(data):
                raise ValueError("bad topic length")
            topic = bytes(data[offset : offset + length]).decode()
            offset += length
            (n,) = _I32.unpack_from(data, offset)
            offset += 4
            if n < 0:
                raise ValueError("negative array length")
            numbers = struct.unpack_from(f">{n}i", data, offset)
            offset += 4 * n
            partitions.extend(TopicPartition(topic, p) for p in numbers)
    except (struct.error, ValueError, UnicodeDecodeError):
        return MemberData((), DEFAULT_GENERATION)
    generation = _I32.unpack_from(data, offset)[0] if len(data) - offset >= 4 else None
    return MemberData(tuple(partitions), generation)


def encode_generation(generation: int) -> bytes:
    """CooperativeStickyAssignor's user data: the last generation it was assigned in."""
    return _I32.pack(generation)


def decode_generation(data: bytes | None) -> int | None:
    """None when nothing was sent; DEFAULT_GENERATION when it cannot be read (as Kafka)."""
    if data is None:
        return None
    if len(data) < 4:
        return DEFAULT_GENERATION
    generation: int = _I32.unpack_from(data, 0)[0]
    return generation


# --------------------------------------------------------------------------- interface


class ConsumerPartitionAssignor(ABC):
    """Kafka's ConsumerPartitionAssignor. One instance per member: it may remember what
    `on_assignment` told it and send that back in `subscription_user_data`."""

    name: str = ""
    version: int = 0

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.EAGER]

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return None

    @abstractmethod
    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        """Run on the leader: every member in `subscriptions` gets an entry."""

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Run on every member when SyncGroup returns."""


class AbstractPartitionAssignor(ConsumerPartitionAssignor):
    """Kafka's AbstractPartitionAssignor: subclasses see only subscribed, existing topics
    and return plain partition lists."""

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        subscribed = {t for s in subscriptions.values() for t in s.topics}
        counts = {
            t: n for t, n in sorted(partitions_per_topic.items()) if t in subscribed and n > 0
        }
        members = {m: subscriptions[m] for m in sorted(subscriptions)}
        raw = self.assign_partitions(counts, members)
        return {m: Assignment(tuple(sorted(raw.get(m, ()), key=_by_topic_partition)))
                for m in members}

    @abstractmethod
    def assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """`partitions_per_topic` holds only subscribed topics with partitions, sorted;
        `subscriptions` is sorted by member id."""


# TopicPartition's own order, compared as plain tuples (the dataclass __lt__ is slow).
_by_topic_partition = attrgetter("topic", "partition")


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def _member_order(
    subscriptions: Mapping[str, Subscription],
) -> Callable[[str], tuple[int, str]]:
    """Kafka's MemberInfo order: static members (by instance id) first, then member id."""

    def key(member: str) -> tuple[int, str]:
        instance = subscriptions[member].group_instance_id
        return (0, instance) if instance is not None else (1, member)

    return key


# --------------------------------------------------------------------------- range / rr


class RangeAssignor(AbstractPartitionAssignor):
    """Per topic, consecutive ranges over the sorted subscribers; the first
    `partitions % consumers` get one more. Topics sharing subscribers stay co-partitioned."""

    name = "range"

    def assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        per_topic: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            for topic in dict.fromkeys(sub.topics):
                per_topic.setdefault(topic, []).append(member)
        order = _member_order(subscriptions)
        for topic, count in partitions_per_topic.items():
            consumers = sorted(per_topic.get(topic, ()), key=order)
            if not consumers:
                continue
            each, extra = divmod(count, len(consumers))
            for i, consumer in enumerate(consumers):
                start = each * i + min(i, extra)
                length = each + (1 if i < extra else 0)
                result[consumer].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return result


class RoundRobinAssignor(AbstractPartitionAssignor):
    """All partitions sorted, dealt over the sorted members in a circle, skipping members
    that do not subscribe the partition's topic."""

    name = "roundrobin"

    def assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted(subscriptions, key=_member_order(subscriptions))
        if not members:
            return result
        topics_of = {m: frozenset(subscriptions[m].topics) for m in members}
        at = 0
        for topic, count in partitions_per_topic.items():
            for p in range(count):
                while topic not in topics_of[members[at]]:
                    at = (at + 1) % len(members)
                result[members[at]].append(TopicPartition(topic, p))
                at = (at + 1) % len(members)
        return result


# --------------------------------------------------------------------------- sticky


class AbstractStickyAssignor(AbstractPartitionAssignor):
    """Balanced first, sticky second (Kafka's AbstractStickyAssignor).

    After `assign`, `partitions_transferring_ownership` maps each partition that changes
    owner to its new owner (None when the general path ran: then cooperative-sticky
    recomputes it from owned partitions), and `is_sticky()` reports whether the general
    path moved partitions of one topic back and forth between two members.
    """

    def __init__(self) -> None:
        self.partitions_transferring_ownership: dict[TopicPartition, str] | None = {}
        self._movements: _PartitionMovements | None = None

    @abstractmethod
    def member_data(self, subscription: Subscription) -> MemberData:
        """The previous assignment and generation this member reports."""

    def is_sticky(self) -> bool:
        return self._movements is None or self._movements.is_sticky()

    def assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        self._movements = None
        if not subscriptions:
            self.partitions_transferring_ownership = {}
            return {}
        datas = {m: self.member_data(s) for m, s in subscriptions.items()}
        owned, multiple, equal = _owned_partitions(partitions_per_topic, subscriptions, datas)
        if equal:
            builder = _ConstrainedBuilder(partitions_per_topic, owned, multiple)
            result = builder.build()
            self.partitions_transferring_ownership = builder.transferring
            return result
        self.partitions_transferring_ownership = None
        general = _GeneralBuilder(partitions_per_topic, owned, subscriptions, datas)
        result = general.build()
        self._movements = general.movements
        return result


def _owned_partitions(
    counts: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    datas: Mapping[str, MemberData],
) -> tuple[dict[str, list[TopicPartition]], set[TopicPartition], bool]:
    """Each member's still-valid owned partitions, the partitions claimed twice in one
    generation (dropped from everyone), and whether all subscriptions are equal.

    A claim from a higher generation wins over a lower one. Kafka compares against the
    other member's Subscription.generationId; this uses the generation from its member
    data, which is the same value for every real client and also right for old ones.
    """
    first = next(iter(subscriptions.values()))
    reference = set(first.topics)
    equal = all(set(s.topics) == reference for s in subscriptions.values())
    owned: dict[str, list[TopicPartition]] = {}
    multiple: set[TopicPartition] = set()
    owner_of: dict[TopicPartition, str] = {}
    generation_of = {
        m: (d.generation if d.generation is not None else DEFAULT_GENERATION)
        for m, d in datas.items()
    }
    for member in subscriptions:
        mine: list[TopicPartition] = []
        owned[member] = mine
        generation = generation_of[member]
        for tp in datas[member].partitions:
            count = counts.get(tp.topic)
            if count is None or not 0 <= tp.partition < count:
                continue
            other = owner_of.get(tp)
            if other is None:
                mine.append(tp)
                owner_of[tp] = member
                continue
            other_generation = generation_of[other]
            if generation == other_generation:
                multiple.add(tp)
                _remove(owned[other], tp)
                owner_of[tp] = member
            elif generation > other_generation:
                mine.append(tp)
                _remove(owned[other], tp)
                owner_of[tp] = member
    return owned, multiple, equal


def _remove(items: list[TopicPartition], tp: TopicPartition) -> None:
    if tp in items:
        items.remove(tp)


class _ConstrainedBuilder:
    """Equal subscriptions: keep owned partitions up to the quota, then deal the rest
    round robin to members under quota (linear in partitions)."""

    def __init__(
        self,
        counts: Mapping[str, int],
        owned: Mapping[str, list[TopicPartition]],
        multiple: set[TopicPartition],
    ) -> None:
        self.counts = counts
        self.owned = owned
        self.multiple = multiple
        self.transferring: dict[TopicPartition, str] = {}
        total = sum(counts.values())
        members = len(owned)
        self.min_quota, self.expected_over = divmod(total, members)
        self.max_quota = self.min_quota + (1 if self.expected_over else 0)
        self.current_over = 0
        self.assignment: dict[str, list[TopicPartition]] = {m: [] for m in owned}
        self.maybe_revoked: dict[TopicPartition, str] = {}
        self.under: list[str] = []
        self.exact: list[str] = []

    def build(self) -> dict[str, list[TopicPartition]]:
        assigned = self._assign_owned()
        unassigned = [
            tp
            for topic, count in self.counts.items()
            for tp in partitions_of(topic, count)
            if tp not in assigned
        ]
        self.under.sort()
        self.exact.sort()
        self._assign_round_robin(unassigned)
        self._verify()
        return self.assignment

    def _assign_owned(self) -> set[TopicPartition]:
        assigned: set[TopicPartition] = set()
        min_q, max_q = self.min_quota, self.max_quota
        for member, owned in self.owned.items():
            mine = sorted(
                (tp for tp in owned if tp not in self.multiple),
                key=lambda tp: (tp.partition, tp.topic),
            )
            target = self.assignment[member]
            if len(mine) < min_q:
                target.extend(mine)
                assigned.update(mine)
                self.under.append(member)
            elif len(mine) >= max_q and self.current_over < self.expected_over:
                self.current_over += 1
                if self.current_over == self.expected_over:
                    self.exact.clear()
                target.extend(mine[:max_q])
                assigned.update(mine[:max_q])
                for tp in mine[max_q:]:
                    self.maybe_revoked[tp] = member
            else:
                target.extend(mine[:min_q])
                assigned.update(mine[:min_q])
                for tp in mine[min_q:]:
                    self.maybe_revoked[tp] = member
                if self.current_over < self.expected_over:
                    self.exact.append(member)
        return assigned

    def _assign_round_robin(self, unassigned: Sequence[TopicPartition]) -> None:
        under = self.under
        exact = deque(self.exact)
        at = 0  # a Java list iterator over `under`: the next index to hand out
        for tp in unassigned:
            if at < len(under):
                member = under[at]
                at += 1
            elif not under and not exact:
                raise RuntimeError(f"no unfilled member left for {tp}: assignor bug")
            elif not under:
                member = exact.popleft()
            else:
                member = under[0]
                at = 1
            count = self._assign_new(tp, member)
            if count == self.min_quota:
                at -= 1
                del under[at]
                exact.append(member)
            elif count == self.max_quota:
                self.current_over += 1
        self.exact = list(exact)

    def _assign_new(self, tp: TopicPartition, member: str) -> int:
        target = self.assignment[member]
        target.append(tp)
        previous = self.maybe_revoked.get(tp)
        if (previous is not None and previous != member) or tp in self.multiple:
            self.transferring[tp] = member
        return len(target)

    def _verify(self) -> None:
        if not self.under:
            return
        if self.current_over != self.expected_over:
            raise RuntimeError("members under quota remain but no partitions: assignor bug")
        for member in self.under:
            if len(self.assignment[member]) != self.min_quota:
                raise RuntimeError(f"{member} did not reach min quota: assignor bug")


class _SizeOrdered:
    """Java's TreeSet of members ordered by (assignment size, member id)."""

    def __init__(self, sizes: Mapping[str, list[TopicPartition]]) -> None:
        self._sizes = sizes
        self._keys: list[tuple[int, str]] = []
        self._key_of: dict[str, tuple[int, str]] = {}

    def add(self, member: str) -> None:
        if member in self._key_of:
            return
        key = (len(self._sizes[member]), member)
        bisect.insort(self._keys, key)
        self._key_of[member] = key

    def remove(self, member: str) -> None:
        key = self._key_of.pop(member, None)
        if key is not None:
            del self._keys[bisect.bisect_left(self._keys, key)]

    def first(self) -> str:
        return self._keys[0][1]

    def last(self) -> str:
        return self._keys[-1][1]

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __iter__(self) -> Iterator[str]:
        return (member for _, member in self._keys)


class _PartitionMovements:
    """Where partitions moved during the general path, so a move can undo an earlier one
    instead of shuffling partitions of one topic between two members."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], dict[TopicPartition, None]]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove_record(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        topic_moves = self.by_topic[tp.topic]
        del topic_moves[pair][tp]
        if not topic_moves[pair]:
            del topic_moves[pair]
        if not topic_moves:
            del self.by_topic[tp.topic]
        return pair

    def _add_record(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[tp] = pair
        self.by_topic.setdefault(tp.topic, {}).setdefault(pair, {})[tp] = None

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.moves:
            source, _ = self._remove_record(tp)
            if source != new:
                self._add_record(tp, (source, new))
        else:
            self._add_record(tp, (old, new))

    def actual_partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        topic_moves = self.by_topic.get(tp.topic)
        if topic_moves is None:
            return tp
        if tp in self.moves:
            old = self.moves[tp][0]
        reverse = topic_moves.get((new, old))
        if not reverse:
            return tp
        return next(iter(reverse))

    def is_sticky(self) -> bool:
        """False when partitions of one topic moved both a->b and b->a."""
        return not any(
            (dst, src) in pairs for pairs in self.by_topic.values() for src, dst in pairs
        )


@dataclass(frozen=True)
class _PreviousOwner:
    member: str
    generation: int


@dataclass
class _GeneralBuilder:
    """Unequal subscriptions: keep valid owned partitions, give the rest to the least
    loaded subscriber, then move partitions while that improves balance."""

    counts: Mapping[str, int]
    current: dict[str, list[TopicPartition]]
    subscriptions: Mapping[str, Subscription]
    datas: Mapping[str, MemberData]
    movements: _PartitionMovements = field(default_factory=_PartitionMovements)

    def __post_init__(self) -> None:
        self.topic_members: dict[str, list[str]] = {t: [] for t in self.counts}
        self.member_topics: dict[str, list[str]] = {}
        self.member_topic_sets: dict[str, frozenset[str]] = {}
        self.max_size: dict[str, int] = {}
        # Members usually share a handful of subscriptions: work each one out once.
        seen: dict[tuple[str, ...], tuple[list[str], frozenset[str], int]] = {}
        for member, sub in self.subscriptions.items():
            known = seen.get(sub.topics)
            if known is None:
                topics = [t for t in dict.fromkeys(sub.topics) if t in self.counts]
                known = (topics, frozenset(topics), sum(self.counts[t] for t in topics))
                seen[sub.topics] = known
            topics, self.member_topic_sets[member], self.max_size[member] = known
            self.member_topics[member] = topics
            for topic in topics:
                self.topic_members[topic].append(member)
            self.current.setdefault(member, [])
        self.owner: dict[TopicPartition, str] = {
            tp: m for m, parts in self.current.items() for tp in parts
        }
        self.topic_partitions = {t: partitions_of(t, n) for t, n in self.counts.items()}
        topics = sorted(self.counts, key=lambda t: (len(self.topic_members[t]), t))
        self.sorted_partitions = [tp for t in topics for tp in self.topic_partitions[t]]
        self.by_size = _SizeOrdered(self.current)
        self.revocation_required = False

    def build(self) -> dict[str, list[TopicPartition]]:
        previous = self._previous_owners()
        assigned = self._keep_owned()
        unassigned = [tp for tp in self.sorted_partitions if tp not in assigned]
        for member in self.current:
            self.by_size.add(member)
        self._balance(previous, unassigned)
        return self.current

    def _previous_owners(self) -> dict[TopicPartition, _PreviousOwner]:
        """The latest owner before the newest generation, so a partition can go back."""
        generations = [d.generation for d in self.datas.values() if d.generation is not None]
        newest = max([DEFAULT_GENERATION, *generations])
        previous: dict[TopicPartition, _PreviousOwner] = {}
        for member, data in self.datas.items():
            if data.generation is not None and data.generation < newest:
                generation = data.generation
            elif data.generation is None and newest > DEFAULT_GENERATION:
                generation = DEFAULT_GENERATION
            else:
                continue
            for tp in data.partitions:
                known = previous.get(tp)
                if known is None or generation > known.generation:
                    previous[tp] = _PreviousOwner(member, generation)
        return previous

    def _keep_owned(self) -> set[TopicPartition]:
        assigned: set[TopicPartition] = set()
        for member, parts in self.current.items():
            topics = self.member_topic_sets[member]
            kept = [tp for tp in parts if tp.topic in topics]
            if len(kept) != len(parts):
                self.revocation_required = True
                for tp in parts:
                    if tp.topic not in topics:
                        self.owner.pop(tp, None)
                parts[:] = kept
            assigned.update(kept)
        return assigned

    def _balance(
        self, previous: Mapping[TopicPartition, _PreviousOwner], unassigned: list[TopicPartition]
    ) -> None:
        initializing = not self.current[self.by_size.last()]
        for tp in unassigned:
            if self.topic_members[tp.topic]:
                self._assign_to_least_loaded(tp)

        fixed_topics = {t for t, ms in self.topic_members.items() if len(ms) < 2}
        self.sorted_partitions = [tp for tp in self.sorted_partitions if tp.topic not in fixed_topics]
        unassigned = [tp for tp in unassigned if tp.topic not in fixed_topics]

        fixed: dict[str, list[TopicPartition]] = {}
        for member in self.member_topics:
            if not self._can_participate(member):
                self.by_size.remove(member)
                fixed[member] = self.current.pop(member)

        before = {m: list(ps) for m, ps in self.current.items()}
        before_owner = dict(self.owner)
        if not self.revocation_required:
            self._perform_reassignments(unassigned, previous)
        performed = self._perform_reassignments(self.sorted_partitions, previous)
        if (
            not initializing
            and performed
            and _balance_score(self.current) >= _balance_score(before)
        ):
            self.current.clear()
            self.current.update(before)
            self.owner = before_owner
        for member, parts in fixed.items():
            self.current[member] = parts
            self.by_size.add(member)

    def _assign_to_least_loaded(self, tp: TopicPartition) -> None:
        for member in self.by_size:
            if tp.topic in self.member_topic_sets[member]:
                self.by_size.remove(member)
                self.current[member].append(tp)
                self.owner[tp] = member
                self.by_size.add(member)
                return

    def _can_participate(self, member: str) -> bool:
        parts = self.current[member]
        if len(parts) < self.max_size[member]:
            return True
        return any(len(self.topic_members[tp.topic]) >= 2 for tp in parts)

    def _is_balanced(self) -> bool:
        if not self.by_size:
            return True
        if len(self.current[self.by_size.first()]) >= len(self.current[self.by_size.last()]) - 1:
            return True
        # `owner` is kept in step with `current` (Kafka rebuilds it on every call, which is
        # quadratic here); owners outside `current` (fixed members) are skipped, as a map
        # built from `current` would not know them. A member's own partitions never fail
        # the size test, so they need no set of their own.
        owner, current = self.owner, self.current
        for member in self.by_size:
            size = len(current[member])
            if size == self.max_size[member]:
                continue
            for topic in self.member_topics[member]:
                for tp in self.topic_partitions[topic]:
                    other = owner.get(tp)
                    if other is not None and other in current and size + 1 < len(current[other]):
                        return False
        return True

    def _perform_reassignments(
        self, partitions: list[TopicPartition], previous: Mapping[TopicPartition, _PreviousOwner]
    ) -> bool:
        performed = False
        modified = True
        while modified:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                member = self.owner.get(tp)
                if member is None or member not in self.current:
                    continue
                size = len(self.current[member])
                before = previous.get(tp)
                if (
                    before is not None
                    and before.member in self.current
                    and size > len(self.current[before.member]) + 1
                ):
                    self._reassign(tp, before.member)
                    performed = modified = True
                    continue
                for other in self.topic_members[tp.topic]:
                    if other in self.current and size > len(self.current[other]) + 1:
                        self._reassign(tp, self._least_loaded_for(tp.topic))
                        performed = modified = True
                        break
        return performed

    def _least_loaded_for(self, topic: str) -> str:
        for member in self.by_size:
            if topic in self.member_topic_sets[member]:
                return member
        raise RuntimeError(f"no subscriber for {topic}: assignor bug")

    def _reassign(self, tp: TopicPartition, new: str) -> None:
        old = self.owner[tp]
        moved = self.movements.actual_partition_to_move(tp, old, new)
        holder = self.owner[moved]
        self.by_size.remove(holder)
        self.by_size.remove(new)
        self.movements.move(moved, holder, new)
        self.current[holder].remove(moved)
        self.current[new].append(moved)
        self.owner[moved] = new
        self.by_size.add(new)
        self.by_size.add(holder)


def _balance_score(assignment: Mapping[str, list[TopicPartition]]) -> int:
    """Sum of |size difference| over all member pairs; 0 is perfectly balanced."""
    sizes = sorted(len(parts) for parts in assignment.values())
    n = len(sizes)
    return sum(size * (2 * i - n + 1) for i, size in enumerate(sizes))


class StickyAssignor(AbstractStickyAssignor):
    """Eager sticky: members revoke everything before joining, so the previous assignment
    travels in the user data (Kafka's v1 layout: partitions and generation)."""

    name = "sticky"

    def __init__(self) -> None:
        super().__init__()
        self._member_assignment: tuple[TopicPartition, ...] | None = None
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._member_assignment = assignment.partitions
        self._generation = generation

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        if self._member_assignment is None:
            return None
        return encode_sticky_user_data(self._member_assignment, self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        """User data always wins. Without any, fall back to owned partitions: a real eager
        member sends none, so this only serves callers that skip the user data."""
        if subscription.user_data:
            return decode_sticky_user_data(subscription.user_data)
        if subscription.owned_partitions:
            generation = subscription.generation_id
            return MemberData(
                subscription.owned_partitions,
                generation if generation != DEFAULT_GENERATION else None,
                subscription.rack_id,
            )
        return MemberData((), None, subscription.rack_id)


class CooperativeStickyAssignor(AbstractStickyAssignor):
    """Sticky under the cooperative protocol: a partition that changes owner is left out
    of its new owner's assignment, so its old owner revokes it first and the follow-up
    rebalance hands it over."""

    name = "cooperative-sticky"

    def __init__(self) -> None:
        super().__init__()
        self._generation = DEFAULT_GENERATION

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._generation = generation

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return encode_generation(self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.generation_id != DEFAULT_GENERATION:
            return MemberData(
                subscription.owned_partitions, subscription.generation_id, subscription.rack_id
            )
        return MemberData(
            subscription.owned_partitions,
            decode_generation(subscription.user_data),
            subscription.rack_id,
        )

    def assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        result = super().assign_partitions(partitions_per_topic, subscriptions)
        transferring = self.partitions_transferring_ownership
        if transferring is None:
            transferring = _transferring(subscriptions, result)
            self.partitions_transferring_ownership = transferring
        for tp, member in transferring.items():
            _remove(result[member], tp)
        return result


def _transferring(
    subscriptions: Mapping[str, Subscription], result: Mapping[str, list[TopicPartition]]
) -> dict[TopicPartition, str]:
    """Partitions some member gains while another member still owns them."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member, parts in result.items():
        owned = set(subscriptions[member].owned_partitions)
        assigned = set(parts)
        for tp in parts:
            if tp not in owned:
                added[tp] = member
        revoked.update(tp for tp in owned if tp not in assigned)
    moving = sorted((tp for tp in added if tp in revoked), key=_by_topic_partition)
    return {tp: added[tp] for tp in moving}


# --------------------------------------------------------------------------- discovery

BUILTIN_ASSIGNORS: dict[str, type[ConsumerPartitionAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}

# partition.assignment.strategy takes class names; accept Kafka's for familiarity.
_KAFKA_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


@dataclass(frozen=True)
class AssignorPlugin:
    """A third-party assignor someone else found (the worker scans the `kctl.assignors`
    entry points, `kctl.transport.assignor_plugins`): this core never looks for plugins,
    it is handed them. `load` returns a class or a zero-argument factory; `source` names
    where it comes from, for errors."""

    name: str
    source: str
    load: Callable[[], Callable[[], Any]]


AssignorPlugins = Mapping[str, AssignorPlugin]
NO_PLUGINS: AssignorPlugins = {}


def available_consumer_assignors(plugins: AssignorPlugins = NO_PLUGINS) -> list[str]:
    """Built-in names, then those of the given plugins, sorted."""
    return sorted({*BUILTIN_ASSIGNORS, *plugins})


def consumer_assignor(name: str, plugins: AssignorPlugins = NO_PLUGINS
                      ) -> ConsumerPartitionAssignor:
    """A fresh assignor (each member needs its own: sticky ones remember their assignment).

    `name` is a built-in name, a Kafka class name of a built-in, or the name of one of
    `plugins` (which may name a class or a zero-argument factory).
    """
    name = _KAFKA_CLASS_NAMES.get(name, name)
    builtin = BUILTIN_ASSIGNORS.get(name)
    if builtin is not None:
        return builtin()
    plugin = plugins.get(name)
    if plugin is None:
        known = ", ".join(available_consumer_assignors(plugins))
        raise PluginError(f"unknown consumer assignor {name!r}; known: {known}")
    try:
        factory = plugin.load()
        assignor = factory()
    except Exception as exc:
        raise PluginError(f"cannot load consumer assignor {name!r} ({plugin.source}): {exc}"
                          ) from exc
    if not isinstance(assignor, ConsumerPartitionAssignor):
        raise PluginError(
            f"consumer assignor {name!r} ({plugin.source}) is not a ConsumerPartitionAssignor"
        )
    return assignor
