"""Real DistributedHerders in one process, on kctl's own group coordinator: no broker, no
Spark. The group's clock moves only when a story says so, so sessions expire and
scheduled delays run out exactly when the story lets time pass.

The workers share one set of memory stores (what reading one config topic gives them) and
one embedded log; the connectors are pure Python and write nothing.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
from support import reconfig_connectors as rc
from support.in_process_group import InProcessGroup, InProcessGroupDriver
from support.waiting import wait_until

from kctl.errors import ConflictError, RequestTargetError
from kctl.rebalance.scenario import Scenario
from kctl.rebalance.simulator import simulate
from kctl.rest.app import create_app
from kctl.rest.internal import (
    SIGNATURE_ALGORITHM,
    SIGNATURE_ALGORITHM_HEADER,
    SIGNATURE_HEADER,
    InterWorkerClient,
    sign,
)
from kctl.rest.server import RestServer
from kctl.runtime.distributed import DistributedHerder, TaskConfigSender
from kctl.runtime.plugins import Plugins
from kctl.runtime.worker import Worker
from kctl.runtime.worker_config import WorkerConfig
from kctl.states import State, TaskId
from kctl.storage.configs import MemoryConfigBackingStore, SessionKey
from kctl.storage.offsets import MemoryOffsetBackingStore
from kctl.storage.status import MemoryStatusBackingStore
from kctl.transport.embedded import EmbeddedTransport

SHARDED = "support.reconfig_connectors.ShardedSourceConnector"
SESSION_MS = 10_000
HEARTBEAT_MS = 3_000
_names = itertools.count()


class NoSpark:
    def spark(self):
        raise AssertionError("these connectors do not use Spark")

    def stop(self):
        pass


class Cluster:
    """Workers of one group, started and stopped (or crashed) one by one."""

    def __init__(self, tmp_path, *, delay_ms: int = 0, request_timeout_s: float = 10.0,
                 rest: bool = False):
        self.group = InProcessGroup()
        self.configs = MemoryConfigBackingStore()
        self.statuses = MemoryStatusBackingStore()
        self.offsets = MemoryOffsetBackingStore()
        self.transport = EmbeddedTransport(tmp_path / "log")
        self.settings = {"state.dir": str(tmp_path / "state"),
                         "session.timeout.ms": SESSION_MS,
                         "heartbeat.interval.ms": HEARTBEAT_MS,
                         "scheduled.rebalance.max.delay.ms": delay_ms}
        self.request_timeout_s = request_timeout_s
        self.rest = rest
        self.herders: dict[str, DistributedHerder] = {}
        self.drivers: dict[str, InProcessGroupDriver] = {}
        self.servers: dict[str, RestServer] = {}

    def start(self, name: str) -> DistributedHerder:
        """A worker joins; returns once the group has settled with it."""
        server = RestServer(None, "127.0.0.1", 0) if self.rest else None
        url = server.url if server is not None else f"http://{name}.test:8083"
        sender: TaskConfigSender = (InterWorkerClient().post_task_configs if self.rest
                                    else self._send_task_configs)

        def driver(member):
            self.drivers[name] = self.group.driver(member)
            return self.drivers[name]

        plugins = Plugins([])
        herder = DistributedHerder(
            name, plugins, self.configs, self.statuses, self.offsets, url=url,
            worker_config=WorkerConfig(self.settings), driver_factory=driver,
            send_task_configs=sender, request_timeout_s=self.request_timeout_s)
        if server is not None:
            server.app = create_app(herder)
            server.start()
            self.servers[name] = server
        herder.start(Worker(WorkerConfig(self.settings), worker_id=name,
                            transport=self.transport, offset_store=self.offsets,
                            status=herder, plugins=plugins, spark=NoSpark()))
        self.herders[name] = herder
        self.settle()
        return herder

    def _send_task_configs(self, leader_url: str, connector: str,
                           configs: list[dict[str, str]], key: SessionKey | None) -> None:
        """What InterWorkerClient carries over HTTP, handed over in the process."""
        leader = next(h for h in self.herders.values() if h.url == leader_url)
        assert key == leader.session_key()
        leader.put_task_configs(connector, configs)

    def stop(self, name: str) -> None:
        """A clean shutdown: the worker leaves the group."""
        self.herders.pop(name).stop()
        server = self.servers.pop(name, None)
        if server is not None:
            server.stop()

    def crash(self, name: str) -> None:
        """The worker's process dies: the group hears nothing more from it."""
        self.group.crash(self.drivers[name])
        self.stop(name)

    def settle(self, timeout: float = 30.0) -> None:
        wait_until(lambda: self.group.stable and all(
            h.healthy()[0] for h in self.herders.values()), timeout=timeout,
            message="a settled group", on_timeout=self.describe)

    def describe(self) -> str:
        c = self.group.coordinator
        return "\n".join([f"coordinator {c.state.value} generation {c.generation}"]
                         + [str(h.group_info()) for h in self.herders.values()])

    @property
    def leader(self) -> DistributedHerder:
        return next(h for h in self.herders.values() if h.is_leader)

    @property
    def followers(self) -> list[DistributedHerder]:
        return [h for h in self.herders.values() if not h.is_leader]

    def owned(self) -> dict[str, tuple[int, list[TaskId]]]:
        """worker -> (connectors it runs, its tasks)."""
        return {n: (len(h._owned.connectors), sorted(h._owned.tasks))
                for n, h in self.herders.items()}

    def running_tasks(self, connector: str) -> dict[int, str]:
        """task -> the worker it RUNS on (only tasks whose status says RUNNING)."""
        status = self.leader.connector_status(connector)
        return {t.task: t.worker_id for t in status.tasks if t.state is State.RUNNING}

    def close(self) -> None:
        for name in list(self.herders):
            self.stop(name)
        self.transport.close()


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    clusters: list[Cluster] = []

    def make(**kwargs) -> Cluster:
        c = Cluster(tmp_path / f"c{len(clusters)}", **kwargs)
        clusters.append(c)
        return c

    yield make  # type: ignore[misc]
    for c in clusters:
        c.close()


def sharded(shards: int, tasks_max: int | None = None) -> dict[str, str]:
    return {"connector.class": SHARDED, "topic": "unused", "shards": str(shards),
            "tasks.max": str(tasks_max or shards)}


def unique(prefix: str) -> str:
    """Connector names: the test connector's RUNNING registry is process-wide."""
    return f"{prefix}-{next(_names)}"


def all_running(c: Cluster, name: str, n: int):
    def check():
        c.settle()
        tasks = c.running_tasks(name)
        return len(tasks) == n and c.leader.connector_status(name).state is State.RUNNING \
            and tasks
    return wait_until(check, message=f"{n} running tasks of {name}", on_timeout=c.describe)


# -- membership ------------------------------------------------------------------------------


def test_workers_that_join_share_the_connectors_and_tasks_evenly(cluster):
    c = cluster()
    w1 = c.start("w1")
    assert w1.is_leader and w1.member.generation == 1
    name = unique("even")
    w1.create_connector(name, sharded(6))
    all_running(c, name, 6)
    assert c.owned() == {"w1": (1, [TaskId(name, i) for i in range(6)])}

    c.start("w2")
    c.start("w3")
    tasks = all_running(c, name, 6)
    assert sorted(len(ts) for _, ts in c.owned().values()) == [2, 2, 2]
    assert sum(n for n, _ in c.owned().values()) == 1
    # every task runs where the assignment put it, and the status says so
    assert {t: w for w, (_, ts) in c.owned().items() for t in (x.task for x in ts)} == tasks
    # each worker recorded the generations it completed, the leader with every member
    assert [r.generation for r in w1.history][-1] == c.group.coordinator.generation
    assert set(w1.history[-1].members) == set(c.group.coordinator.members)


def test_a_worker_that_leaves_cleanly_hands_its_work_over_without_any_time_passing(cluster):
    c = cluster(delay_ms=0)
    for w in ("w1", "w2", "w3"):
        c.start(w)
    name = unique("leave")
    c.leader.create_connector(name, sharded(6))
    all_running(c, name, 6)
    before = c.group.now_ms

    c.stop("w3")
    tasks = all_running(c, name, 6)
    assert set(tasks.values()) == {"w1", "w2"}
    assert sorted(len(ts) for _, ts in c.owned().values()) == [3, 3]
    assert c.group.now_ms == before


def test_a_crashed_workers_tasks_wait_for_the_scheduled_delay_then_move(cluster):
    delay = 60_000
    c = cluster(delay_ms=delay)
    for w in ("w1", "w2", "w3"):
        c.start(w)
    name = unique("crash")
    c.leader.create_connector(name, sharded(6))
    all_running(c, name, 6)
    lost = c.owned()["w3"][1]
    w3_id = c.herders["w3"].worker_id
    generation = c.group.coordinator.generation

    c.crash("w3")
    c.group.advance(SESSION_MS - 1)  # the session has not expired: nothing moves
    assert c.group.coordinator.generation == generation
    c.group.advance(1)
    c.settle()
    # the session expired: a new generation without w3, whose tasks are held back
    assert c.group.coordinator.generation == generation + 1
    owned = {t for _, ts in c.owned().values() for t in ts}
    assert owned.isdisjoint(lost) and len(owned) == 6 - len(lost)
    assert c.leader.history[-1].delay_ms == delay
    # meanwhile no status claims them RUNNING on the dead worker: UNASSIGNED, with a note
    # naming it, when they were lost and when they move
    tasks = {t.task: t for t in c.leader.connector_status(name).tasks}
    for tid in lost:
        t = tasks[tid.task]
        assert t.state is State.UNASSIGNED, t
        assert t.trace is not None and f"Worker {t.worker_id} left the group" in t.trace
        assert "runs nowhere until it is reassigned: due at" in t.trace
        assert t.worker_id == w3_id

    # the delay runs out: the leader rejoins, which starts a generation that places them
    c.group.advance(delay)
    tasks = all_running(c, name, 6)
    assert c.group.coordinator.generation == generation + 2
    assert set(tasks.values()) == {"w1", "w2"}
    assert sorted(len(ts) for _, ts in c.owned().values()) == [3, 3]


def test_when_the_leader_is_lost_another_worker_leads_and_takes_the_writes(cluster):
    c = cluster(delay_ms=0)
    for w in ("w1", "w2", "w3"):
        c.start(w)
    name = unique("leaderless")
    c.leader.create_connector(name, sharded(3))
    all_running(c, name, 3)
    assert c.leader.worker_id == "w1"

    c.crash("w1")
    c.group.advance(SESSION_MS)
    all_running(c, name, 3)
    new_leader = c.leader
    assert new_leader.worker_id in ("w2", "w3")
    follower = c.followers[0]
    other = unique("after")
    with pytest.raises(RequestTargetError) as forwarded:
        follower.create_connector(other, sharded(1))
    assert forwarded.value.forward_url == new_leader.url
    new_leader.create_connector(other, sharded(1))
    all_running(c, other, 1)


# -- connectors ------------------------------------------------------------------------------


def test_a_connector_is_created_reconfigured_and_deleted_across_the_group(cluster):
    c = cluster()
    c.start("w1")
    c.start("w2")
    name = unique("life")
    c.leader.create_connector(name, sharded(2, tasks_max=4))
    all_running(c, name, 2)

    # the connector asks for more tasks where it runs; the leader writes them (handed
    # over by a follower when the connector runs there) and the group spreads them
    wait_until(lambda: name in rc.RUNNING)
    rc.RUNNING[name].reshard(4)
    all_running(c, name, 4)
    assert sorted(len(ts) for _, ts in c.owned().values()) == [2, 2]

    # a new config: the connector restarts with it and its tasks follow
    c.leader.put_connector_config(name, sharded(1, tasks_max=4))
    all_running(c, name, 1)
    wait_until(lambda: c.group.stable and sorted(
        ts for _, ts in c.owned().values()) == [[], [TaskId(name, 0)]], on_timeout=c.describe)

    c.leader.delete_connector(name)
    wait_until(lambda: c.group.stable and all(
        not h._owned.connectors and not h._owned.tasks for h in c.herders.values()),
        on_timeout=c.describe)
    assert c.leader.connectors() == []
    assert name not in rc.RUNNING


def test_a_request_made_while_the_group_rebalances_is_answered_409_and_never_runs(cluster):
    c = cluster(request_timeout_s=0.5)
    w1 = c.start("w1")
    c.start("w2")
    c.group.stall(c.drivers["w2"])  # w2 stops reading: a rebalance cannot finish

    first = unique("first")
    w1.create_connector(first, sharded(1))  # the leader rejoins to assign it
    wait_until(lambda: c.group.coordinator.state.value == "PreparingRebalance")
    second = unique("second")
    with pytest.raises(ConflictError, match="worker group is rebalancing"):
        w1.create_connector(second, sharded(1))

    c.group.stall(c.drivers["w2"], False)
    all_running(c, first, 1)
    assert c.leader.connectors() == [first]  # the refused request was not run later


def test_writes_to_a_follower_are_forwarded_to_the_leader_it_advertised(cluster):
    c = cluster()
    c.start("w1")
    w2 = c.start("w2")
    assert not w2.is_leader
    with pytest.raises(RequestTargetError) as forwarded:
        w2.create_connector(unique("fwd"), sharded(1))
    assert forwarded.value.forward_url == "http://w1.test:8083"


def test_over_rest_followers_forward_writes_restarts_and_task_configs(cluster):
    """The same, over HTTP between real REST servers: a create sent to a follower, a task
    restart sent to a worker that does not run the task (follower -> leader -> owner, at
    the URL the owner advertised), and task configs a follower's connector generated,
    signed for the leader (connect.protocol=sessioned)."""
    c = cluster(rest=True)
    for w in ("w1", "w2", "w3"):
        c.start(w)
    urls = {n: s.url for n, s in c.servers.items()}
    names = [unique("rest") for _ in range(3)]
    follower = next(n for n, h in c.herders.items() if not h.is_leader)
    for name in names:
        r = httpx.post(f"{urls[follower]}/connectors", timeout=30,
                       json={"name": name, "config": sharded(1, tasks_max=3)})
        assert r.status_code == 201, r.text
    for name in names:
        all_running(c, name, 1)

    # three connectors on three workers: one runs on a follower, which reshards it
    on_follower = next(n for n in names for h in c.followers if n in h._owned.connectors)
    wait_until(lambda: on_follower in rc.RUNNING)
    rc.RUNNING[on_follower].reshard(3)
    tasks = all_running(c, on_follower, 3)

    owner = tasks[0]
    # asked of a worker without the task (a follower when there is one: two hops)
    elsewhere = next(n for n in sorted(urls, key=lambda n: c.herders[n].is_leader)
                     if n != owner)
    starts = len(rc.TASK_STARTS[on_follower])
    r = httpx.post(f"{urls[elsewhere]}/connectors/{on_follower}/tasks/0/restart", timeout=30)
    assert r.status_code == 204, r.text
    wait_until(lambda: len(rc.TASK_STARTS[on_follower]) == starts + 1)
    assert c.running_tasks(on_follower)[0] == owner


# -- what explain predicts -----------------------------------------------------------------


def test_the_herders_record_the_generations_the_simulator_predicts(cluster):
    """`kctl rebalance explain` runs the same member and coordinator code: a story told to
    the simulator and acted out by real herders gives the same record of every generation
    from every worker (who led, the members, what each was assigned and revoked, the
    assignor's sets), all but the clock they were completed at."""
    name = unique("story")
    delay = 300_000
    scenario = Scenario.from_dict({
        "kind": "connect", "protocol": "sessioned", "workers": ["w1"],
        "scheduled_rebalance_max_delay_ms": delay, "connectors": {name: 3},
        "events": [{"at_ms": 1000, "join": ["w2"]}, {"at_ms": 2000, "join": ["w3"]},
                   {"at_ms": 3000, "leave": "w2"}]})
    predicted = simulate(scenario).records

    c = cluster(delay_ms=delay)
    config = {**sharded(3), "name": name}
    c.configs.put_connector_config(name, config)
    c.configs.put_task_configs(name, [{**config, "shard": str(i), "of": "3"} for i in range(3)])
    herders = [c.start("w1"), c.start("w2"), c.start("w3")]
    c.stop("w2")
    c.settle()

    def comparable(records):
        # all but the clocks and addresses (the leader's assignor inputs carry its clock)
        return sorted((replace(r, at_ms=0, started_ms=0, url="", inputs={}) for r in records),
                      key=lambda r: (r.generation, r.worker))

    acted = [r for h in herders for r in h.history]
    assert comparable(acted) == comparable(predicted)
    assert len(predicted) >= 6  # three joins and a leave, each seen by several workers


def test_the_leader_takes_task_configs_only_signed_with_the_groups_session_key(cluster):
    """KIP-507 under connect.protocol=sessioned: the internal endpoint refuses a request
    without a signature, with another algorithm or with a wrong key, in Kafka's words."""
    c = cluster(rest=True)
    c.start("w1")
    name = unique("signed")
    c.leader.create_connector(name, sharded(1, tasks_max=2))
    all_running(c, name, 1)
    key = wait_until(c.configs.session_key)
    url = f"{c.servers['w1'].url}/connectors/{name}/tasks?forward=false"
    configs = [{**sharded(2), "name": name, "shard": str(i), "of": "2"} for i in range(2)]
    body = json.dumps(configs).encode()

    def post(headers):
        return httpx.post(url, content=body, timeout=30,
                          headers={"Content-Type": "application/json", **headers})

    refused = {
        "Internal request missing required signature": {},
        "Internal request signature algorithm HmacMD5 is not supported": {
            SIGNATURE_HEADER: sign(key.key, body), SIGNATURE_ALGORITHM_HEADER: "HmacMD5"},
        "Internal request contained invalid signature.": {
            SIGNATURE_HEADER: sign(b"not the group's key", body)},
    }
    for message, headers in refused.items():
        r = post(headers)
        assert r.status_code == 403 and message in r.json()["message"], r.text
    assert len(c.configs.task_configs(name)) == 1

    r = post({SIGNATURE_HEADER: sign(key.key, body),
              SIGNATURE_ALGORITHM_HEADER: SIGNATURE_ALGORITHM})
    assert r.status_code == 204, r.text
    assert c.configs.task_configs(name) == configs
