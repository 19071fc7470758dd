"""Properties of the Connect assignors under random histories (hypothesis).

A history is a list of events (workers join, leave, crash, bounce back, return as
zombies still running old work, the leader changes, connectors are added, removed
or resized, a SyncGroup is lost). After each event the group runs rounds the way
workers do: another round whenever something was revoked, and a scheduled round
when the leader asked for a delay. After every single round:

- no connector or task is in two workers' assignments;
- a cooperative round never revokes and assigns the same item;
- nothing newly assigned is already running somewhere.

When the history is over and time has passed (so every delay expired), the group
must be stable with everything configured running and loads differing by at most one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.group.assignors import (
    AssignorMemory,
    ConnectAssignResult,
    ConnectorsAndTasks,
    TaskId,
    WorkerMetadata,
    connect_assignor,
)

WORKERS = [f"w{i}" for i in range(1, 7)]
CONNECTORS = [f"ct{i}" for i in range(1, 6)]
MAX_ROUNDS_TO_SETTLE = 40


@dataclass
class Group:
    protocol: str
    max_delay: int
    configured: dict[str, int]
    owned: dict[str, ConnectorsAndTasks] = field(default_factory=dict)
    ghosts: dict[str, ConnectorsAndTasks] = field(default_factory=dict)  # what departed workers ran
    memory: AssignorMemory | None = None
    generation: int = 0
    last_completed: int = 0
    now: int = 0
    rounds: int = 0

    def __post_init__(self) -> None:
        self.assignor = connect_assignor(self.protocol, scheduled_rebalance_max_delay_ms=self.max_delay)

    @property
    def cooperative(self) -> bool:
        return self.protocol in ("compatible", "sessioned")

    def round(self, *, delivered: bool = True) -> ConnectAssignResult:
        self.generation += 1
        self.rounds += 1
        if not self.cooperative:
            # Eager members stop everything before they rejoin.
            self.owned = {w: ConnectorsAndTasks() for w in self.owned}
        leader = next(iter(self.owned))
        result = self.assignor.assign(
            leader=leader,
            leader_url="",
            generation=self.generation,
            members={w: WorkerMetadata(owned=o) for w, o in self.owned.items()},
            configured=self.configured,
            config_offset=0,
            now_ms=self.now,
            memory=self.memory,
            last_completed_generation=self.last_completed,
        )
        check_round(self, result)
        self.memory = result.memory
        if delivered:
            self.last_completed = self.generation
            self.owned = {w: result.complete[w] for w in self.owned}
        return result

    def settle(self) -> ConnectAssignResult:
        """Rounds until nothing is revoked; a delay only makes the next round wait."""
        result = self.round()
        for _ in range(MAX_ROUNDS_TO_SETTLE):
            if not any(not a.revoked.is_empty for a in result.assignments.values()):
                return result
            result = self.round()
        raise AssertionError("the group kept revoking without settling")

    def leader_leaves(self, worker: str) -> None:
        if worker == next(iter(self.owned)):
            self.memory = None  # the assignor's memory lived on the leader


def check_round(group: Group, result: ConnectAssignResult) -> None:
    complete = result.complete
    assert set(complete) == set(group.owned)
    seen_connectors: set[str] = set()
    seen_tasks: set[TaskId] = set()
    for work in complete.values():
        assert seen_connectors.isdisjoint(work.connectors), "a connector is owned twice"
        assert seen_tasks.isdisjoint(work.tasks), "a task is owned twice"
        seen_connectors |= work.connectors
        seen_tasks |= work.tasks
    if group.cooperative:
        assigned = [a.assigned for a in result.assignments.values()]
        revoked = [a.revoked for a in result.assignments.values()]
        everything_assigned = ConnectorsAndTasks().union(*assigned)
        everything_revoked = ConnectorsAndTasks().union(*revoked)
        assert everything_assigned.isdisjoint(everything_revoked), "revoked and assigned at once"
        running = ConnectorsAndTasks().union(*group.owned.values())
        assert everything_assigned.isdisjoint(running), "assigned work that is still running"
        for worker, assignment in result.assignments.items():
            assert assignment.revoked.issubset(group.owned[worker]), "revoked what it did not own"
    else:
        for worker, assignment in result.assignments.items():
            assert assignment.revoked.is_empty
            assert assignment.assigned == complete[worker]


def check_settled(group: Group) -> None:
    expected_tasks = {TaskId(c, i) for c, n in group.configured.items() for i in range(n)}
    tasks = [t for work in group.owned.values() for t in work.tasks]
    connectors = [c for work in group.owned.values() for c in work.connectors]
    assert sorted(connectors) == sorted(group.configured), "configured connectors not all running"
    assert len(tasks) == len(expected_tasks) and set(tasks) == expected_tasks
    connector_loads = [len(w.connectors) for w in group.owned.values()]
    task_loads = [len(w.tasks) for w in group.owned.values()]
    assert max(connector_loads) - min(connector_loads) <= 1, connector_loads
    assert max(task_loads) - min(task_loads) <= 1, task_loads


event = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(WORKERS)),
    st.tuples(st.just("leave"), st.sampled_from(WORKERS)),
    st.tuples(st.just("crash"), st.sampled_from(WORKERS)),
    st.tuples(st.just("zombie"), st.sampled_from(WORKERS)),
    st.tuples(st.just("partition"), st.sampled_from(WORKERS)),
    st.tuples(st.just("connector_add"), st.sampled_from(CONNECTORS), st.integers(0, 6)),
    st.tuples(st.just("connector_remove"), st.sampled_from(CONNECTORS)),
    st.tuples(st.just("tasks_change"), st.sampled_from(CONNECTORS), st.integers(0, 6)),
    st.tuples(st.just("sync_lost"), st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from([0, 40, 1600, 150_000, 300_000])),
)


def apply_event(group: Group, ev: tuple) -> None:
    kind = ev[0]
    if kind == "join" and ev[1] not in group.owned:
        group.ghosts.pop(ev[1], None)
        group.owned[ev[1]] = ConnectorsAndTasks()
    elif kind == "zombie" and ev[1] not in group.owned and ev[1] in group.ghosts:
        # Back after a partition, never having stopped its old work (KAFKA-9841).
        group.owned[ev[1]] = group.ghosts.pop(ev[1]) if group.cooperative else ConnectorsAndTasks()
    elif kind in ("leave", "crash") and ev[1] in group.owned and len(group.owned) > 1:
        group.leader_leaves(ev[1])
        group.ghosts[ev[1]] = group.owned.pop(ev[1])
        if kind == "crash":
            group.now += 10_000  # noticed only after the session timeout
    elif kind == "partition" and ev[1] in group.owned and len(group.owned) > 1:
        # Cut off long enough for its work to move elsewhere, then back as a
        # zombie that never stopped that work (KAFKA-9841).
        group.leader_leaves(ev[1])
        stale = group.owned.pop(ev[1])
        group.settle()
        group.now += group.max_delay + 1
        group.settle()
        group.owned[ev[1]] = stale if group.cooperative else ConnectorsAndTasks()
    elif kind == "connector_add" and ev[1] not in group.configured:
        group.configured[ev[1]] = ev[2]
    elif kind == "connector_remove" and ev[1] in group.configured:
        del group.configured[ev[1]]
    elif kind == "tasks_change" and ev[1] in group.configured:
        group.configured[ev[1]] = ev[2]
    elif kind == "sync_lost":
        # The leader computes a round nobody applies; with ev[1] the leader's own
        # SyncGroup failed too, so its next round sees a generation mismatch.
        group.round(delivered=False)
        if not ev[1]:
            group.last_completed = group.generation
        return
    elif kind == "advance":
        group.now += ev[1]
        return
    else:
        return
    group.settle()


def run_history(protocol: str, max_delay: int, initial: list[str], connectors: dict, events: list) -> Group:
    group = Group(protocol, max_delay, dict(connectors))
    for worker in initial:
        group.owned[worker] = ConnectorsAndTasks()
    group.settle()
    for ev in events:
        apply_event(group, ev)
    # Let every delay expire and the group converge.
    for _ in range(MAX_ROUNDS_TO_SETTLE):
        group.now += max_delay + 1
        result = group.settle()
        if result.delay_ms == 0 and all(a.assigned.is_empty for a in result.assignments.values()):
            break
    check_settled(group)
    return group


histories = dict(
    initial=st.lists(st.sampled_from(WORKERS), min_size=1, max_size=4, unique=True),
    connectors=st.dictionaries(st.sampled_from(CONNECTORS), st.integers(0, 6), max_size=4),
    events=st.lists(event, max_size=12),
)


@settings(max_examples=150, deadline=None)
@given(
    protocol=st.sampled_from(["compatible", "sessioned"]),
    max_delay=st.sampled_from([0, 1, 300_000]),
    **histories,
)
def test_cooperative_histories_keep_invariants_and_converge(
    protocol, max_delay, initial, connectors, events
):
    run_history(protocol, max_delay, initial, connectors, events)


@settings(max_examples=60, deadline=None)
@given(**histories)
def test_eager_histories_keep_invariants_and_converge(initial, connectors, events):
    run_history("eager", 300_000, initial, connectors, events)


@settings(max_examples=60, deadline=None)
@given(
    workers=st.integers(1, 12),
    connectors=st.dictionaries(st.text("abc", min_size=1, max_size=3), st.integers(0, 8), max_size=8),
)
def test_eager_deals_everything_with_loads_within_one(workers, connectors):
    group = Group("eager", 300_000, dict(connectors))
    for i in range(workers):
        group.owned[f"w{i:02d}"] = ConnectorsAndTasks()
    group.round()
    check_settled(group)
    totals = [w.size for w in group.owned.values()]
    assert max(totals) - min(totals) <= 1
