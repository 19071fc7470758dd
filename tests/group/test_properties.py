"""Random membership and config churn through the simulator, checked after every round.

Hypothesis writes the scenario (joins, clean leaves, crashes, connector or topic changes,
time passing); an observer checks each round as it closes, and the end state is checked
once the session and the scheduled delay have run out.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kctl.rebalance.scenario import load_scenario
from kctl.rebalance.simulator import Round, Simulator, simulate

SESSION = 6_000
# Shorter and longer than the session: a paused member comes back to find itself gone.
PAUSES = st.sampled_from([2_000, SESSION + 2_000])
PROPERTY_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def flat(work: Any) -> list[str]:
    if isinstance(work, dict):
        return [*work["connectors"], *work["tasks"]]
    return list(work)


def lost_membership(round_doc: dict[str, Any]) -> set[str]:
    """Members told in this round that they are out of the group (a paused member waking
    up): they lose everything, as Kafka's onPartitionsLost, and may get it back as they
    rejoin; that is not a cooperative revocation and needs no follow-up round."""
    return {
        t["to"] for t in round_doc["trace"]
        if t["detail"] in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION")
    }


def check_round(cooperative: bool):
    def observe(rnd: Round, sim: Simulator) -> None:
        doc = rnd.to_json()
        owned = [i for w in doc["assignments"].values() for i in flat(w)]
        assert len(owned) == len(set(owned)), f"owned twice in generation {rnd.generation}"
        if not cooperative:
            # Eager: the whole assignment is handed out again in every round.
            assert doc["assigned"] == doc["assignments"]
        else:
            lost = lost_membership(doc)
            for name in doc["members"]:
                if name in lost:
                    continue
                both = set(flat(doc["revoked"][name])) & set(flat(doc["assigned"][name]))
                assert not both, f"{name} revoked and got {both} in one round"

    return observe


@st.composite
def connect_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    protocol = draw(st.sampled_from(["eager", "compatible", "sessioned"]))
    delay = draw(st.sampled_from([0, 20_000]))
    pool = [f"w{i}" for i in range(1, 7)]
    live = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4, unique=True))
    connectors = draw(
        st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 5), max_size=3)
    )
    doc: dict[str, Any] = {
        "kind": "connect",
        "protocol": protocol,
        "scheduled_rebalance_max_delay_ms": delay,
        "session_timeout_ms": SESSION,
        "workers": list(live),
        "connectors": dict(connectors),
    }
    members, names = list(live), dict(connectors)
    events: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 8))):
        options = ["advance", "connector_add", "tasks_change", "connector_remove", "pause"]
        if len(members) < len(pool):
            options.append("join")
        if len(members) > 1:
            options += ["leave", "crash"]
        kind = draw(st.sampled_from(options))
        if kind == "join":
            name = draw(st.sampled_from([p for p in pool if p not in members]))
            members.append(name)
            events.append({"join": name})
        elif kind in ("leave", "crash"):
            name = draw(st.sampled_from(members))
            members.remove(name)
            events.append({kind: name})
        elif kind == "advance":
            events.append({"advance_ms": draw(st.sampled_from([1_000, 7_000, 25_000]))})
        elif kind == "pause":
            events.append({"pause": {draw(st.sampled_from(members)): draw(PAUSES)}})
        elif kind == "connector_add":
            fresh = [c for c in ["e", "f", "g", "h"] if c not in names]
            if fresh:
                name = draw(st.sampled_from(fresh))
                names[name] = draw(st.integers(0, 6))
                events.append({"connector_add": {name: names[name]}})
        elif kind == "tasks_change" and names:
            name = draw(st.sampled_from(sorted(names)))
            names[name] = draw(st.integers(0, 6))
            events.append({"tasks_change": {name: names[name]}})
        elif kind == "connector_remove" and names:
            name = draw(st.sampled_from(sorted(names)))
            del names[name]
            events.append({"connector_remove": name})
    # Let every session expire and every scheduled delay (and backoff) run out.
    events.append({"advance_ms": SESSION + delay + 1})
    events.append({"advance_ms": delay + 1})
    doc["events"] = events
    doc["_expected"] = names
    return doc


def check_every_start_is_stopped_or_still_running(
    result: dict[str, Any], *, zombies: bool
) -> None:
    """Conservation: for every item, starts minus stops over all rounds is what runs at
    the end (0 or 1), so work a leaving or crashing member stopped is counted too. With
    `zombies` (a member paused past its session) an item may run twice for a while: its
    old owner only stops it when it wakes up, so only the end is checked."""
    balance: dict[str, int] = {}
    for rnd in result["rounds"]:
        for work in rnd["assigned"].values():
            for item in flat(work):
                balance[item] = balance.get(item, 0) + 1
        for work in rnd["revoked"].values():
            for item in flat(work):
                balance[item] = balance.get(item, 0) - 1
        if not zombies:
            assert all(n in (0, 1) for n in balance.values()), f"generation {rnd['generation']}"
    running = {item for work in result["final"].values() for item in flat(work)}
    assert {item for item, n in balance.items() if n} == running
    summary = result["summary"]
    parts = ("tasks", "connectors") if result["kind"] == "connect" else ("partitions",)
    started = sum(summary[f"{part}_started"] for part in parts)
    stopped = sum(summary[f"{part}_stopped"] for part in parts)
    assert started - stopped == len(running)


def run(doc: dict[str, Any], cooperative: bool) -> dict[str, Any]:
    scenario = load_scenario(yaml.safe_dump({k: v for k, v in doc.items() if k != "_expected"}))
    result = simulate(scenario, observer=check_round(cooperative)).to_json()
    zombies = any("pause" in event for event in doc.get("events", ()))
    check_every_start_is_stopped_or_still_running(result, zombies=zombies)
    if cooperative:
        rounds = result["rounds"]
        for i, rnd in enumerate(rounds):
            # A member of the round that revoked rejoins; a gone process does not.
            revoking = set(rnd["members"]) - lost_membership(rnd)
            if any(flat(rnd["revoked"][m]) for m in revoking):
                follow = rounds[i + 1] if i + 1 < len(rounds) else None
                assert follow is not None and follow["at_ms"] == rnd["at_ms"], (
                    f"generation {rnd['generation']} revoked work but no round followed it"
                )
    return result


@PROPERTY_SETTINGS
@given(connect_scenarios())
def test_connect_churn_keeps_work_unique_and_settles_balanced(doc):
    cooperative = doc["protocol"] != "eager"
    result = run(doc, cooperative)
    expected = doc["_expected"]
    final = result["final"]
    assert final, "some worker is always left"
    connectors = [c for w in final.values() for c in w["connectors"]]
    tasks = [t for w in final.values() for t in w["tasks"]]
    assert sorted(connectors) == sorted(expected)
    assert sorted(tasks) == sorted(f"{c}-{i}" for c, n in expected.items() for i in range(n))
    for part in ("connectors", "tasks"):
        loads = [len(w[part]) for w in final.values()]
        assert max(loads) - min(loads) <= 1, f"{part} unbalanced: {final}"


@st.composite
def consumer_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    protocol = draw(st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky"]))
    topic_names = ["T0", "T1", "T2"]
    topics = {"T0": draw(st.integers(1, 4)), "T1": draw(st.integers(1, 4))}
    subscription = st.lists(st.sampled_from(topic_names), min_size=1, max_size=3, unique=True)
    pool = [f"C{i}" for i in range(5)]
    first = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
    subs = {m: draw(subscription) for m in first}
    doc: dict[str, Any] = {
        "kind": "consumer",
        "protocol": protocol,
        "session_timeout_ms": SESSION,
        "topics": dict(topics),
        "members": {m: list(t) for m, t in subs.items()},
    }
    events: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 7))):
        options = ["advance", "partitions_change", "pause"]
        if "T2" not in topics:
            options.append("topic_add")
        if len(subs) < len(pool):
            options.append("join")
        if len(subs) > 1:
            options += ["leave", "crash"]
        kind = draw(st.sampled_from(options))
        if kind == "join":
            name = draw(st.sampled_from([p for p in pool if p not in subs]))
            subs[name] = draw(subscription)
            events.append({"join": {name: list(subs[name])}})
        elif kind in ("leave", "crash"):
            name = draw(st.sampled_from(sorted(subs)))
            del subs[name]
            events.append({kind: name})
        elif kind == "advance":
            events.append({"advance_ms": draw(st.sampled_from([1_000, 7_000]))})
        elif kind == "pause":
            events.append({"pause": {draw(st.sampled_from(sorted(subs))): draw(PAUSES)}})
        elif kind == "topic_add":
            topics["T2"] = draw(st.integers(1, 3))
            events.append({"topic_add": {"T2": topics["T2"]}})
        else:
            name = draw(st.sampled_from(sorted(topics)))
            topics[name] += draw(st.integers(1, 2))
            events.append({"partitions_change": {name: topics[name]}})
    events.append({"advance_ms": SESSION + 1})
    doc["events"] = events
    doc["_expected"] = {"topics": topics, "subs": subs}
    return doc


@PROPERTY_SETTINGS
@given(consumer_scenarios())
def test_consumer_churn_ends_with_every_subscribed_partition_owned_once(doc):
    result = run(doc, cooperative=doc["protocol"] == "cooperative-sticky")
    topics, subs = doc["_expected"]["topics"], doc["_expected"]["subs"]
    subscribed = {t for ts in subs.values() for t in ts if t in topics}
    expected = sorted(f"{t}-{p}" for t in subscribed for p in range(topics[t]))
    final = result["final"]
    assert sorted(final) == sorted(subs)
    owned = [p for parts in final.values() for p in parts]
    assert sorted(owned) == expected
    for member, parts in final.items():
        assert {p.rsplit("-", 1)[0] for p in parts} <= set(subs[member])
