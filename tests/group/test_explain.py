"""Explain's rendering, checked against hand-made documents that follow the issue's contract.

These do not need the simulator: they pin how a document is shown, so a change in the
simulator cannot hide a change in the rendering (and the other way round).
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from group.explain_support import check_golden, handmade, rendered
from hypothesis import given
from hypothesis import strategies as st

from kctl.errors import ConfigError
from kctl.rebalance import explain


def expand(text: str) -> list[str]:
    """Inverse of explain.compact, written independently for the test."""
    names: list[str] = []
    for token in text.split():
        match = re.fullmatch(r"(.+)-(\d+)\.\.(\d+)", token)
        if match:
            names += [f"{match[1]}-{n}" for n in range(int(match[2]), int(match[3]) + 1)]
        else:
            names.append(token)
    return names


# ---------------------------------------------------------------- compact lists


def test_a_run_of_three_tasks_collapses_but_a_pair_stays_as_two_names():
    assert explain.compact(["ct1-0", "ct1-1", "ct1-2", "ct1-4", "ct1-5"]) == "ct1-0..2 ct1-4 ct1-5"
    assert explain.compact(["T0-0", "T0-1", "T1-2", "T1-3", "T1-4"]) == "T0-0 T0-1 T1-2..4"
    assert explain.compact(["ct1", "ct1-0", "ct1-1", "ct1-2"]) == "ct1 ct1-0..2"


@given(
    st.sets(
        st.tuples(st.sampled_from(["ct1", "ct-2", "T0", "a-b"]), st.integers(0, 30)), max_size=40
    )
)
def test_compact_loses_nothing_and_invents_nothing(ids):
    names = [f"{prefix}-{n}" for prefix, n in sorted(ids)]
    assert expand(explain.compact(names)) == names


# ---------------------------------------------------------------- the default view


def test_each_round_shows_its_trigger_leader_and_what_every_member_gained_and_lost():
    doc = handmade("sessioned")
    text = rendered(lambda c: explain.render(doc, c))
    blocks = re.split(r"^round \d+ · ", text, flags=re.M)[1:]
    assert len(blocks) == len(doc["rounds"])
    for block, round_ in zip(blocks, doc["rounds"], strict=True):
        assert block.startswith(
            f"generation {round_['generation']} · {round_['at_ms']} ms · {round_['trigger']}"
        )
        assert f"leader {round_['leader']}" in block
        for member in round_["members"]:
            row = next(line for line in block.splitlines() if line.startswith(member + " "))
            for sign, field in (("+", "assigned"), ("-", "revoked")):
                work = explain.Work.of(round_[field][member])
                if not work.is_empty:
                    shown = row.split(f"{sign} ", 1)[1]
                    assert set(work.connectors) | set(work.items) <= set(expand(shown))


def test_the_leaders_sets_are_shown_and_empty_extra_sets_are_not():
    doc = handmade("sessioned")
    text = rendered(lambda c: explain.render(doc, c))
    assert text.count("sets: lost —   new ") == 3
    assert "revoked_for_balance ct1-2" in text
    doc["rounds"][1]["sets"]["revoked_for_balance"] = {"connectors": [], "tasks": []}
    assert "revoked_for_balance" not in rendered(lambda c: explain.render(doc, c))


def test_a_round_that_schedules_a_delay_says_so():
    doc = handmade("sessioned")
    doc["rounds"][1]["delay_ms"] = 300000
    text = rendered(lambda c: explain.render(doc, c))
    assert "delay 300000 ms (lost work waits, then a rebalance)" in text


def test_the_summary_lists_every_figure_of_the_document():
    doc = handmade("eager")
    text = rendered(lambda c: explain.render_summary(doc, c))
    for key, value in doc["summary"].items():
        label = explain.SUMMARY_LABELS[key]
        assert re.search(rf"^{re.escape(label)}\s+{value}$", text, flags=re.M), key


def test_golden_rounds_of_a_handmade_sessioned_document():
    check_golden(
        "handmade_sessioned_rounds.txt",
        rendered(lambda c: explain.render(handmade("sessioned"), c)),
    )


def test_golden_rounds_of_a_handmade_eager_document():
    check_golden(
        "handmade_eager_rounds.txt", rendered(lambda c: explain.render(handmade("eager"), c))
    )


# ---------------------------------------------------------------- trace


def test_trace_draws_requests_towards_the_coordinator_and_responses_away_from_it():
    doc = handmade("sessioned")
    text = rendered(lambda c: explain.render(doc, c, trace=True))
    lines = text.splitlines()
    join = next(line for line in lines if "JoinGroup─" in line and "protocols" in line)
    response = next(line for line in lines if "JoinGroupResponse" in line)
    assert join.index("◀") < join.index("JoinGroup")
    assert response.index("▶") > response.index("JoinGroupResponse")
    header = next(line for line in lines if line.lstrip().startswith("at_ms"))
    assert header.index("coordinator") < header.index("w1") < header.index("w2")


def test_trace_shows_heartbeat_errors_and_says_when_a_round_recorded_nothing():
    text = rendered(lambda c: explain.render(handmade("sessioned"), c, trace=True))
    assert re.search(r"HBResp.*REBALANCE_IN_PROGRESS", text)
    assert "(no messages recorded)" in text


def test_many_members_fall_back_to_one_line_per_message():
    messages = [
        {
            "at_ms": 0,
            "from": f"worker-{i:02d}",
            "to": "coordinator",
            "message": "JoinGroup",
            "detail": "",
        }
        for i in range(30)
    ]
    doc = {"rounds": [{"generation": 1, "at_ms": 0, "trigger": "join", "trace": messages}]}
    text = rendered(lambda c: explain.render_trace(doc, c))
    assert "worker-07 -> coordinator  JoinGroup" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_golden_trace_of_a_handmade_document():
    check_golden(
        "handmade_sessioned_trace.txt",
        rendered(lambda c: explain.render(handmade("sessioned"), c, trace=True)),
    )


# ---------------------------------------------------------------- compare


def test_compare_puts_the_stop_the_world_cost_first_and_counts_the_difference():
    eager, cooperative = handmade("eager"), handmade("sessioned")
    text = rendered(lambda c: explain.render_compare(eager, cooperative, c))
    stopped = re.search(r"^tasks stopped\s+(\d+)\s+(\d+)\s+(-?\d+)$", text, flags=re.M)
    assert stopped is not None
    left, right, diff = (int(g) for g in stopped.groups())
    assert (left, right) == (
        eager["summary"]["tasks_stopped"],
        cooperative["summary"]["tasks_stopped"],
    )
    assert diff == left - right
    assert (
        f"eager stops {left} tasks, sessioned stops {right} ({left - right} fewer restarts)" in text
    )


def test_compare_document_keeps_both_results_and_their_difference():
    eager, cooperative = handmade("eager"), handmade("sessioned")
    doc = explain.compare_document(eager, cooperative)
    assert doc["protocols"] == ["eager", "sessioned"]
    assert doc["results"]["eager"] == eager and doc["results"]["sessioned"] == cooperative
    assert (
        doc["difference"]["tasks_stopped"]
        == eager["summary"]["tasks_stopped"] - cooperative["summary"]["tasks_stopped"]
    )


def test_golden_compare_of_handmade_documents():
    check_golden(
        "handmade_compare.txt",
        rendered(lambda c: explain.render_compare(handmade("eager"), handmade("sessioned"), c)),
    )


def test_compare_pairs_each_scenario_with_its_eager_and_cooperative_counterpart():
    assert explain.compare_protocols("connect", "eager") == ("eager", "sessioned")
    assert explain.compare_protocols("connect", "compatible") == ("eager", "compatible")
    assert explain.compare_protocols("consumer", "range") == ("range", "cooperative-sticky")
    assert explain.compare_protocols("consumer", "cooperative-sticky") == (
        "sticky",
        "cooperative-sticky",
    )


# ---------------------------------------------------------------- machine output


def test_json_and_yaml_outputs_are_the_document_itself():
    doc = handmade("sessioned")
    assert json.loads(explain.to_json(doc)) == doc
    assert list(json.loads(explain.to_json(doc))) == list(doc)
    assert yaml.safe_load(explain.to_yaml(doc)) == doc


# ---------------------------------------------------------------- flags


def test_flags_describe_the_common_connect_case_in_the_scenario_format():
    doc = explain.scenario_from_flags(
        workers="3", connectors=2, tasks=4, join=["w4"], protocol="eager"
    )
    assert doc["kind"] == "connect" and doc["protocol"] == "eager"
    assert doc["workers"] == ["w1", "w2", "w3"]
    assert doc["connectors"] == {"ct1": 4, "ct2": 4}
    assert doc["events"] == [{"join": "w4"}]


def test_a_crash_flag_lets_the_session_expire_and_the_delay_pass():
    doc = explain.scenario_from_flags(
        workers="a,b", crash=["b"], session_timeout_ms=6000, scheduled_rebalance_max_delay_ms=20000
    )
    assert doc["workers"] == ["a", "b"]
    assert doc["session_timeout_ms"] == 6000
    assert doc["scheduled_rebalance_max_delay_ms"] == 20000
    assert doc["events"] == [{"crash": "b"}, {"advance_ms": 26000}]


def test_consumer_flags_subscribe_every_member_and_joiner_to_every_topic():
    doc = explain.scenario_from_flags(
        kind="consumer", workers="2", topics=2, partitions=3, join=["C9"]
    )
    assert doc["protocol"] == "range"
    assert doc["topics"] == {"T0": 3, "T1": 3}
    assert doc["members"] == {"C0": ["T0", "T1"], "C1": ["T0", "T1"]}
    assert doc["events"] == [{"join": {"C9": ["T0", "T1"]}}]


def test_flags_that_break_the_contract_are_config_errors():
    with pytest.raises(ConfigError, match="kind"):
        explain.scenario_from_flags(kind="broker")
    with pytest.raises(ConfigError, match="protocol"):
        explain.scenario_from_flags(protocol="zigzag")


def test_a_consumer_summary_shows_partitions_not_its_task_aliases():
    scenario = {
        "kind": "consumer", "protocol": "range", "topics": {"T0": 4},
        "members": {"C0": ["T0"], "C1": ["T0"]}, "events": [{"join": {"C2": ["T0"]}}],
    }
    eager, cooperative = explain.simulate_compare(scenario)
    assert eager["summary"]["tasks_stopped"] == eager["summary"]["partitions_stopped"]
    for text in (
        rendered(lambda c: explain.render(eager, c)),
        rendered(lambda c: explain.render_compare(eager, cooperative, c)),
    ):
        assert "partitions revoked" in text
        assert "tasks stopped" not in text and "connectors" not in text
    compare = rendered(lambda c: explain.render_compare(eager, cooperative, c))
    left = eager["summary"]["partitions_stopped"]
    assert f"range stops {left} partitions, cooperative-sticky stops" in compare
