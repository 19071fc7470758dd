"""`kctl rebalance history` and `explain --generation` at the terminal, against a worker
whose status store holds recorded generations (as a cluster's status topic does).

The records are put in the worker's store directly, as a cluster's workers would have
written them, so each story can say exactly what was recorded: a round the assignor
reproduces, the same round with its recorded answer tampered with, a history filtered by
an ISO time, and a real round drawn as a page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import yaml
from support.generations import T0, leader_records, story_records

from kctl.exit_status import ExitStatus
from kctl.group.history import AssignorInputs, record_key
from kctl.rebalance import explain as ex
from kctl.rebalance.timeline import timeline_data


def recorded(worker: Any, records: Iterable[dict[str, Any]]) -> None:
    """Into the worker's status store, under the keys workers write them with."""
    for r in records:
        worker.statuses.put_generation(record_key(r["worker"], r["generation"]), r)


def tampered(record: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The leader's record with one member's recorded answer changed: it was also handed
    a connector that does not exist. Returns the record and that member."""
    inputs = AssignorInputs.from_json(record["inputs"]).to_json()
    member = sorted(inputs["assignments"])[0]
    inputs["assignments"][member]["assigned"] = {"connectors": ["ghost"], "tasks": []}
    return {**record, "inputs": inputs}, member


def test_replay_exits_1_and_says_where_a_recorded_round_differs(kctl, worker):
    records = leader_records(ex.scenario_from_flags(protocol="sessioned", workers="3",
                                                    connectors=2, tasks=3))
    recorded(worker, records)
    last = records[-1]
    generation = str(last["generation"])

    same = kctl("rebalance", "explain", "--generation", generation, "--replay")
    assert same.exit_code == ExitStatus.SUCCESS, same.output
    assert "reproduced" in same.stdout

    record, member = tampered(last)
    recorded(worker, [record])
    differs = kctl("rebalance", "explain", "--generation", generation, "--replay",
                   "--width", "200")
    assert differs.exit_code == ExitStatus.ERROR == 1, differs.output
    assert "differs: 1 difference(s) from the recorded assignment" in differs.stdout
    row = next(line for line in differs.stdout.splitlines() if "ghost" in line)
    assert "assigned" in row  # the member's field that differs, with what only it has

    as_json = kctl("rebalance", "explain", "--generation", generation, "--replay", "-o", "json")
    assert as_json.exit_code == 1
    result = json.loads(as_json.stdout)
    assert result["reproduced"] is False
    [difference] = result["differences"]
    assert difference["field"] == "assigned"
    assert difference["only_recorded"] == {"connectors": ["ghost"], "tasks": []}
    assert member.startswith(difference["member"])  # named as its worker


def test_history_in_yaml_is_the_json_document(kctl, worker):
    recorded(worker, story_records())
    as_json = json.loads(kctl.ok("rebalance", "history", "-o", "json"))
    text = kctl.ok("rebalance", "history", "-o", "yaml")
    assert re.search(r"^rounds:$", text, re.M), text[:200]  # block YAML, not JSON in disguise
    as_yaml = yaml.safe_load(text)
    assert as_yaml == as_json
    assert [r["generation"] for r in as_yaml["rounds"]] == [1, 2, 3, 4, 5, 6, 7]
    assert as_yaml["rounds"][2]["causes"][0]["cause"] == "connector created"


def test_since_an_iso_time_keeps_the_rounds_from_that_moment_on(kctl, worker):
    recorded(worker, story_records())

    def generations(*args: str) -> list[int]:
        doc = json.loads(kctl.ok("rebalance", "history", "-o", "json", *args))
        return [r["generation"] for r in doc["rounds"]]

    at_30s = datetime.fromtimestamp((T0 + 30_000) / 1000, UTC)
    assert generations() == [1, 2, 3, 4, 5, 6, 7]
    assert generations("--since", at_30s.isoformat().replace("+00:00", "Z")) == [5, 6, 7]
    # a time without a zone is UTC; one with an offset is that moment
    assert generations("--since", at_30s.replace(tzinfo=None).isoformat()) == [5, 6, 7]
    assert generations("--since", at_30s.astimezone().isoformat()) == [5, 6, 7]
    later = at_30s.replace(second=at_30s.second + 1)
    assert generations("--since", later.isoformat()) == [6, 7]
    table = kctl.ok("rebalance", "history", "--since",
                    datetime.fromtimestamp(T0 / 1000 + 3600, UTC).isoformat())
    assert "no rebalance recorded for these filters" in table


def test_explain_generation_html_writes_the_rounds_page(kctl, worker, tmp_path):
    recorded(worker, story_records())
    page = tmp_path / "g3.html"
    result = kctl("rebalance", "explain", "--generation", "3", "--html", str(page),
                  "--width", "200")
    assert result.exit_code == 0, result.output
    assert "generation 3" in result.stdout and "connector created: ct1" in result.stdout
    assert f"timeline written to {page}" in result.stderr
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") or text.lstrip().lower().startswith("<!doctype")
    assert "kctl rebalance explain --generation 3" in text
    [panel] = timeline_data([json.loads(kctl.ok("rebalance", "explain", "--generation", "3",
                                                "-o", "json"))])["panels"]
    assert panel["lanes"] == ["rebalances", "w1", "w2"]
    assert panel["bars"] >= 3  # ct1, ct1-0 on w1; ct1-1 on w2
