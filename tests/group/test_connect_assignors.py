"""Stories for Kafka Connect's assignors, ported from Kafka's own test suites.

IncrementalCooperativeAssignorTest, WorkerCoordinatorTest (eager assignment) and
the worked examples of Kafka Connect's rebalancing write-ups are replayed against the pure assignors: a small
in-test cluster keeps what every worker runs, applies each round's assigned and
revoked sets, and checks after every round that nothing is handed out twice.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from kctl.errors import ConfigError
from kctl.group.assignors import (
    CONFIG_MISMATCH,
    EMPTY,
    AssignorMemory,
    ConnectAssignResult,
    ConnectorsAndTasks,
    EagerAssignor,
    IncrementalCooperativeAssignor,
    TaskId,
    WorkerMetadata,
    connect_assignor,
)
from kctl.group.assignors.connect import ExponentialBackoff

DEFAULT_DELAY = 300_000


def work(*items: str) -> ConnectorsAndTasks:
    """Connectors and tasks from names: anything with a task number suffix is a task."""
    connectors = [i for i in items if not i.rpartition("-")[2].isdigit()]
    tasks = [i for i in items if i.rpartition("-")[2].isdigit()]
    return ConnectorsAndTasks.of(connectors, tasks)


class Cluster:
    """Workers, the leader's memory and a fake clock around one assignor."""

    def __init__(self, protocol: str = "sessioned", *, max_delay: int = DEFAULT_DELAY, **connectors: int):
        self.assignor = connect_assignor(protocol, scheduled_rebalance_max_delay_ms=max_delay)
        self.connectors: dict[str, int] = dict(connectors)
        self.owned: dict[str, ConnectorsAndTasks] = {}
        self.memory: AssignorMemory | None = None
        self.generation = 0
        self.now = 0
        self.result: ConnectAssignResult | None = None

    # -- membership and configuration -------------------------------------------------
    def join(self, *workers: str, owning: ConnectorsAndTasks = EMPTY) -> Cluster:
        for worker in workers:
            assert worker not in self.owned, f"{worker} already in the group"
            self.owned[worker] = owning
        return self

    def leave(self, *workers: str) -> Cluster:
        for worker in workers:
            del self.owned[worker]
        return self

    def leader_changes(self) -> Cluster:
        """A new leader starts with an empty memory."""
        self.memory = None
        return self

    def sleep(self, ms: int) -> None:
        self.now += ms

    # -- rounds ---------------------------------------------------------------------
    def rebalance(self, *, delivered: bool = True, last_completed: int | None = None) -> ConnectAssignResult:
        self.generation += 1
        members = {w: WorkerMetadata(url=f"http://{w}", owned=o) for w, o in self.owned.items()}
        leader = next(iter(self.owned))
        result = self.assignor.assign(
            leader=leader,
            leader_url=f"http://{leader}",
            generation=self.generation,
            members=members,
            configured=self.connectors,
            config_offset=0,
            now_ms=self.now,
            memory=self.memory,
            last_completed_generation=last_completed,
        )
        self._check_no_redundant_assignments(result)
        # The leader's memory moves on even if the SyncGroup never reaches anyone.
        self.memory = result.memory
        self.result = result
        if delivered:
            for worker, assignment in result.assignments.items():
                after = (self.owned[worker] - assignment.revoked) | assignment.assigned
                assert after == result.complete[worker] == assignment.apply_to(self.owned[worker])
                self.owned[worker] = after
        return result

    def _check_no_redundant_assignments(self, result: ConnectAssignResult) -> None:
        already = [w for w in self.owned.values()]
        fresh = [a.assigned for a in result.assignments.values()]
        seen = EMPTY
        for assigned in fresh:
            assert assigned.isdisjoint(seen), "the same work assigned to two workers"
            seen = seen | assigned
        for running in already:
            assert running.isdisjoint(seen), "work assigned that is already running somewhere"

    # -- observations -----------------------------------------------------------------
    @property
    def delay(self) -> int:
        assert self.result is not None
        return self.result.delay_ms

    def connector_counts(self) -> list[int]:
        return sorted(len(w.connectors) for w in self.owned.values())

    def task_counts(self) -> list[int]:
        return sorted(len(w.tasks) for w in self.owned.values())

    def revoked_anything(self) -> bool:
        assert self.result is not None
        return any(not a.revoked.is_empty for a in self.result.assignments.values())

    def changed_anything(self) -> bool:
        assert self.result is not None
        return self.revoked_anything() or any(
            not a.assigned.is_empty for a in self.result.assignments.values()
        )

    def assert_balanced_and_complete(self) -> None:
        connectors, tasks = self.connector_counts(), self.task_counts()
        assert connectors[-1] - connectors[0] <= 1, connectors
        assert tasks[-1] - tasks[0] <= 1, tasks
        running = [t for w in self.owned.values() for t in w.tasks]
        assert len(running) == len(set(running)), "a task runs twice"
        expected = {TaskId(c, i) for c, n in self.connectors.items() for i in range(n)}
        assert set(running) == expected
        assert {c for w in self.owned.values() for c in w.connectors} == set(self.connectors)


def two_connectors(**kwargs: int) -> Cluster:
    """Kafka's fixture: connector1 and connector2 with four tasks each, worker1 in the group."""
    cluster = Cluster(**kwargs, connector1=4, connector2=4)  # type: ignore[arg-type]
    return cluster.join("worker1")


# ---------------------------------------------------------------------------------------
# Ids and the set algebra
# ---------------------------------------------------------------------------------------


def test_task_ids_sort_by_connector_then_number_not_by_text():
    ids = [TaskId("ct1", 10), TaskId("ct2", 0), TaskId("ct1", 2)]
    assert [str(t) for t in sorted(ids)] == ["ct1-2", "ct1-10", "ct2-0"]
    assert TaskId.parse("my-connector-12") == TaskId("my-connector", 12)
    with pytest.raises(ConfigError):
        TaskId.parse("no_number")


def test_connectors_and_tasks_algebra_and_json():
    a = work("ct1", "ct1-0", "ct1-1")
    b = work("ct1-1", "ct2")
    assert (a | b) == work("ct1", "ct2", "ct1-0", "ct1-1")
    assert (a - b) == work("ct1", "ct1-0")
    assert (a & b) == work("ct1-1")
    assert EMPTY.is_empty and not a.is_empty and a.size == 3
    assert (a | b).to_json() == {"connectors": ["ct1", "ct2"], "tasks": ["ct1-0", "ct1-1"]}
    assert ConnectorsAndTasks.from_json(a.to_json()) == a


def test_exponential_backoff_matches_kafka_numbers():
    backoff = ExponentialBackoff(1, 40, DEFAULT_DELAY)
    assert [backoff.backoff(n) for n in range(1, 6)] == [40, 1600, 64000, DEFAULT_DELAY, DEFAULT_DELAY]
    assert ExponentialBackoff(0, 40, 0).backoff(3) == 0
    assert ExponentialBackoff(1, 40, 1).backoff(3) == 1


def test_unknown_protocol_is_a_config_error_naming_the_known_ones():
    with pytest.raises(ConfigError, match="sessioned"):
        connect_assignor("cooperative-sticky")
    assert isinstance(connect_assignor("eager"), EagerAssignor)
    assert connect_assignor("default").name == "default"
    assert isinstance(connect_assignor("compatible"), IncrementalCooperativeAssignor)


# ---------------------------------------------------------------------------------------
# Eager (EagerAssignor / WorkerCoordinatorTest)
# ---------------------------------------------------------------------------------------


def eager_round(members: Iterable[str], **connectors: int) -> ConnectAssignResult:
    return EagerAssignor().assign(
        leader="leader",
        leader_url="http://leader",
        generation=1,
        members={m: WorkerMetadata(protocol_version=0) for m in members},
        configured=connectors,
        config_offset=5,
        now_ms=0,
        memory=None,
    )


def test_eager_one_connector_one_task_goes_connector_to_leader_task_to_member():
    # WorkerCoordinatorTest.testLeaderPerformAssignment1
    result = eager_round(["leader", "member"], connector1=1)
    assert result.assignments["leader"].assigned == work("connector1")
    assert result.assignments["member"].assigned == work("connector1-0")
    assert all(a.leader == "leader" and a.config_offset == 5 for a in result.assignments.values())


def test_eager_tasks_continue_the_circle_after_connectors():
    # WorkerCoordinatorTest.testLeaderPerformAssignment2: 2 connectors, 3 tasks
    result = eager_round(["leader", "member"], connector1=2, connector2=1)
    assert result.assignments["leader"].assigned == work("connector1", "connector1-0", "connector2-0")
    assert result.assignments["member"].assigned == work("connector2", "connector1-1")


def test_eager_single_task_connectors_spread_evenly():
    # WorkerCoordinatorTest.testLeaderPerformAssignmentSingleTaskConnectors
    result = eager_round(["leader", "member"], connector1=1, connector2=1, connector3=1)
    assert result.assignments["leader"].assigned == work("connector1", "connector3", "connector2-0")
    assert result.assignments["member"].assigned == work("connector2", "connector1-0", "connector3-0")


def test_seed_000_eager_walkthrough_c3_joins_and_everything_is_dealt_again():
    # The classic walkthrough: ct1 and ct2 with three tasks between them, c1 and c2 running, c3 joins.
    # (The seed's split {c1: ct1,t1,t2} {c2: ct2,t3} is illustrative; Kafka deals
    # connectors first and continues the same circle for tasks.)
    before = eager_round(["c1", "c2"], ct1=2, ct2=1)
    assert before.complete == {"c1": work("ct1", "ct1-0", "ct2-0"), "c2": work("ct2", "ct1-1")}
    after = eager_round(["c2", "c3", "c1"], ct1=2, ct2=1)
    assert after.complete == {
        "c1": work("ct1", "ct1-1"),
        "c2": work("ct2", "ct2-0"),
        "c3": work("ct1-0"),
    }
    # Eager: every assignment is whole, nothing is revoked in the response (the
    # workers already stopped everything before rejoining).
    for member, assignment in after.assignments.items():
        assert assignment.assigned == after.complete[member]
        assert assignment.revoked.is_empty
        assert assignment.version == 0


def test_eager_config_mismatch_when_leader_is_behind():
    result = EagerAssignor().assign(
        leader="w1",
        leader_url="",
        generation=3,
        members={"w1": WorkerMetadata(config_offset=4), "w2": WorkerMetadata(config_offset=9)},
        configured={"ct1": 1},
        config_offset=4,
        now_ms=0,
        memory=None,
    )
    assert {a.error for a in result.assignments.values()} == {CONFIG_MISMATCH}
    assert all(a.assigned.is_empty for a in result.assignments.values())
    assert all(a.config_offset == 9 for a in result.assignments.values())


# ---------------------------------------------------------------------------------------
# Incremental cooperative: the classic walkthrough
# ---------------------------------------------------------------------------------------


def test_seed_000_cooperative_walkthrough_revokes_one_task_then_gives_it_to_c3():
    cluster = Cluster(ct1=2, ct2=1)
    cluster.join("c1", owning=work("ct1", "ct1-0", "ct1-1")).join("c2", owning=work("ct2", "ct2-0"))
    cluster.rebalance()  # the group settles as it is: balanced enough for two workers
    assert not cluster.changed_anything()

    cluster.join("c3")
    first = cluster.rebalance()
    # c1 runs two tasks where the balanced share is one: exactly one is revoked,
    # nobody stops a connector, and nothing is assigned yet.
    assert first.assignments["c1"].revoked == work("ct1-0")
    assert first.assignments["c2"].revoked.is_empty
    assert all(a.assigned.is_empty for a in first.assignments.values())
    assert first.sets.revoked_for_balance == work("ct1-0")

    second = cluster.rebalance()  # the follow-up round after the revocation
    assert second.assignments["c3"].assigned == work("ct1-0")
    assert second.sets.new == work("ct1-0")
    assert not cluster.revoked_anything()
    cluster.assert_balanced_and_complete()


# ---------------------------------------------------------------------------------------
# IncrementalCooperativeAssignorTest, scenario by scenario
# ---------------------------------------------------------------------------------------


def test_task_assignment_when_worker_joins():
    cluster = two_connectors()
    cluster.rebalance()
    assert cluster.delay == 0
    assert cluster.connector_counts() == [2] and cluster.task_counts() == [8]
    cluster.assert_balanced_and_complete()

    cluster.join("worker2")
    cluster.rebalance()
    assert cluster.delay == 0
    assert cluster.connector_counts() == [0, 1] and cluster.task_counts() == [0, 4]

    cluster.rebalance()
    assert not cluster.revoked_anything() and cluster.delay == 0
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]
    cluster.assert_balanced_and_complete()

    cluster.rebalance()
    assert cluster.delay == 0 and not cluster.changed_anything()


def test_kafka_12495_successive_revocations_are_spaced_by_exponential_backoff():
    # IncrementalCooperativeAssignorTest.testAssignmentsWhenWorkersJoinAfterRevocations
    cluster = two_connectors(connector3=4)
    cluster.rebalance()
    assert cluster.connector_counts() == [3] and cluster.task_counts() == [12]

    cluster.join("worker2")
    cluster.rebalance()  # revokes
    assert cluster.connector_counts() == [0, 2] and cluster.task_counts() == [0, 6]

    # A third worker right after a revoking round: no revocation, a delay instead,
    # but the work revoked last round is still handed out.
    cluster.join("worker3")
    cluster.rebalance()
    assert cluster.delay == 40
    assert not cluster.revoked_anything()
    assert cluster.connector_counts() == [0, 1, 2] and cluster.task_counts() == [3, 3, 6]

    cluster.sleep(cluster.delay)
    cluster.join("worker4")
    cluster.rebalance()  # the delay has passed: revoke again
    assert cluster.connector_counts() == [0, 0, 1, 1] and cluster.task_counts() == [0, 3, 3, 3]

    cluster.join("worker5")
    cluster.rebalance()  # successive again: the backoff grows
    assert cluster.delay == 1600
    assert cluster.connector_counts() == [0, 0, 1, 1, 1] and cluster.task_counts() == [1, 2, 3, 3, 3]

    cluster.sleep(cluster.delay)
    cluster.join("worker6")
    cluster.rebalance()
    assert cluster.delay == 0
    assert cluster.connector_counts() == [0, 0, 0, 1, 1, 1]
    assert cluster.task_counts() == [0, 1, 2, 2, 2, 2]

    cluster.rebalance()
    assert cluster.task_counts() == [2] * 6
    cluster.assert_balanced_and_complete()


def test_immediate_revocations_when_max_delay_is_0():
    cluster = two_connectors(max_delay=0, connector3=4)
    cluster.rebalance()
    cluster.join("worker2")
    cluster.rebalance()
    assert cluster.task_counts() == [0, 6]

    cluster.join("worker3")
    cluster.rebalance()  # successive, but a zero max delay means no backoff
    assert cluster.delay == 0
    assert cluster.connector_counts() == [0, 1, 1] and cluster.task_counts() == [3, 3, 4]

    cluster.rebalance()
    assert not cluster.revoked_anything()
    assert cluster.connector_counts() == [1, 1, 1] and cluster.task_counts() == [4, 4, 4]
    cluster.assert_balanced_and_complete()


def test_successive_revocations_when_max_delay_equals_backoff_initial_interval():
    cluster = two_connectors(max_delay=1, connector3=4)
    cluster.rebalance()
    cluster.join("worker2")
    cluster.rebalance()
    cluster.join("worker3")
    cluster.rebalance()
    assert cluster.delay == 1
    assert cluster.connector_counts() == [0, 1, 2] and cluster.task_counts() == [3, 3, 6]


def test_worker_joining_during_delayed_rebalance():
    cluster = two_connectors(connector3=4)
    cluster.rebalance()
    cluster.join("worker2")
    cluster.rebalance()
    cluster.join("worker3")
    cluster.rebalance()
    assert cluster.delay > 0 and not cluster.revoked_anything()
    assert cluster.task_counts() == [3, 3, 6]

    cluster.sleep(cluster.delay // 2)
    cluster.join("worker4")
    cluster.rebalance()
    assert cluster.delay > 0 and not cluster.revoked_anything()
    assert cluster.connector_counts() == [0, 0, 1, 2] and cluster.task_counts() == [0, 3, 3, 6]

    cluster.sleep(cluster.delay)
    cluster.join("worker5")
    cluster.rebalance()
    assert cluster.delay == 0
    assert cluster.connector_counts() == [0, 0, 0, 1, 1] and cluster.task_counts() == [0, 0, 2, 3, 3]

    cluster.rebalance()
    assert cluster.delay == 0 and not cluster.revoked_anything()
    assert cluster.connector_counts() == [0, 0, 1, 1, 1] and cluster.task_counts() == [2, 2, 2, 3, 3]
    cluster.assert_balanced_and_complete()


def test_worker_leaves_permanently_lost_work_waits_for_the_delay():
    cluster = two_connectors().join("worker2")
    cluster.rebalance()
    cluster.assert_balanced_and_complete()

    cluster.leave("worker2")
    result = cluster.rebalance()
    assert cluster.delay == DEFAULT_DELAY and not cluster.changed_anything()
    assert result.sets.lost.size == 5  # one connector and its four tasks

    cluster.sleep(DEFAULT_DELAY // 2)
    cluster.rebalance()  # an incidental round: the remaining delay is reported
    assert cluster.delay == DEFAULT_DELAY // 2 and not cluster.changed_anything()

    cluster.sleep(DEFAULT_DELAY // 2 + 1)
    result = cluster.rebalance()
    assert cluster.delay == 0
    assert result.sets.lost_reassigned == result.sets.lost
    assert cluster.connector_counts() == [2] and cluster.task_counts() == [8]
    cluster.assert_balanced_and_complete()


def test_worker_bounces_and_gets_its_work_back_when_the_delay_ends():
    cluster = two_connectors().join("worker2")
    cluster.rebalance()
    lost_work = cluster.owned["worker2"]

    cluster.leave("worker2")
    cluster.rebalance()
    cluster.sleep(DEFAULT_DELAY // 2)
    cluster.rebalance()
    assert cluster.delay == DEFAULT_DELAY // 2

    cluster.sleep(DEFAULT_DELAY // 4)
    cluster.join("worker2")  # back, empty-handed, before the delay is over
    cluster.rebalance()
    assert cluster.delay == DEFAULT_DELAY // 4 and not cluster.changed_anything()
    assert cluster.memory is not None and cluster.memory.candidate_workers == ("worker2",)

    cluster.sleep(DEFAULT_DELAY // 4)
    cluster.rebalance()
    assert cluster.delay == 0 and not cluster.revoked_anything()
    assert cluster.owned["worker2"] == lost_work
    cluster.assert_balanced_and_complete()


def test_leader_leaves_permanently_new_leader_reassigns_at_once():
    cluster = two_connectors().join("worker2", "worker3")
    cluster.rebalance()
    assert cluster.connector_counts() == [0, 1, 1] and cluster.task_counts() == [2, 3, 3]

    cluster.leave("worker1").leader_changes()
    cluster.rebalance()
    assert cluster.delay == 0
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]
    cluster.assert_balanced_and_complete()

    cluster.rebalance()
    assert cluster.delay == 0 and not cluster.changed_anything()


def test_leader_bounces_and_returns_as_a_new_worker():
    cluster = two_connectors().join("worker2", "worker3")
    cluster.rebalance()
    cluster.leave("worker1").leader_changes()
    cluster.rebalance()
    cluster.assert_balanced_and_complete()

    cluster.join("worker1")
    cluster.rebalance()
    assert cluster.delay == 0
    assert cluster.connector_counts() == [0, 1, 1] and cluster.task_counts() == [0, 3, 3]

    cluster.rebalance()
    assert not cluster.revoked_anything()
    assert cluster.connector_counts() == [0, 1, 1] and cluster.task_counts() == [2, 3, 3]
    cluster.assert_balanced_and_complete()


def test_kafka_9848_first_assignment_lost_is_reassigned_without_delay():
    # testTaskAssignmentWhenFirstAssignmentAttemptFails: the leader computed an
    # assignment that never arrived; the same members come back owning nothing.
    cluster = two_connectors().join("worker2")
    cluster.rebalance(delivered=False)
    assert cluster.connector_counts() == [0, 0]

    result = cluster.rebalance()
    assert cluster.delay == 0
    assert result.sets.lost.size == 10  # the leader's memory says it handed these out
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]
    cluster.assert_balanced_and_complete()


def test_kafka_9848_subsequent_assignment_lost_then_backoff_then_balance():
    # testTaskAssignmentWhenSubsequentAssignmentAttemptFails
    cluster = two_connectors().join("worker2")
    cluster.rebalance()
    cluster.join("worker3")
    cluster.rebalance(delivered=False)  # revocations computed but not delivered
    assert cluster.task_counts() == [0, 4, 4]

    cluster.rebalance()
    assert cluster.delay > 0  # a successive revoking rebalance: back off
    assert cluster.task_counts() == [0, 4, 4]

    cluster.sleep(cluster.delay)
    cluster.rebalance()
    assert cluster.delay == 0
    assert cluster.task_counts() == [0, 3, 3]
    cluster.rebalance()
    assert cluster.connector_counts() == [0, 1, 1] and cluster.task_counts() == [2, 3, 3]
    cluster.assert_balanced_and_complete()


def test_kafka_9848_generation_mismatch_clears_the_leaders_view():
    # testTaskAssignmentWhenSubsequentAssignmentAttemptFailsOutsideTheAssignor
    cluster = two_connectors().join("worker2")
    cluster.rebalance()
    cluster.join("worker3")
    cluster.rebalance(delivered=False)
    result = cluster.rebalance(last_completed=cluster.generation - 1)  # one behind
    # The leader's view is rebuilt from what the members run: nothing looks lost.
    assert result.sets.previous == result.sets.active
    assert result.sets.lost.is_empty
    assert cluster.delay > 0
    assert cluster.task_counts() == [0, 4, 4]

    cluster.sleep(cluster.delay)
    cluster.rebalance()
    assert cluster.task_counts() == [0, 3, 3]
    cluster.rebalance()
    assert cluster.connector_counts() == [0, 1, 1] and cluster.task_counts() == [2, 3, 3]
    cluster.assert_balanced_and_complete()


def test_connectors_deleted_are_revoked_and_the_rest_stays_balanced():
    cluster = two_connectors(connector3=4).join("worker2")
    cluster.rebalance()
    assert cluster.connector_counts() == [1, 2] and cluster.task_counts() == [6, 6]

    del cluster.connectors["connector3"]
    result = cluster.rebalance()
    assert cluster.delay == 0
    assert result.sets.deleted == work("connector3", *(f"connector3-{i}" for i in range(4)))
    assert result.sets.revoked == result.sets.deleted
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]
    cluster.assert_balanced_and_complete()


def test_tasks_change_adds_and_deletes_task_ids():
    cluster = Cluster(ct1=3).join("w1", "w2")
    cluster.rebalance()
    cluster.connectors["ct1"] = 1
    result = cluster.rebalance()
    assert result.sets.deleted == work("ct1-1", "ct1-2")
    cluster.connectors["ct1"] = 4
    result = cluster.rebalance()
    assert result.sets.new == work("ct1-1", "ct1-2", "ct1-3")
    cluster.assert_balanced_and_complete()


def test_new_connectors_fill_the_least_loaded_workers_first():
    # testAssignConnectorsWhenImbalanced through the whole assignor: workers run
    # 2, 3, 4 and 0 one-task connectors; 15 new ones level them all to 6.
    names = {f"connector{i}": 1 for i in range(24)}
    cluster = Cluster(**names)

    def load(start: int, count: int) -> ConnectorsAndTasks:
        ids = range(start, start + count)
        return work(*(f"connector{i}" for i in ids), *(f"connector{i}-0" for i in ids))

    cluster.join("worker0", owning=load(0, 2)).join("worker1", owning=load(2, 3))
    cluster.join("worker2", owning=load(5, 4)).join("worker3")
    result = cluster.rebalance()
    assert not cluster.revoked_anything()
    assert result.sets.new.size == 30
    assert cluster.connector_counts() == [6, 6, 6, 6] and cluster.task_counts() == [6, 6, 6, 6]


def test_new_connectors_round_robin_over_equally_loaded_workers():
    # testAssignConnectorsWhenBalanced: 3 workers with 2 each, 5 new connectors
    names = {f"connector{i}": 0 for i in range(11)}
    cluster = Cluster(**names)
    for i in range(3):
        cluster.join(f"worker{i}", owning=work(f"connector{2 * i}", f"connector{2 * i + 1}"))
    result = cluster.rebalance()
    added = {w: a.assigned.connectors for w, a in result.assignments.items()}
    assert added == {
        # names sort as text (10, 6, 7, 8, 9) and go round the tied workers in turn
        "worker0": {"connector10", "connector8"},
        "worker1": {"connector6", "connector9"},
        "worker2": {"connector7"},
    }


def test_lost_work_held_while_worker_bounces_then_goes_back_to_it():
    # testLostAssignmentHandlingWhenWorkerBounces, through whole rounds
    cluster = Cluster(ct0=4, ct1=4, ct2=4).join("worker0", "worker1", "worker2")
    cluster.rebalance()
    flaky = cluster.owned["worker1"]

    cluster.leave("worker1")
    result = cluster.rebalance()
    assert result.sets.lost == flaky and cluster.delay == DEFAULT_DELAY
    assert cluster.memory is not None and cluster.memory.candidate_workers == ()

    cluster.sleep(DEFAULT_DELAY // 2)
    cluster.join("worker1")
    cluster.rebalance()
    assert cluster.memory.candidate_workers == ("worker1",)
    assert cluster.delay == DEFAULT_DELAY // 2

    cluster.sleep(DEFAULT_DELAY // 2)
    cluster.rebalance()
    assert cluster.owned["worker1"] == flaky
    assert cluster.memory.candidate_workers == () and cluster.memory.scheduled_rebalance_ms is None
    assert cluster.delay == 0


def test_kafka_10413_lost_work_is_spread_over_all_workers_that_joined_during_the_delay():
    # testLostAssignmentHandlingWithMoreThanOneCandidates: a new worker and the
    # returning one both join during the delay; both receive lost work.
    cluster = Cluster(ct0=4, ct1=4, ct2=4).join("worker0", "worker1", "worker2")
    cluster.rebalance()
    flaky = cluster.owned["worker1"]

    cluster.leave("worker1").join("worker3")
    cluster.rebalance()
    assert cluster.memory is not None and cluster.memory.candidate_workers == ("worker3",)
    assert cluster.delay == DEFAULT_DELAY

    cluster.sleep(DEFAULT_DELAY // 2)
    cluster.join("worker1")
    cluster.rebalance()
    assert set(cluster.memory.candidate_workers) == {"worker1", "worker3"}

    cluster.sleep(DEFAULT_DELAY // 2)
    result = cluster.rebalance()
    got1 = result.assignments["worker1"].assigned
    got3 = result.assignments["worker3"].assigned
    assert not got1.is_empty and not got3.is_empty
    assert got1 | got3 == flaky
    assert abs(len(got1.tasks) - len(got3.tasks)) <= 1
    assert cluster.memory.candidate_workers == () and cluster.delay == 0


def test_kafka_10413_two_workers_joining_together_both_get_work():
    # The first half of the ticket: with several new workers at once, everything
    # above the balanced share is revoked, so no newcomer stays idle.
    cluster = Cluster(ct1=6, ct2=6).join("w1")
    cluster.rebalance()
    cluster.join("w2", "w3")
    cluster.rebalance()
    cluster.rebalance()
    assert cluster.task_counts() == [4, 4, 4]
    cluster.assert_balanced_and_complete()


def test_lost_work_when_worker_bounces_back_but_finally_leaves():
    cluster = Cluster(ct0=4, ct1=4, ct2=4).join("worker0", "worker1", "worker2")
    cluster.rebalance()
    cluster.leave("worker1")
    cluster.rebalance()
    cluster.sleep(DEFAULT_DELAY // 2)
    cluster.join("worker1")
    cluster.rebalance()
    cluster.sleep(DEFAULT_DELAY // 2)
    cluster.leave("worker1")  # gone again just as the delay expires
    result = cluster.rebalance()
    # No candidate left: the lost work is treated as new and spread out.
    assert result.sets.lost_reassigned == result.sets.lost and not result.sets.lost.is_empty
    assert cluster.delay == 0
    cluster.assert_balanced_and_complete()


def test_kafka_15693_lost_work_reassigned_at_once_when_delay_is_disabled():
    # testScheduledDelayIsDisabled / testLostAssignmentHandlingWhenScheduledDelayIsDisabled
    cluster = two_connectors(max_delay=0).join("worker2")
    cluster.rebalance()
    cluster.leave("worker2")
    result = cluster.rebalance()
    assert cluster.delay == 0
    assert not result.sets.lost.is_empty and result.sets.lost_reassigned == result.sets.lost
    assert cluster.connector_counts() == [2] and cluster.task_counts() == [8]
    cluster.assert_balanced_and_complete()


def test_kafka_15693_with_the_default_delay_the_same_departure_waits():
    # The contrast that makes the previous test meaningful.
    cluster = two_connectors().join("worker2")
    cluster.rebalance()
    cluster.leave("worker2")
    cluster.rebalance()
    assert cluster.delay == DEFAULT_DELAY
    assert cluster.task_counts() == [4]


def test_kafka_9841_duplicated_work_of_a_zombie_is_revoked_everywhere_then_reassigned():
    # testTaskAssignmentWhenTasksDuplicatedInWorkerAssignment
    cluster = two_connectors()
    cluster.rebalance()
    zombie = work("connector1", *(f"connector1-{i}" for i in range(4)))
    cluster.join("worker2", owning=zombie)
    result = cluster.rebalance()
    assert result.sets.duplicated == zombie
    assert result.assignments["worker1"].revoked == zombie
    assert result.assignments["worker2"].revoked == zombie
    assert cluster.delay == 0
    assert cluster.connector_counts() == [0, 1] and cluster.task_counts() == [0, 4]

    cluster.rebalance()
    assert cluster.delay == 0 and not cluster.revoked_anything()
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]
    cluster.assert_balanced_and_complete()

    cluster.rebalance()
    assert not cluster.changed_anything()


def test_kafka_9841_duplicated_work_that_is_also_deleted():
    # testDuplicatedAssignmentHandleWhenTheDuplicatedAssignmentsDeleted
    cluster = two_connectors()
    cluster.rebalance()
    del cluster.connectors["connector1"]
    zombie = work("connector1", *(f"connector1-{i}" for i in range(4)))
    cluster.join("worker2", owning=zombie)
    cluster.rebalance()
    assert cluster.delay == 0
    assert cluster.connector_counts() == [0, 1] and cluster.task_counts() == [0, 2]

    cluster.rebalance()
    assert not cluster.revoked_anything()
    assert cluster.connector_counts() == [0, 1] and cluster.task_counts() == [2, 2]
    cluster.assert_balanced_and_complete()

    cluster.rebalance()
    assert not cluster.changed_anything()


def test_revocation_that_did_not_take_effect_is_reapplied():
    # w1 never applies a revocation and rejoins still running the work: the leader
    # resets its view to what runs, hands none of it out twice, and revokes again.
    cluster = Cluster(ct1=4).join("w1")
    cluster.rebalance()
    cluster.join("w2")
    first = cluster.rebalance(delivered=False)
    assert first.assignments["w1"].revoked == work("ct1-0", "ct1-1")
    second = cluster.rebalance()
    assert second.sets.previous == second.sets.active
    assert second.sets.new.is_empty and second.sets.lost.is_empty
    assert second.assignments["w2"].assigned.is_empty
    assert cluster.delay == 40  # a successive revoking round backs off first

    cluster.sleep(cluster.delay)
    third = cluster.rebalance()
    assert third.assignments["w1"].revoked == first.assignments["w1"].revoked
    cluster.rebalance()
    cluster.assert_balanced_and_complete()


@pytest.mark.parametrize(("protocol", "version"), [("compatible", 1), ("sessioned", 2)])
def test_protocol_version_travels_in_every_assignment(protocol: str, version: int):
    cluster = Cluster(protocol, ct1=2).join("w1", "w2")
    result = cluster.rebalance()
    assert {a.version for a in result.assignments.values()} == {version}
    assert {a.leader for a in result.assignments.values()} == {"w1"}
    assert {a.leader_url for a in result.assignments.values()} == {"http://w1"}


def test_cooperative_config_mismatch_leaves_memory_untouched():
    assignor = IncrementalCooperativeAssignor()
    memory = AssignorMemory(previous_generation=4, delay_ms=7)
    result = assignor.assign(
        leader="w1",
        leader_url="",
        generation=5,
        members={"w1": WorkerMetadata(config_offset=1), "w2": WorkerMetadata(config_offset=2)},
        configured={"ct1": 1},
        config_offset=1,
        now_ms=0,
        memory=memory,
    )
    assert result.memory is memory
    assert {a.error for a in result.assignments.values()} == {CONFIG_MISMATCH}
    assert result.complete == {"w1": EMPTY, "w2": EMPTY}


def test_config_mismatch_keeps_every_worker_running_what_it_ran():
    running = work("ct1", "ct1-0")
    result = IncrementalCooperativeAssignor().assign(
        leader="w1",
        leader_url="",
        generation=2,
        members={"w1": WorkerMetadata(config_offset=3, owned=running), "w2": WorkerMetadata(config_offset=8)},
        configured={"ct1": 2},
        config_offset=3,
        now_ms=0,
        memory=None,
    )
    assert result.complete == {"w1": running, "w2": EMPTY}
    assert all(a.assigned.is_empty and a.revoked.is_empty for a in result.assignments.values())


def test_sets_are_reported_for_explain():
    cluster = Cluster(ct1=2, ct2=1).join("w1", "w2")
    cluster.rebalance()
    cluster.connectors["ct3"] = 1
    del cluster.connectors["ct2"]
    result = cluster.rebalance()
    sets = result.sets.to_json()
    assert sets["new"] == {"connectors": ["ct3"], "tasks": ["ct3-0"]}
    assert sets["deleted"] == {"connectors": ["ct2"], "tasks": ["ct2-0"]}
    assert sets["lost"] == {"connectors": [], "tasks": []}
    assert {"configured", "previous", "active", "duplicated", "revoked_for_balance"} <= sets.keys()


def test_bad_construction_is_a_config_error():
    with pytest.raises(ConfigError):
        IncrementalCooperativeAssignor("eager")
    with pytest.raises(ConfigError):
        IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms=-1)


def test_a_candidate_gives_up_its_own_work_before_lost_work_placed_on_it():
    # Lost work lands on a worker that joined during the delay and has since taken
    # on new work; like Kafka's insertion-ordered WorkerLoad, it sheds what it ran
    # before, never the lost work it has not even started.
    cluster = Cluster(ct1=12).join("w1", "w2", "w3")
    cluster.rebalance()
    cluster.leave("w3")
    cluster.rebalance()
    cluster.join("w4")
    cluster.rebalance()
    cluster.connectors["ct2"] = 12
    cluster.rebalance()
    cluster.sleep(DEFAULT_DELAY)
    before = dict(cluster.owned)
    result = cluster.rebalance()
    for worker, assignment in result.assignments.items():
        assert assignment.revoked.issubset(before[worker])
    assert result.assignments["w4"].assigned == result.sets.lost
    cluster.rebalance()
    cluster.assert_balanced_and_complete()


def test_lost_work_beyond_a_candidates_share_is_spread_in_the_same_round():
    # Two workers vanish and one newcomer is the only candidate: it cannot take all
    # the lost work, and what it cannot take goes to the others at once, unrevoked.
    cluster = Cluster(ct1=12).join("w1", "w2", "w3", "w4")
    cluster.rebalance()
    cluster.leave("w3", "w4")
    cluster.rebalance()
    cluster.join("w5")
    cluster.rebalance()
    cluster.sleep(DEFAULT_DELAY)
    result = cluster.rebalance()
    assert not cluster.revoked_anything()
    assert result.sets.lost_reassigned == result.sets.lost
    assert cluster.task_counts() == [4, 4, 4]
    cluster.assert_balanced_and_complete()


def test_a_new_leader_revokes_work_of_deleted_connectors_it_sees_running():
    # The new leader has no memory; it rebuilds its view from what the members run,
    # so a connector deleted meanwhile is stopped at once instead of a round later.
    cluster = Cluster(ct1=2, ct2=2).join("w1", "w2")
    cluster.rebalance()
    del cluster.connectors["ct2"]
    cluster.leader_changes()
    result = cluster.rebalance()
    assert result.sets.previous == result.sets.active
    assert result.sets.deleted == work("ct2", "ct2-0", "ct2-1")
    assert result.sets.revoked == result.sets.deleted
    assert result.sets.lost.is_empty
    cluster.assert_balanced_and_complete()


def test_eager_assignment_applies_as_a_whole_and_refused_ones_change_nothing():
    running = work("ct1", "ct1-0")
    whole = eager_round(["w1"], ct2=1).assignments["w1"]
    assert whole.apply_to(running) == work("ct2", "ct2-0")
    refused = EagerAssignor().assign(
        leader="w1",
        leader_url="",
        generation=1,
        members={"w1": WorkerMetadata(config_offset=9, owned=running)},
        configured={"ct2": 1},
        config_offset=1,
        now_ms=0,
        memory=None,
    )
    assert refused.assignments["w1"].apply_to(running) == running
