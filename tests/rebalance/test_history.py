"""A live cluster's rebalance history, in process: the records workers write become explain's
rounds with their causes, a recorded round replays through the same assignor, and the
timeline page renders in a real headless browser.

Records here are built with `GenerationRecord` as a worker's driver builds them (the broker
and worker-process stories are in tests/rebalance/test_history_broker.py and
tests/distributed/test_rebalance_insight.py); replays use the inputs the real
`ConnectHandler` recorded while the simulator drove it.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.browser import dom, screenshot
from support.generations import T0, leader_records, record, story_records, work
from support.timelines import bars, chart, lanes, texts

from kctl.errors import ConfigError, NotFoundError
from kctl.group.history import AssignorInputs
from kctl.rebalance import explain as ex
from kctl.rebalance.history import cluster_history, filter_rounds, parse_since, replay
from kctl.rebalance.timeline import render_html, timeline_data

# ---------------------------------------------------------------- causes


def causes(doc, generation):
    return next(r["causes"] for r in doc["rounds"] if r["generation"] == generation)


def test_each_round_names_its_cause_and_the_workers_or_connectors_involved():
    departures = [{"worker": "w3", "at_ms": T0 + 29_000, "reason": "worker shutting down"}]
    doc = cluster_history(story_records(), departures)

    assert [r["generation"] for r in doc["rounds"]] == [1, 2, 3, 4, 5, 6, 7]
    assert causes(doc, 1) == [{"cause": "group formed", "workers": ["w1"]}]
    assert causes(doc, 2) == [{"cause": "worker joined", "worker": "w2"}]
    assert causes(doc, 3) == [{"cause": "connector created", "connector": "ct1",
                               "worker": "w1", "config_offset": 7}]
    assert causes(doc, 5) == [{"cause": "worker left", "worker": "w3"}]
    assert causes(doc, 6) == [{"cause": "worker lost its session", "worker": "w2"}]
    assert causes(doc, 7) == [{"cause": "scheduled delay expired", "worker": "w1"}]
    round6 = doc["rounds"][5]
    assert round6["trigger"] == "worker lost its session: w2"
    assert round6["delay_ms"] == 8000 and round6["members"] == ["w1"]


def test_a_rolling_protocol_change_and_a_reconfiguration_are_named():
    records = [
        record("w1", 1, 0, trigger="join", members=["w1"], protocol="default"),
        record("w1", 2, 5, members=["w1"], protocol="compatible",
               trigger="connector ct1 reconfigured to 6 task(s)", inputs={"config_offset": 9}),
    ]
    assert causes(cluster_history(records), 2) == [
        {"cause": "protocol change", "from": "default", "to": "compatible"},
        {"cause": "connector reconfigured", "connector": "ct1", "worker": "w1", "tasks": 6,
         "config_offset": 9}]
    assert cluster_history(records)["rounds"][1]["trigger"] == (
        "protocol change default -> compatible; connector reconfigured: ct1 (6 tasks) at "
        "config offset 9")


def test_a_deletion_read_during_a_follow_up_round_is_named_from_the_assignors_sets():
    """The leader was already rejoining for a follow-up round when ct2 was deleted: no
    worker gives the deletion as its reason, yet the round revokes ct2's work for it."""
    deleted = {"deleted": work("ct2", "ct2-0").to_json(), "new": work("ct3").to_json()}
    records = [
        record("w1", 1, 0, trigger="join", members=["w1", "w2"], owned=["ct1", "ct2", "ct2-0"],
               inputs={"config_offset": 10}),
        record("w2", 1, 0, trigger="join", owned=["ct1-0"]),
        record("w1", 2, 5, trigger="rejoin after revocation", members=["w1", "w2"],
               owned=["ct1", "ct2", "ct2-0"], revoked=["ct2", "ct2-0"], sets=deleted,
               inputs={"config_offset": 14}),
        record("w2", 2, 5, owned=["ct1-0"]),
    ]
    doc = cluster_history(records)
    assert causes(doc, 2)[1:] == [
        {"cause": "connector deleted", "connector": "ct2", "worker": "w1", "config_offset": 14},
        {"cause": "connector created", "connector": "ct3", "worker": "w1", "config_offset": 14}]
    assert "connector deleted: ct2 at config offset 14" in doc["rounds"][1]["trigger"]
    # an eager round revokes everything: its sets say nothing about config
    eager = [{**r, "protocol": "default"} for r in records]
    assert causes(cluster_history(eager), 2) == [{"cause": "follow-up round", "worker": "w1"}]


def test_a_round_is_explains_contract_so_the_same_renderer_prints_it():
    doc = cluster_history(story_records())
    round3 = doc["rounds"][2]
    for key in ("generation", "at_ms", "trigger", "leader", "members", "assignments",
                "assigned", "revoked", "delay_ms", "sets", "protocol", "trace"):
        assert key in round3
    assert round3["leader"] == "w1"
    assert round3["assigned"] == {"w1": {"connectors": ["ct1"], "tasks": ["ct1-0"]},
                                  "w2": {"connectors": [], "tasks": ["ct1-1"]}}
    assert doc["summary"]["tasks_started"] == 3  # ct1-0, ct1-1, then ct1-1 again on w1
    text = _render(doc)
    assert "generation 3" in text and "connector created: ct1" in text
    assert "at config offset 7" in text


def test_a_member_without_a_record_of_its_own_is_told_from_the_leaders_assignment():
    inputs = {"members": {"w1-id": {"url": "http://w1:8083", "owned": {}},
                          "w2-id": {"url": "http://w2:8083", "owned": {}}},
              "assignments": {"w2-id": {"assigned": {"connectors": [], "tasks": ["ct1-1"]},
                                        "revoked": {}, "version": 2}}}
    records = [record("w1", 3, 0, members=["w1", "w2"], inputs=inputs, owned=["ct1"]),
               record("w2", 2, -5)]  # w2 wrote nothing for generation 3
    round3 = cluster_history(records)["rounds"][-1]
    assert round3["sources"] == {"w1": "worker record", "w2": "leader's assignment"}
    assert round3["assignments"]["w2"] == {"connectors": [], "tasks": ["ct1-1"]}
    assert "from the leader's assignment" in _render({"rounds": [round3], "summary": {}})


def test_an_answer_a_member_never_received_is_not_counted_as_its_stops():
    """The tests' broker answers a follower's SyncGroup with REBALANCE_IN_PROGRESS when the
    leader rejoins first: the follower completes no generation, writes no record, keeps
    running what it had, and the next round revokes the same tasks again. Counting the
    leader's first answer too made the live storm's stop phase count 246 stops for 90
    tasks."""
    inputs = {"members": {"w1-id": {"url": "http://w1:8083",
                                    "owned": work("ct1", "ct1-0").to_json()},
                          "w2-id": {"url": "http://w2:8083",
                                    "owned": work("ct1-1", "ct1-2").to_json()}},
              "assignments": {"w2-id": {"assigned": {},
                                        "revoked": work("ct1-1", "ct1-2").to_json(),
                                        "version": 2}}}
    records = [
        # ct1 is deleted: w1 stops its part; w2's SyncGroup of generation 5 never completes
        record("w1", 5, 0, trigger="connector ct1 deleted", members=["w1", "w2"],
               inputs=inputs, revoked=["ct1", "ct1-0"]),
        # generation 6 revokes w2's part again, and w2 stops it
        record("w1", 6, 2, members=["w1", "w2"]),
        record("w2", 6, 2, revoked=["ct1-1", "ct1-2"]),
    ]
    doc = cluster_history(records)
    round5, round6 = doc["rounds"]
    assert round5["sources"] == {"w1": "worker record", "w2": "not received"}
    assert round5["revoked"] == {"w1": {"connectors": ["ct1"], "tasks": ["ct1-0"]}}
    assert round5["assignments"]["w2"] == work("ct1-1", "ct1-2").to_json()  # still ran them
    assert round6["revoked"] == {"w2": {"connectors": [], "tasks": ["ct1-1", "ct1-2"]}}
    assert doc["summary"]["tasks_stopped"] == 3  # ct1-0, ct1-1, ct1-2: each once
    assert "did not complete this generation" in _render({"rounds": [round5], "summary": {}})

    # a member that recorded nothing later (it died) is still told from the leader's answer
    # (named by the URL it joined with, as it wrote no record at all)
    dead = cluster_history(records[:1])["rounds"][0]
    assert dead["sources"]["w2:8083"] == "leader's assignment"
    assert dead["revoked"]["w2:8083"] == work("ct1-1", "ct1-2").to_json()


def test_filters_pick_rounds_by_connector_count_time_and_generation():
    doc = cluster_history(story_records())
    assert [r["generation"] for r in filter_rounds(doc, connector="ct1")["rounds"]] == [3, 6, 7]
    assert [r["generation"] for r in filter_rounds(doc, last=2)["rounds"]] == [6, 7]
    since = T0 + 30_000
    assert [r["generation"] for r in filter_rounds(doc, since_ms=since)["rounds"]] == [5, 6, 7]
    assert filter_rounds(doc, generation=4)["rounds"][0]["members"] == ["w1", "w2", "w3"]
    with pytest.raises(NotFoundError, match=r"generation 99 \(recorded: 1..7\)"):
        filter_rounds(doc, generation=99)


def test_since_takes_durations_times_and_epoch_milliseconds():
    now = T0 + 3_600_000
    assert parse_since("90s", now) == now - 90_000
    assert parse_since("2h", now) == T0 - 3_600_000
    assert parse_since(str(T0), now) == T0
    assert parse_since("1970-01-01T00:00:01Z", now) == 1000
    with pytest.raises(ConfigError, match="expected a duration"):
        parse_since("yesterday", now)


# ---------------------------------------------------------------- replay


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocol=st.sampled_from(["eager", "compatible", "sessioned"]),
       workers=st.integers(1, 4), connectors=st.integers(1, 4), tasks=st.integers(1, 6),
       joins=st.integers(0, 2), crash=st.booleans(), delay=st.sampled_from([0, 3000]))
def test_every_recorded_round_replays_to_the_recorded_assignment(
        protocol, workers, connectors, tasks, joins, crash, delay):
    scenario = ex.scenario_from_flags(
        protocol=protocol, workers=str(workers), connectors=connectors, tasks=tasks,
        join=[f"n{i}" for i in range(joins)], crash=["w1"] if crash and workers > 1 else [],
        scheduled_rebalance_max_delay_ms=delay, advance_ms=20_000)
    records = leader_records(scenario)
    assert records, "the simulator recorded no leader inputs"
    for r in records:
        result = replay(records, r["generation"])
        assert result["reproduced"], result["differences"]


def test_a_replay_that_differs_says_which_member_and_what():
    scenario = ex.scenario_from_flags(protocol="sessioned", workers="3", connectors=2, tasks=3)
    records = leader_records(scenario)
    last = records[-1]
    inputs = AssignorInputs.from_json(last["inputs"]).to_json()
    member = sorted(inputs["assignments"])[0]
    inputs["assignments"][member]["assigned"] = {"connectors": ["ghost"], "tasks": []}
    tampered = [*records[:-1], {**last, "inputs": inputs}]

    result = replay(tampered, last["generation"])
    assert not result["reproduced"]
    [difference] = result["differences"]
    assert difference["member"] == member and difference["field"] == "assigned"
    assert difference["only_recorded"]["connectors"] == ["ghost"]


def test_a_generation_without_the_leaders_inputs_cannot_be_replayed():
    with pytest.raises(NotFoundError, match="no leader's record with the assignor's inputs"):
        replay([record("w1", 3, 0)], 3)
    with pytest.raises(NotFoundError, match="no record of generation 4"):
        replay([record("w1", 3, 0)], 4)


# ---------------------------------------------------------------- the picture


def test_the_timeline_renders_lanes_and_bars_in_a_real_browser(tmp_path):
    scenario = ex.scenario_from_flags(workers="3", connectors=2, tasks=4, crash=["w2"],
                                      scheduled_rebalance_max_delay_ms=5000, advance_ms=20_000)
    eager, cooperative = ex.simulate_compare(scenario)
    page = tmp_path / "compare.html"
    page.write_text(render_html([eager, cooperative], title="w2 crashes"))

    shown = dom(page.as_uri())
    panels = re.findall(r'<section class="panel" data-protocol="(\w+)"', shown)
    assert panels == ["eager", "sessioned"]
    assert lanes(chart(shown, 0)) == ["rebalances", "w1", "w2", "w3"]
    assert lanes(chart(shown, 1)) == ["rebalances", "w1", "w2", "w3", "lost (unassigned)"]
    drawn = len(bars(chart(shown, 0))) + len(bars(chart(shown, 1)))
    assert drawn > 0
    assert f'data-rendered="{drawn}"' in shown  # the page's script drew every bar
    assert "delay 5.0s" in [t for _, t in texts(chart(shown, 1))]

    png = screenshot(page.as_uri(), "timeline-compare")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_eager_rounds_leave_a_gap_in_every_lane_cooperative_only_where_work_moved(tmp_path):
    scenario = ex.scenario_from_flags(workers="2", connectors=2, tasks=4, join=["w3"])
    eager, cooperative = ex.simulate_compare(scenario)

    def bars_of(doc):
        return timeline_data([doc])["panels"][0]["bars"]

    items = 2 * 4 + 2
    # eager restarts everything: each item is drawn before and after the join
    assert bars_of(eager) == 2 * items
    # cooperative keeps what stays: only what moved to w3 gets a second bar
    moved = sum(len(w.get("tasks", ())) + len(w.get("connectors", ()))
                for r in cooperative["rounds"] for w in r["revoked"].values())
    assert 0 < moved < items and bars_of(cooperative) == items + moved


def _render(doc) -> str:
    from rich.console import Console

    console = Console(width=160, record=True, color_system=None)
    ex.render(doc, console)
    return console.export_text()


def test_explain_compare_writes_both_protocols_to_one_page(tmp_path):
    from typer.testing import CliRunner

    from kctl.cli.rebalance import app

    page = tmp_path / "storm.html"
    result = CliRunner().invoke(app, ["explain", "--workers", "3", "--connectors", "3",
                                      "--tasks", "3", "--join", "w4", "--compare",
                                      "--html", str(page)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert re.findall(r'data-protocol="(\w+)"', text) == ["eager", "sessioned"]
    assert "eager vs sessioned" in result.output  # the table is still printed


def test_replay_without_a_generation_is_a_usage_error():
    from typer.testing import CliRunner

    from kctl.cli.rebalance import app

    result = CliRunner().invoke(app, ["explain", "--replay"])
    assert result.exit_code == 2 and "--replay needs --generation" in result.output


# ---------------------------------------------------------------- a record, not a summary


def test_lost_work_says_when_it_is_due_and_once_reassigned_when_it_was():
    """The delay's expiry is when the leader rejoins; the round that hands the work out
    completes a few seconds later, and the history says both."""
    lost = {"lost": work("ct1-1").to_json()}
    records = [
        record("w1", 6, 45, members=["w1"], owned=["ct1", "ct1-0"], delay_ms=8000, sets=lost),
        record("w1", 7, 58, trigger="scheduled rebalance delay expired", members=["w1"],
               owned=["ct1", "ct1-0", "ct1-1"], assigned=["ct1-1"],
               sets={**lost, "lost_reassigned": work("ct1-1").to_json()}),
    ]
    held, handed = cluster_history(records)["rounds"]
    assert held["lost_work"]["waiting"] == ["ct1-1"]
    assert held["lost_work"]["due_ms"] == T0 + 53_000
    assert handed["lost_work"]["reassigned"] == ["ct1-1"]
    assert handed["lost_work"]["reassigned_ms"] == T0 + 58_000
    assert handed["lost_work"]["reassigned_lost_at_ms"] == T0 + 45_000
    assert handed["lost_work"]["late_ms"] == 5_000
    text = _render(cluster_history(records))
    assert "due to be reassigned at 2025-11-24T16:00:53.000+00:00" in text
    assert "reassigned ct1-1 at 2025-11-24T16:00:58.000+00:00 (5.0 s after it was due)" in text


def test_workers_stopped_at_once_and_started_again_show_a_shutdown_between():
    ran = {"w1": ["ct1", "ct1-0"], "w2": ["ct1-1"]}
    notes = [{"worker": w, "generation": 3, "at_ms": T0 + 30_000 + i, "stopped":
              work(*items).to_json()} for i, (w, items) in enumerate(ran.items())]
    records = [
        record("w1", 3, 10, members=["w1", "w2"], owned=ran["w1"], assigned=ran["w1"]),
        record("w2", 3, 10, owned=ran["w2"], assigned=ran["w2"]),
        # 17 minutes later both start again: a new member id each
        {**record("w1", 4, 30 + 17 * 60, members=["w1", "w2"], owned=ran["w1"],
                  assigned=ran["w1"]), "member_id": "w1-id2", "leader": "w1-id2"},
        {**record("w2", 4, 30 + 17 * 60, owned=ran["w2"], assigned=ran["w2"]),
         "member_id": "w2-id2", "leader": "w1-id2"},
    ]
    doc = cluster_history(records, notes)
    _formed, shutdown, again = doc["rounds"]
    assert shutdown["event"] == "shutdown" and shutdown["generation"] is None
    assert shutdown["revoked"] == {w: work(*items).to_json() for w, items in ran.items()}
    assert shutdown["trigger"] == "group stopped: every worker left (w1, w2)"
    assert again["causes"][0]["cause"] == "group formed again"
    assert "after a full restart (down 17m00s)" in again["trigger"]
    assert again["revoked"] == {}  # the stops are the shutdown's, counted once
    assert doc["summary"]["tasks_stopped"] == 2 and doc["summary"]["tasks_started"] == 4
    assert "round 2 · shutdown ·" in _render(doc)

    # the same story written as far as the shutdown: the group is down now
    down = cluster_history(records[:2], notes)
    assert down["rounds"][-1]["event"] == "shutdown"
    assert down["rounds"][:2] == doc["rounds"][:2]


def test_a_worker_killed_and_restarted_within_its_session_is_counted_as_gone():
    """No note (kill -9), the same name back with a new member id: what the dead process
    ran is counted as stopped, keyed as the simulator keys a gone process."""
    records = [
        record("w1", 3, 10, members=["w1", "w2"], owned=["ct1"], assigned=["ct1"]),
        record("w2", 3, 10, owned=["ct1-0", "ct1-1"], assigned=["ct1-0", "ct1-1"]),
        record("w1", 4, 20, members=["w1", "w2"], owned=["ct1"]),
        {**record("w2", 4, 20, owned=["ct1-0", "ct1-1"], assigned=["ct1-0", "ct1-1"]),
         "member_id": "w2-new"},
    ]
    round4 = cluster_history(records)["rounds"][-1]
    assert round4["causes"][0] == {"cause": "worker rejoined as new", "worker": "w2"}
    assert round4["revoked"] == {"w2 (gone)": work("ct1-0", "ct1-1").to_json()}
    assert round4["sources"]["w2 (gone)"] == "gone (leader's assignment)"
