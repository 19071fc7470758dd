"""Kafka Connect's assignors: eager round-robin and incremental cooperative.

Both are pure: group metadata and the leader's memory go in, per-member assignments,
the set algebra the leader used, and the leader's new memory come out. Whoever leads
the group owns the memory value; a new leader starts without one (as in Kafka, where
the assignor's state lives on the leader and dies with it).

Behaviour follows Kafka's EagerAssignor and IncrementalCooperativeAssignor (KIP-415
and the fixes KAFKA-9841, KAFKA-9848, KAFKA-10413, KAFKA-12495 and KAFKA-15693).
Where Java leaves an order to a HashMap, this code uses sorted order so that
every run, and every rendered explanation, is the same.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter
from typing import Any, Protocol

from kctl.errors import ConfigError
from kctl.states import TaskId

__all__ = [
    "CONFIG_MISMATCH",
    "DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS",
    "EMPTY",
    "NO_ERROR",
    "PROTOCOL_VERSIONS",
    "AssignmentSets",
    "AssignorMemory",
    "ConnectAssignResult",
    "ConnectAssignment",
    "ConnectAssignor",
    "ConnectorsAndTasks",
    "EagerAssignor",
    "ExponentialBackoff",
    "IncrementalCooperativeAssignor",
    "TaskId",
    "WorkerMetadata",
    "configured_work",
    "connect_assignor",
    "sorted_tasks",
    "task_ids",
    "union_all",
]

DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS = 300_000
NO_ERROR = 0
# The leader's config snapshot is behind a member's: nobody may act on this round.
CONFIG_MISMATCH = 1
# Connect subprotocol versions (ConnectProtocolCompatibility).
PROTOCOL_VERSIONS: Mapping[str, int] = {"default": 0, "eager": 0, "compatible": 1, "sessioned": 2}


# Sorting through a C-level key is an order of magnitude faster than TaskId.__lt__.
task_sort_key = attrgetter("connector", "task")


def sorted_tasks(tasks: Iterable[TaskId]) -> list[TaskId]:
    return sorted(tasks, key=task_sort_key)


@lru_cache(maxsize=4096)
def task_ids(connector: str, count: int) -> tuple[TaskId, ...]:
    """The task ids of a connector with `count` tasks.

    Cached so that every round reuses the same objects: set operations then match
    by identity instead of calling the dataclass __eq__, which keeps big rounds fast.
    """
    return tuple(TaskId(connector, i) for i in range(count))


@dataclass(frozen=True, slots=True)
class ConnectorsAndTasks:
    """An immutable pair of sets, the unit of Kafka Connect's assignment algebra."""

    connectors: frozenset[str] = frozenset()
    tasks: frozenset[TaskId] = frozenset()

    @classmethod
    def of(
        cls, connectors: Iterable[str] = (), tasks: Iterable[TaskId | str] = ()
    ) -> ConnectorsAndTasks:
        """Build from any iterables; tasks may be given as "ct1-0" strings."""
        return cls(
            frozenset(connectors),
            frozenset(t if isinstance(t, TaskId) else TaskId.parse(t) for t in tasks),
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Iterable[str]]) -> ConnectorsAndTasks:
        return cls.of(data.get("connectors", ()), data.get("tasks", ()))

    def __or__(self, other: ConnectorsAndTasks) -> ConnectorsAndTasks:
        return ConnectorsAndTasks(self.connectors | other.connectors, self.tasks | other.tasks)

    def __sub__(self, other: ConnectorsAndTasks) -> ConnectorsAndTasks:
        return ConnectorsAndTasks(self.connectors - other.connectors, self.tasks - other.tasks)

    def __and__(self, other: ConnectorsAndTasks) -> ConnectorsAndTasks:
        return ConnectorsAndTasks(self.connectors & other.connectors, self.tasks & other.tasks)

    def union(self, *others: ConnectorsAndTasks) -> ConnectorsAndTasks:
        return ConnectorsAndTasks(
            self.connectors.union(*(o.connectors for o in others)),
            self.tasks.union(*(o.tasks for o in others)),
        )

    def difference(self, *others: ConnectorsAndTasks) -> ConnectorsAndTasks:
        return ConnectorsAndTasks(
            self.connectors.difference(*(o.connectors for o in others)),
            self.tasks.difference(*(o.tasks for o in others)),
        )

    def isdisjoint(self, other: ConnectorsAndTasks) -> bool:
        return self.connectors.isdisjoint(other.connectors) and self.tasks.isdisjoint(other.tasks)

    def issubset(self, other: ConnectorsAndTasks) -> bool:
        return self.connectors <= other.connectors and self.tasks <= other.tasks

    @property
    def is_empty(self) -> bool:
        return not self.connectors and not self.tasks

    @property
    def size(self) -> int:
        return len(self.connectors) + len(self.tasks)

    def to_json(self) -> dict[str, list[str]]:
        return {
            "connectors": sorted(self.connectors),
            "tasks": [str(t) for t in sorted_tasks(self.tasks)],
        }

    def __str__(self) -> str:
        body = ", ".join([*sorted(self.connectors), *map(str, sorted_tasks(self.tasks))])
        return "{" + body + "}"


EMPTY = ConnectorsAndTasks()


@lru_cache(maxsize=4096)
def _task_id_set(connector: str, count: int) -> frozenset[TaskId]:
    # Merging a set into a set reuses its stored hashes: no TaskId.__hash__ calls.
    return frozenset(task_ids(connector, count))


def configured_work(configured: Mapping[str, int]) -> ConnectorsAndTasks:
    """Every connector and task of a connector -> task-count map."""
    tasks: set[TaskId] = set()
    for name, count in configured.items():
        if count < 0:
            raise ConfigError(f"connector {name!r} has a negative task count {count}", key=name)
        tasks.update(_task_id_set(name, count))
    return ConnectorsAndTasks(frozenset(configured), frozenset(tasks))


def union_all(items: Iterable[ConnectorsAndTasks]) -> ConnectorsAndTasks:
    connectors: set[str] = set()
    tasks: set[TaskId] = set()
    for item in items:
        connectors |= item.connectors
        tasks |= item.tasks
    return ConnectorsAndTasks(frozenset(connectors), frozenset(tasks))


@dataclass(frozen=True)
class WorkerMetadata:
    """What a worker sends in JoinGroup (ExtendedWorkerState)."""

    url: str = ""
    config_offset: int = 0
    owned: ConnectorsAndTasks = EMPTY  # what it runs now (cooperative protocols)
    protocol_version: int = 2  # 0 eager ("default"), 1 compatible, 2 sessioned
    # The last generation the worker completed (kctl's assignment epoch, -1 before the
    # first). A rejoin after a completed generation therefore always differs from the join
    # that made it, so every coordinator starts a generation for it, not only Kafka's.
    epoch: int = -1


@dataclass(frozen=True)
class ConnectAssignment:
    """What SyncGroup hands each worker (ExtendedAssignment).

    Eager: `assigned` is the worker's whole assignment and `revoked` is empty (the
    worker already dropped everything before joining). Cooperative: both are changes
    against what the worker reported owning.
    """

    leader: str
    leader_url: str
    config_offset: int
    assigned: ConnectorsAndTasks = EMPTY
    revoked: ConnectorsAndTasks = EMPTY
    delay_ms: int = 0
    error: int = NO_ERROR
    version: int = 2

    def apply_to(self, owned: ConnectorsAndTasks) -> ConnectorsAndTasks:
        """What a worker runs once it has acted on this assignment.

        Eager (version 0) assignments are whole; cooperative ones are changes. A
        failed assignment (config mismatch) changes nothing.
        """
        if self.error != NO_ERROR:
            return owned
        if self.version == 0:
            return self.assigned
        return (owned - self.revoked) | self.assigned

    def to_json(self) -> dict[str, object]:
        return {
            "leader": self.leader,
            "leader_url": self.leader_url,
            "config_offset": self.config_offset,
            "assigned": self.assigned.to_json(),
            "revoked": self.revoked.to_json(),
            "delay_ms": self.delay_ms,
            "error": self.error,
            "version": self.version,
        }


@dataclass(frozen=True)
class AssignmentSets:
    """The set algebra the leader computed in one round, named as in Kafka's logs.

    previous   what the leader believes it handed out last round (its memory)
    configured everything in the config snapshot
    active     everything the members report running
    deleted    previous - configured
    lost       previous - active - deleted
    new        configured - previous - active ("created" in Kafka's code)
    duplicated running on more than one worker at once (zombies, KAFKA-9841)
    lost_reassigned      lost work handed out this round (delay expired or not needed)
    revoked_for_balance  load-balancing revocations issued this round
    revoked              everything revoked this round (deleted, duplicated, balance)
    assigned             everything newly assigned this round
    """

    configured: ConnectorsAndTasks = EMPTY
    previous: ConnectorsAndTasks = EMPTY
    active: ConnectorsAndTasks = EMPTY
    deleted: ConnectorsAndTasks = EMPTY
    lost: ConnectorsAndTasks = EMPTY
    new: ConnectorsAndTasks = EMPTY
    duplicated: ConnectorsAndTasks = EMPTY
    lost_reassigned: ConnectorsAndTasks = EMPTY
    revoked_for_balance: ConnectorsAndTasks = EMPTY
    revoked: ConnectorsAndTasks = EMPTY
    assigned: ConnectorsAndTasks = EMPTY

    def to_json(self) -> dict[str, dict[str, list[str]]]:
        return {
            name: getattr(self, name).to_json()
            for name in (
                "configured",
                "previous",
                "active",
                "deleted",
                "lost",
                "new",
                "duplicated",
                "lost_reassigned",
                "revoked_for_balance",
                "revoked",
                "assigned",
            )
        }


@dataclass(frozen=True)
class AssignorMemory:
    """The incremental cooperative leader's state between rounds.

    Opaque to everyone but the assignor; the simulator keeps it with the leader and
    drops it when the leadership moves.
    """

    previous_assignment: ConnectorsAndTasks = EMPTY
    previous_revocation: ConnectorsAndTasks = EMPTY
    previous_generation: int = -1
    previous_members: frozenset[str] = frozenset()
    revoked_in_previous: bool = False
    # Workers that joined empty-handed while lost work waited for its delay.
    candidate_workers: tuple[str, ...] = ()
    # Absolute simulated time at which a delayed rebalance is due; None when none is.
    scheduled_rebalance_ms: int | None = None
    delay_ms: int = 0
    successive_revoking_rebalances: int = 0


@dataclass(frozen=True)
class ConnectAssignResult:
    """One round's outcome.

    `complete` is each worker's whole assignment once it has applied this round
    (owned - revoked + assigned); the simulator and tests use it directly.
    """

    assignments: Mapping[str, ConnectAssignment]
    sets: AssignmentSets
    delay_ms: int
    memory: AssignorMemory
    complete: Mapping[str, ConnectorsAndTasks] = field(default_factory=dict)


class ConnectAssignor(Protocol):
    name: str

    def assign(
        self,
        *,
        leader: str,
        leader_url: str,
        generation: int,
        members: Mapping[str, WorkerMetadata],
        configured: Mapping[str, int],
        config_offset: int,
        now_ms: int,
        memory: AssignorMemory | None,
        last_completed_generation: int | None = None,
    ) -> ConnectAssignResult: ...


@dataclass(frozen=True)
class ExponentialBackoff:
    """Kafka's ExponentialBackoff without jitter (the assignor uses jitter 0)."""

    initial_interval: int
    multiplier: int
    max_interval: int

    def backoff(self, attempts: int) -> int:
        initial = min(self.max_interval, self.initial_interval)
        if self.max_interval <= initial:
            return initial
        exp_max = math.log(self.max_interval / max(initial, 1)) / math.log(self.multiplier)
        term = initial * self.multiplier ** min(attempts, exp_max)
        return min(int(term), self.max_interval)


def _config_mismatch(
    protocol_version: int,
    leader: str,
    leader_url: str,
    members: Mapping[str, WorkerMetadata],
    config_offset: int,
) -> dict[str, ConnectAssignment] | None:
    """Kafka refuses to assign when the leader's config is behind a member's."""
    max_offset = max((m.config_offset for m in members.values()), default=config_offset)
    if config_offset >= max_offset:
        return None
    return {
        member: ConnectAssignment(
            leader, leader_url, max_offset, error=CONFIG_MISMATCH, version=protocol_version
        )
        for member in members
    }


def _unchanged(members: Mapping[str, WorkerMetadata]) -> dict[str, ConnectorsAndTasks]:
    """After a refused round every worker keeps running what it ran."""
    return {w: m.owned for w, m in members.items()}


class EagerAssignor:
    """The "default" protocol: stop the world and deal everything out again.

    Round-robin over the sorted workers, all connectors first, then all tasks,
    continuing the same circular order (so one-task connectors do not pile their
    tasks onto the odd workers).
    """

    name = "default"
    version = 0

    def assign(
        self,
        *,
        leader: str,
        leader_url: str,
        generation: int,
        members: Mapping[str, WorkerMetadata],
        configured: Mapping[str, int],
        config_offset: int,
        now_ms: int,
        memory: AssignorMemory | None,
        last_completed_generation: int | None = None,
    ) -> ConnectAssignResult:
        memory = memory or AssignorMemory()
        mismatch = _config_mismatch(self.version, leader, leader_url, members, config_offset)
        if mismatch is not None:
            return ConnectAssignResult(mismatch, AssignmentSets(), 0, memory, _unchanged(members))
        workers = sorted(members)
        connectors: dict[str, list[str]] = {w: [] for w in workers}
        tasks: dict[str, list[TaskId]] = {w: [] for w in workers}
        position = 0
        names = sorted(configured)
        for name in names:
            connectors[workers[position % len(workers)]].append(name)
            position += 1
        for name in names:
            for task in task_ids(name, configured[name]):
                tasks[workers[position % len(workers)]].append(task)
                position += 1
        complete = {
            w: ConnectorsAndTasks(frozenset(connectors[w]), frozenset(tasks[w])) for w in workers
        }
        assignments = {
            w: ConnectAssignment(
                leader, leader_url, config_offset, assigned=complete[w], version=self.version
            )
            for w in workers
        }
        everything = configured_work(configured)
        active = union_all(m.owned for m in members.values())
        sets = AssignmentSets(
            configured=everything,
            active=active,
            new=everything - active,
            assigned=everything,
        )
        # Eager keeps no memory beyond who was in the group.
        memory = AssignorMemory(previous_generation=generation, previous_members=frozenset(members))
        return ConnectAssignResult(assignments, sets, 0, memory, complete)


@dataclass
class _Load:
    """A worker's mutable working assignment during one round (Kafka's WorkerLoad)."""

    worker: str
    connectors: set[str]
    tasks: set[TaskId]

    def is_empty(self) -> bool:
        return not self.connectors and not self.tasks


class IncrementalCooperativeAssignor:
    """The "compatible" and "sessioned" protocols (KIP-415).

    Workers keep running what they own; the leader revokes only what must move
    (deleted, duplicated, and load above the balanced share), and hands the
    revoked work out in the follow-up round. Work that vanished with a departed
    worker is held back for up to `scheduled_rebalance_max_delay_ms` in case the
    worker returns.
    """

    def __init__(
        self,
        name: str = "sessioned",
        *,
        scheduled_rebalance_max_delay_ms: int = DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS,
    ) -> None:
        if name not in ("compatible", "sessioned"):
            raise ConfigError(
                f"incremental cooperative protocol must be compatible or sessioned, not {name!r}",
                key="protocol",
            )
        if scheduled_rebalance_max_delay_ms < 0:
            raise ConfigError(
                "scheduled.rebalance.max.delay.ms must not be negative",
                key="scheduled_rebalance_max_delay_ms",
            )
        self.name = name
        self.version = PROTOCOL_VERSIONS[name]
        self.max_delay_ms = scheduled_rebalance_max_delay_ms
        # KAFKA-12495: initial 1 ms (0 when delays are disabled), x40 per attempt.
        self.backoff = ExponentialBackoff(
            0 if scheduled_rebalance_max_delay_ms == 0 else 1, 40, scheduled_rebalance_max_delay_ms
        )

    def assign(
        self,
        *,
        leader: str,
        leader_url: str,
        generation: int,
        members: Mapping[str, WorkerMetadata],
        configured: Mapping[str, int],
        config_offset: int,
        now_ms: int,
        memory: AssignorMemory | None,
        last_completed_generation: int | None = None,
    ) -> ConnectAssignResult:
        """One leader round.

        `last_completed_generation` is the last generation whose SyncGroup the leader
        completed; by default the one just before `generation`. A simulator that
        models a lost SyncGroup passes the older value to exercise KAFKA-9848.
        """
        memory = memory or AssignorMemory()
        mismatch = _config_mismatch(self.version, leader, leader_url, members, config_offset)
        if mismatch is not None:
            return ConnectAssignResult(mismatch, AssignmentSets(), 0, memory, _unchanged(members))
        if last_completed_generation is None:
            last_completed_generation = generation - 1
        owned = {w: members[w].owned for w in sorted(members)}
        round_ = _Round(self, memory, now_ms)
        return round_.run(
            leader=leader,
            leader_url=leader_url,
            generation=generation,
            last_completed_generation=last_completed_generation,
            owned=owned,
            configured=configured_work(configured),
            config_offset=config_offset,
        )


class _Round:
    """The working state of one incremental cooperative round.

    Mirrors the fields Kafka's assignor mutates, starting from the memory value and
    turned back into a new memory value at the end.
    """

    def __init__(
        self, assignor: IncrementalCooperativeAssignor, memory: AssignorMemory, now_ms: int
    ):
        self.assignor = assignor
        self.max_delay = assignor.max_delay_ms
        self.now = now_ms
        self.previous_assignment = memory.previous_assignment
        self.previous_revocation = memory.previous_revocation
        self.previous_generation = memory.previous_generation
        self.previous_members = memory.previous_members
        self.revoked_in_previous = memory.revoked_in_previous
        self.candidates: list[str] = list(memory.candidate_workers)
        self.scheduled: int | None = memory.scheduled_rebalance_ms
        self.delay = memory.delay_ms
        self.successive = memory.successive_revoking_rebalances

    def run(
        self,
        *,
        leader: str,
        leader_url: str,
        generation: int,
        last_completed_generation: int,
        owned: dict[str, ConnectorsAndTasks],
        configured: ConnectorsAndTasks,
        config_offset: int,
    ) -> ConnectAssignResult:
        active = union_all(owned.values())
        if self.previous_generation != last_completed_generation:
            # The last assignment this leader computed never reached the group (or
            # the memory is stale): trust only what the members say they run.
            # Kafka empties its view here instead; starting from `active` gives the
            # same lost (none) and new sets, and revokes deleted work a round sooner.
            self.previous_assignment = active
        if not self.previous_revocation.is_empty:
            if not self.previous_revocation.isdisjoint(active):
                # A revocation did not take effect; start over from what runs.
                self.previous_assignment = active
            self.previous_revocation = EMPTY
        previous = self.previous_assignment

        deleted = previous - configured
        duplicated = _duplicated(owned.values())
        lost = previous.difference(active, deleted)
        new = configured.difference(previous, active)

        to_revoke: dict[str, ConnectorsAndTasks] = {}
        for worker, work in owned.items():
            doomed = work & deleted
            doubled = work & duplicated
            if not doomed.is_empty or not doubled.is_empty:
                to_revoke[worker] = doomed | doubled

        loads = {
            w: _Load(
                w,
                set(work.connectors - to_revoke.get(w, EMPTY).connectors),
                set(work.tasks - to_revoke.get(w, EMPTY).tasks),
            )
            for w, work in owned.items()
        }

        lost_to_reassign = self._handle_lost(lost, loads)

        revoked_for_balance = unplaced = EMPTY
        if self.delay == 0:
            balance = _load_balancing_revocations(configured, list(loads.values()), owned)
            if self.revoked_in_previous and balance:
                self.successive += 1
                self.delay = self.assignor.backoff.backoff(self.successive)
                if self.delay != 0:
                    self.scheduled = self.now + self.delay
                else:
                    revoked_for_balance, unplaced = _apply_revocations(
                        balance, to_revoke, loads, owned
                    )
            elif balance:
                revoked_for_balance, unplaced = _apply_revocations(balance, to_revoke, loads, owned)
                self.revoked_in_previous = True
            elif self.revoked_in_previous:
                # Converged: the next revocation is not a successive one.
                self.revoked_in_previous = False
                self.successive = 0
        else:
            self.revoked_in_previous = False

        to_assign = new.union(lost_to_reassign, unplaced)
        ordered = list(loads.values())
        _spread(ordered, sorted(to_assign.connectors), "connectors")
        _spread(ordered, sorted_tasks(to_assign.tasks), "tasks")

        complete: dict[str, ConnectorsAndTasks] = {}
        assignments: dict[str, ConnectAssignment] = {}
        all_revoked: list[ConnectorsAndTasks] = []
        all_assigned: list[ConnectorsAndTasks] = []
        for worker, work in owned.items():
            load = loads[worker]
            after = ConnectorsAndTasks(frozenset(load.connectors), frozenset(load.tasks))
            revoked = to_revoke.get(worker, EMPTY)
            # Anything not owned before (after removing deleted work) is new to the worker.
            assigned = after - (work - deleted)
            complete[worker] = after
            all_revoked.append(revoked)
            all_assigned.append(assigned)
            assignments[worker] = ConnectAssignment(
                leader,
                leader_url,
                config_offset,
                assigned=assigned,
                revoked=revoked,
                delay_ms=self.delay,
                version=self.assignor.version,
            )

        revoked_total = union_all(all_revoked)
        next_previous = union_all(complete.values()) - revoked_total | lost
        self.previous_revocation = revoked_total

        sets = AssignmentSets(
            configured=configured,
            previous=previous,
            active=active,
            deleted=deleted,
            lost=lost,
            new=new,
            duplicated=duplicated,
            lost_reassigned=lost_to_reassign | _assigned_lost(lost, all_assigned),
            revoked_for_balance=revoked_for_balance,
            revoked=revoked_total,
            assigned=union_all(all_assigned),
        )
        memory = AssignorMemory(
            previous_assignment=next_previous,
            previous_revocation=self.previous_revocation,
            previous_generation=generation,
            previous_members=frozenset(owned),
            revoked_in_previous=self.revoked_in_previous,
            candidate_workers=tuple(self.candidates),
            scheduled_rebalance_ms=self.scheduled,
            delay_ms=self.delay,
            successive_revoking_rebalances=self.successive,
        )
        return ConnectAssignResult(assignments, sets, self.delay, memory, complete)

    def _reset_delay(self) -> None:
        self.candidates = []
        self.scheduled = None
        self.delay = 0

    def _handle_lost(self, lost: ConnectorsAndTasks, loads: dict[str, _Load]) -> ConnectorsAndTasks:
        """Decide what happens to lost work; returns the part to hand out as if new.

        May also place lost work straight onto candidate workers (those that joined
        empty while the delay ran), which is why it takes the loads.
        """
        if lost.is_empty and not self.revoked_in_previous:
            self._reset_delay()
            return EMPTY
        if self.scheduled is None and self.previous_members <= loads.keys():
            # KAFKA-9848: nobody left; the work went missing because an assignment
            # was not delivered, so waiting for a returning worker is pointless.
            return lost
        if self.max_delay == 0:
            # KAFKA-15693: delays disabled means reassign lost work at once.
            return lost
        if self.scheduled is not None and self.now >= self.scheduled:
            # The delay is over: lost work goes to the workers that joined during it
            # (KAFKA-10413: all of them, round-robin), or is treated as new.
            reassign = EMPTY
            picked = [loads[w] for w in self.candidates if w in loads]
            if picked:
                for i, connector in enumerate(sorted(lost.connectors)):
                    picked[i % len(picked)].connectors.add(connector)
                for i, task in enumerate(sorted_tasks(lost.tasks)):
                    picked[i % len(picked)].tasks.add(task)
            else:
                reassign = lost
            self._reset_delay()
            self.revoked_in_previous = False
            return reassign
        for worker in sorted(loads):
            if loads[worker].is_empty() and worker not in self.candidates:
                self.candidates.append(worker)
        if self.scheduled is not None and self.now < self.scheduled:
            self.delay = min(self.scheduled - self.now, self.max_delay)
        else:
            self.delay = self.max_delay
        self.scheduled = self.now + self.delay
        return EMPTY


def _assigned_lost(
    lost: ConnectorsAndTasks, assigned: list[ConnectorsAndTasks]
) -> ConnectorsAndTasks:
    """Lost work that went straight to candidate workers this round."""
    if lost.is_empty:
        return EMPTY
    return union_all(assigned) & lost


def _duplicated(owned: Iterable[ConnectorsAndTasks]) -> ConnectorsAndTasks:
    seen_c: set[str] = set()
    seen_t: set[TaskId] = set()
    dup_c: set[str] = set()
    dup_t: set[TaskId] = set()
    for work in owned:
        dup_c |= seen_c & work.connectors
        dup_t |= seen_t & work.tasks
        seen_c |= work.connectors
        seen_t |= work.tasks
    return ConnectorsAndTasks(frozenset(dup_c), frozenset(dup_t))


def _apply_revocations(
    balance: dict[str, ConnectorsAndTasks],
    to_revoke: dict[str, ConnectorsAndTasks],
    loads: dict[str, _Load],
    owned: Mapping[str, ConnectorsAndTasks],
) -> tuple[ConnectorsAndTasks, ConnectorsAndTasks]:
    """Take load-balancing revocations out of the loads.

    Returns (revoked, unplaced). Work that was only placed on a worker in this very
    round (lost work given to a candidate) is not revoked from it, since it never
    ran there; it goes back to the pool and is handed out in this round instead.
    """
    revoked: list[ConnectorsAndTasks] = []
    unplaced: list[ConnectorsAndTasks] = []
    for worker, work in balance.items():
        really = work & owned[worker]
        to_revoke[worker] = to_revoke.get(worker, EMPTY) | really
        loads[worker].connectors -= work.connectors
        loads[worker].tasks -= work.tasks
        revoked.append(really)
        unplaced.append(work - really)
    return union_all(revoked), union_all(unplaced)


def _load_balancing_revocations(
    configured: ConnectorsAndTasks,
    loads: list[_Load],
    owned: Mapping[str, ConnectorsAndTasks],
) -> dict[str, ConnectorsAndTasks]:
    """What to take from each worker so nobody runs more than its balanced share.

    Shares are floor(total / workers), with (total % workers) workers allowed one
    extra; over-loaded workers keep an extra first, in worker-name order.
    """
    if all(load.is_empty() for load in loads) or configured.is_empty:
        return {}
    connectors = _revocations(len(configured.connectors), loads, "connectors", owned)
    tasks = _revocations(len(configured.tasks), loads, "tasks", owned)
    result: dict[str, ConnectorsAndTasks] = {}
    for worker in sorted(connectors.keys() | tasks.keys()):
        result[worker] = ConnectorsAndTasks(
            frozenset(connectors.get(worker, ())), frozenset(tasks.get(worker, ()))
        )
    return result


def _revocations(
    total: int, loads: list[_Load], kind: str, owned: Mapping[str, ConnectorsAndTasks]
) -> dict[str, list[Any]]:  # connector names or TaskIds, as `kind` says
    """Kafka's loadBalancingRevocations for one kind of work.

    A worker gives up what it already ran (in sorted order) before anything placed
    on it this round, as Kafka's insertion-ordered WorkerLoad does.
    """
    workers = len(loads)
    floor = total // workers
    extras = total % workers
    sizes = [len(getattr(load, kind)) for load in loads]
    at_floor = sum(1 for s in sizes if s == floor)
    at_ceil = sum(1 for s in sizes if s == floor + 1)
    if at_ceil == extras and at_floor + at_ceil == workers:
        return {}
    result: dict[str, list[Any]] = {}
    allocated_extras = 0
    for load in sorted(loads, key=attrgetter("worker")):
        items = getattr(load, kind)
        size = len(items)
        if size <= floor:
            continue
        if allocated_extras < extras:
            allocated_extras += 1
            if size == floor + 1:
                continue
            cap = floor + 1
        else:
            cap = floor
        before = getattr(owned[load.worker], kind)
        order = sorted_tasks if kind == "tasks" else sorted
        ordered = order(items & before) + order(items - before)
        result[load.worker] = ordered[: size - cap]
    return result


def _spread(loads: list[_Load], items: list[str] | list[TaskId], kind: str) -> None:
    """Fill the least-loaded workers first, levelling them up round by round.

    Kafka's assignConnectors/assignTasks: sort by load (then name), hand one item to
    each worker tied with the least loaded, and repeat; the sorted order survives
    because the prefix only ever rises to the next worker's level.
    """
    if not items or not loads:
        return
    loads.sort(key=lambda load: (len(getattr(load, kind)), load.worker))
    sets = [getattr(load, kind) for load in loads]
    n = len(items)
    position = 0
    while position < n:
        first = len(sets[0])
        up_to = 1
        while up_to < len(sets) and len(sets[up_to]) <= first:
            up_to += 1
        for target in sets[:up_to]:
            target.add(items[position])
            position += 1
            if position == n:
                break


_ASSIGNORS = {"eager", "default", "compatible", "sessioned"}


def connect_assignor(
    protocol: str,
    *,
    scheduled_rebalance_max_delay_ms: int = DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS,
) -> ConnectAssignor:
    """The assignor behind a Connect protocol name: eager/default, compatible, sessioned."""
    if protocol in ("eager", "default"):
        return EagerAssignor()
    if protocol in ("compatible", "sessioned"):
        return IncrementalCooperativeAssignor(
            protocol, scheduled_rebalance_max_delay_ms=scheduled_rebalance_max_delay_ms
        )
    raise ConfigError(
        f"unknown connect protocol {protocol!r}; known: {', '.join(sorted(_ASSIGNORS))}",
        key="protocol",
    )
