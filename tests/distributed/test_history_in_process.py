"""The rebalance history as a record, told by real DistributedHerders on kctl's own group
coordinator (no broker): what `GET /rebalances` answers after a worker is killed, after a
worker stops, restarts and stops again, and after every worker stops and starts again.

- A killed worker writes nothing: the round that notices it counts what it ran, told from
  the leader's assignment and marked so, as the simulator shows a crashed member's work.
- Departure notes are kept per generation: a second stop of the same worker changes
  nothing that the rounds of the first one said.
- A full restart shows its shutdown (what every worker stopped, from their notes) and the
  group forming again, with how long it was down.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.waiting import wait_until

from distributed.test_herder_in_process import SESSION_MS, Cluster, all_running, sharded, unique
from kctl.group.assignors.connect import ConnectorsAndTasks, union_all
from kctl.rebalance import explain as ex


@pytest.fixture
def cluster(tmp_path) -> Iterator:
    clusters: list[Cluster] = []

    def make(**kwargs) -> Cluster:
        c = Cluster(tmp_path / f"c{len(clusters)}", rest=True, **kwargs)
        clusters.append(c)
        return c

    yield make
    for c in clusters:
        c.close()


def history(c: Cluster) -> dict:
    """`GET /rebalances` of a running worker: every worker's records, merged."""
    url = next(iter(c.servers.values())).url
    r = httpx.get(f"{url}/rebalances", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def kill(c: Cluster, name: str) -> None:
    """A `kill -9`: the group hears nothing more from it, and it writes nothing more (no
    departure note: the in-process herder still stops its threads)."""
    herder = c.herders[name]
    herder._record_departure = lambda stopped: None  # a dead process writes no note
    c.crash(name)


def owned(c: Cluster, name: str) -> ConnectorsAndTasks:
    return c.herders[name]._owned


def stops(round_: dict) -> tuple[int, int]:
    """(connectors, tasks) the round counts as stopped, gone workers included."""
    work = union_all(ConnectorsAndTasks.from_json(w) for w in round_["revoked"].values())
    return len(work.connectors), len(work.tasks)


def running_now(doc: dict) -> tuple[int, int]:
    s = doc["summary"]
    return (s["connectors_started"] - s["connectors_stopped"],
            s["tasks_started"] - s["tasks_stopped"])


def simulated_crash_round(protocol: str, connectors: dict[str, int],
                          load: ConnectorsAndTasks) -> dict:
    """The simulator's round that notices a crash in the same group, of a member that ran
    as much as the live victim did (the simulator may place the connector elsewhere)."""
    for victim in ("w3", "w2", "w1"):
        doc = ex.simulate_document({
            "kind": "connect", "protocol": protocol, "workers": ["w1", "w2", "w3"],
            "connectors": connectors, "session_timeout_ms": SESSION_MS,
            "scheduled_rebalance_max_delay_ms": 60_000,
            "events": [{"crash": victim}, {"advance_ms": SESSION_MS}]})
        round_ = next(r for r in doc["rounds"]
                      if victim in r["revoked"] and victim not in r["members"])
        gone = ConnectorsAndTasks.from_json(round_["revoked"][victim])
        if (len(gone.connectors), len(gone.tasks)) == (len(load.connectors), len(load.tasks)):
            return round_
    raise AssertionError(f"no simulated member runs as much as {load}")


@pytest.mark.parametrize("protocol", ["eager", "sessioned"])
def test_a_killed_workers_stops_are_counted_as_the_simulator_counts_them(cluster, protocol):
    c = cluster(delay_ms=60_000)
    c.settings["connect.protocol"] = protocol
    for w in ("w1", "w2", "w3"):
        c.start(w)
    name = unique("killed")
    c.leader.create_connector(name, sharded(6))
    all_running(c, name, 6)
    victim = next(n for n in ("w3", "w2") if not c.herders[n].is_leader)
    ran = owned(c, victim)
    assert ran.tasks, "the victim runs some tasks"

    kill(c, victim)
    c.group.advance(SESSION_MS)
    c.settle()

    doc = history(c)
    noticed = doc["rounds"][-1]
    assert noticed["causes"][0] == {"cause": "worker lost its session", "worker": victim}
    assert ConnectorsAndTasks.from_json(noticed["revoked"][victim]) == ran
    assert noticed["sources"][victim] == "gone (leader's assignment)"
    # as many stops as the simulator's round that notices a crash in the same group
    assert stops(noticed) == stops(simulated_crash_round(protocol, {name: 6}, ran))
    # and over the whole history, what started minus what stopped is what runs now
    assert running_now(doc) == (sum(len(owned(c, n).connectors) for n in c.herders),
                                sum(len(owned(c, n).tasks) for n in c.herders))

    # `explain --generation N` of that round: the same counts, not zeros
    one = httpx.get(f"{next(iter(c.servers.values())).url}/rebalances",
                    params={"generation": noticed["generation"]}, timeout=30).json()
    assert one["summary"]["tasks_stopped"] == stops(noticed)[1] > 0


def test_a_second_stop_of_the_same_worker_does_not_rewrite_the_first(cluster):
    """Issue: a Ctrl-C, a restart and a second Ctrl-C turned the first round's "worker
    left" into "worker lost its session"."""
    c = cluster(delay_ms=0)
    for w in ("w1", "w2", "w3"):
        c.start(w)
    name = unique("twice")
    c.leader.create_connector(name, sharded(6))
    all_running(c, name, 6)

    first_ran = owned(c, "w3")
    c.stop("w3")
    c.settle()
    before = history(c)["rounds"]
    left = before[-1]
    assert left["causes"] == [{"cause": "worker left", "worker": "w3"}]
    assert ConnectorsAndTasks.from_json(left["revoked"]["w3"]) == first_ran
    assert left["sources"]["w3"] == "departure note"

    c.start("w3")
    all_running(c, name, 6)
    second_ran = owned(c, "w3")
    c.stop("w3")
    c.settle()
    after = history(c)["rounds"]

    assert after[:len(before)] == before  # nothing written later changed an earlier round
    assert after[-1]["causes"] == [{"cause": "worker left", "worker": "w3"}]
    assert ConnectorsAndTasks.from_json(after[-1]["revoked"]["w3"]) == second_ran


def test_a_full_restart_shows_its_shutdown_and_its_start(cluster):
    c = cluster(delay_ms=0)
    workers = ("w1", "w2", "w3")
    for w in workers:
        c.start(w)
    name = unique("restart")
    c.leader.create_connector(name, sharded(6))
    all_running(c, name, 6)

    # every worker stops, one after another (as with Ctrl-C on each): the group goes on
    # without the first two, then the last one leaves an empty group. Each stop waits for
    # the workers still up to hold everything again, so the last one leaves with it all.
    up = list(workers)

    def held_by_those_up() -> bool:
        c.settle()
        work = union_all(owned(c, x) for x in up)
        return (len(work.connectors), len(work.tasks)) == (1, 6)

    for w in workers:
        wait_until(held_by_those_up, message=f"{', '.join(up)} hold everything",
                   on_timeout=c.describe)
        last_ran = owned(c, w)
        c.stop(w)
        up.remove(w)
    last_generation = c.group.coordinator.generation
    for w in workers:
        c.start(w)
    all_running(c, name, 6)

    doc = history(c)
    shutdown = next(r for r in doc["rounds"] if r.get("event") == "shutdown")
    at = doc["rounds"].index(shutdown)
    before, again = doc["rounds"][at - 1], doc["rounds"][at + 1]
    assert shutdown["generation"] is None and before["generation"] == last_generation
    assert [c["cause"] for r in doc["rounds"][at - 2:at] for c in r["causes"]] == [
        "worker left", "worker left"]
    assert shutdown["causes"][0]["cause"] == "group stopped"
    assert shutdown["trigger"] == "group stopped: its last worker left (w3)"
    # what the last worker stopped as it left (its departure note), not a blank
    assert {w: ConnectorsAndTasks.from_json(v) for w, v in shutdown["revoked"].items()} == {
        "w3": last_ran}
    assert stops(shutdown) == (1, 6)  # by then it ran everything

    assert again["causes"][0]["cause"] == "group formed again"
    assert again["causes"][0]["workers"] == ["w1"]  # the first to start again
    assert "after a full restart (down " in again["trigger"]
    assert running_now(doc) == (1, 6)
