"""Every example scenario runs through the simulator and tells the story its comments promise."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from group.explain_support import rendered

from kctl.rebalance import explain

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
EXAMPLES = sorted(SCENARIOS.glob("*.yaml"))


def run(name: str) -> dict:
    return explain.simulate_document(yaml.safe_load((SCENARIOS / name).read_text()))


def owned(work) -> set[str]:
    w = explain.Work.of(work)
    return set(w.connectors) | set(w.items)


def configured(scenario: dict) -> set[str]:
    """What should be running once everything settled, from the scenario alone."""
    items: set[str] = set()
    if scenario["kind"] == "connect":
        connectors = dict(scenario.get("connectors") or {})
        for event in scenario.get("events") or ():
            connectors.update(event.get("connector_add", {}))
            connectors.update(event.get("tasks_change", {}))
            connectors.pop(event.get("connector_remove"), None)
        for name, n in connectors.items():
            items |= {name, *(f"{name}-{i}" for i in range(n))}
    else:
        topics = dict(scenario.get("topics") or {})
        members = dict(scenario.get("members") or {})
        for event in scenario.get("events") or ():
            topics.update(event.get("topic_add", {}))
            topics.update(event.get("partitions_change", {}))
            if isinstance(event.get("join"), dict):
                members.update(event["join"])
            for gone in (event.get("leave"), event.get("crash")):
                members.pop(gone, None)
        subscribed = {t for subscriptions in members.values() for t in subscriptions if t in topics}
        items = {f"{t}-{p}" for t in subscribed for p in range(topics[t])}
    return items


def test_there_are_a_dozen_examples():
    assert len(EXAMPLES) >= 12


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_each_example_settles_with_everything_owned_exactly_once(path):
    scenario = yaml.safe_load(path.read_text())
    assert path.read_text().startswith("#"), "examples explain themselves in a comment"
    doc = explain.simulate_document(scenario)
    assert doc["rounds"], "an example shows at least one round"
    everything: list[str] = [item for work in doc["final"].values() for item in owned(work)]
    assert len(everything) == len(set(everything)), "nothing is owned twice"
    assert set(everything) == configured(scenario)
    assert rendered(lambda c: explain.render(doc, c, trace=True))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_each_example_compares_and_eager_never_stops_less(path):
    scenario = yaml.safe_load(path.read_text())
    eager, cooperative = explain.simulate_compare(scenario)
    key = explain.stopped_key(eager)
    assert eager["summary"][key] >= cooperative["summary"][key]
    assert rendered(lambda c: explain.render_compare(eager, cooperative, c))


def test_seed_000_walkthrough_eager_restarts_everything_sessioned_moves_only_what_w3_needs():
    scenario = yaml.safe_load((SCENARIOS / "connect-seed-000.yaml").read_text())
    eager, sessioned = explain.simulate_compare(scenario)
    join = [r for r in eager["rounds"] if r["trigger"].startswith("join w3")]
    assert join, [r["trigger"] for r in eager["rounds"]]
    before = {m: owned(w) for m, w in eager["rounds"][0]["assignments"].items()}
    for member, work in before.items():
        assert owned(join[0]["revoked"][member]) == work, "eager revokes everything"
    # sessioned: nothing is revoked and assigned in the same round, and w3 ends with work
    for round_ in sessioned["rounds"]:
        for member in round_["members"]:
            assert not owned(round_["assigned"].get(member)) & owned(round_["revoked"].get(member))
    assert owned(sessioned["final"]["w3"])
    stopped = sum(len(owned(w)) for r in sessioned["rounds"] for w in r["revoked"].values())
    assert stopped < sum(len(w) for w in before.values())


def test_crash_with_delay_waits_for_the_delay_before_reassigning_lost_work():
    doc = run("connect-worker-crash-delay.yaml")
    delayed = [r for r in doc["rounds"] if r["delay_ms"] > 0]
    assert delayed and delayed[0]["at_ms"] >= 2000 + 10000
    lost = owned(delayed[0]["sets"]["lost"])
    assert lost, "the crashed worker's work is lost"
    later = doc["rounds"][doc["rounds"].index(delayed[0]) + 1 :]
    reassigned = [r for r in later if lost & {i for w in r["assigned"].values() for i in owned(w)}]
    assert reassigned, "the lost work is reassigned once the delay has passed"
    assert reassigned[0]["at_ms"] >= delayed[0]["at_ms"] + delayed[0]["delay_ms"] - 1


def test_crash_without_delay_reassigns_lost_work_in_the_round_that_notices():
    doc = run("connect-worker-crash-no-delay.yaml")
    noticing = next(r for r in doc["rounds"] if "w3" not in r["members"])
    assert noticing["delay_ms"] == 0
    gained = {i for w in noticing["assigned"].values() for i in owned(w)}
    assert owned(noticing["sets"]["lost"]) <= gained
