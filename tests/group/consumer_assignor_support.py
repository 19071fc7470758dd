"""Helpers shared by the consumer-assignor tests: short names and Kafka's own checks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kctl.group.assignors.consumer import (
    Assignment,
    ConsumerPartitionAssignor,
    Subscription,
    TopicPartition,
)


def tp(text: str) -> TopicPartition:
    return TopicPartition.parse(text)


def tps(*texts: str) -> tuple[TopicPartition, ...]:
    return tuple(sorted(tp(t) for t in texts))


def names(result: Mapping[str, Assignment]) -> dict[str, list[str]]:
    return {m: [str(p) for p in a.partitions] for m, a in result.items()}


def owned_by(result: Mapping[str, Assignment]) -> dict[TopicPartition, str]:
    return {p: m for m, a in result.items() for p in a.partitions}


def sizes(result: Mapping[str, Assignment]) -> list[int]:
    return sorted(len(a.partitions) for a in result.values())


def fully_balanced(result: Mapping[str, Assignment]) -> bool:
    counts = sizes(result)
    return not counts or counts[-1] - counts[0] <= 1


def next_generation(
    subscriptions: Mapping[str, Subscription],
    result: Mapping[str, Assignment],
    generation: int,
    *,
    keep: Iterable[str] | None = None,
) -> dict[str, Subscription]:
    """What the surviving members send next: their topics, what they own now, the generation."""
    members = list(subscriptions) if keep is None else list(keep)
    return {
        m: Subscription(
            subscriptions[m].topics,
            owned_partitions=result[m].partitions,
            generation_id=generation,
        )
        for m in members
    }


def verify_validity_and_balance(
    subscriptions: Mapping[str, Subscription],
    result: Mapping[str, Assignment],
    partitions_per_topic: Mapping[str, int],
) -> None:
    """Kafka's AbstractStickyAssignorTest.verifyValidityAndBalance, plus completeness:
    every subscribed partition is assigned exactly once, only to a subscriber, and two
    members more than one apart share no topic (else a partition could have moved)."""
    assert set(result) == set(subscriptions)
    seen: dict[TopicPartition, str] = {}
    for member, assignment in result.items():
        for p in assignment.partitions:
            assert p.topic in subscriptions[member].topics, f"{p} given to {member}, not subscribed"
            assert p not in seen, f"{p} given to both {seen[p]} and {member}"
            seen[p] = member
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    expected = {
        TopicPartition(t, p)
        for t, n in partitions_per_topic.items()
        if t in subscribed
        for p in range(n)
    }
    assert set(seen) == expected
    members = sorted(result)
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            pa, pb = result[a].partitions, result[b].partitions
            if abs(len(pa) - len(pb)) <= 1:
                continue
            shared = {p.topic for p in pa} & {p.topic for p in pb}
            assert not shared, f"{a} ({len(pa)}) and {b} ({len(pb)}) could balance over {shared}"


def cooperative_round_violations(
    subscriptions: Mapping[str, Subscription], result: Mapping[str, Assignment]
) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """(revoked, revoked-and-assigned-elsewhere) for one cooperative round."""
    added: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    for member, assignment in result.items():
        owned = set(subscriptions[member].owned_partitions)
        now = set(assignment.partitions)
        added |= now - owned
        revoked |= owned - now
    return revoked, added & revoked


def settle(
    assignor: ConsumerPartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    generation: int,
    *,
    max_rounds: int = 4,
) -> tuple[dict[str, Assignment], dict[str, Subscription], int]:
    """Kafka's CooperativeStickyAssignorTest loop: while a round revokes something, the
    members rejoin with what they still own and the leader assigns again. Each round must
    not hand out a partition in the same round it is revoked."""
    subs = dict(subscriptions)
    rounds = 0
    while True:
        result = assignor.assign(partitions_per_topic, subs)
        revoked, both = cooperative_round_violations(subs, result)
        assert not both, f"revoked and reassigned in one round: {sorted(map(str, both))}"
        if not revoked:
            return result, subs, rounds
        rounds += 1
        assert rounds <= max_rounds, "cooperative rebalancing did not converge"
        generation += 1
        subs = next_generation(subs, result, generation)
