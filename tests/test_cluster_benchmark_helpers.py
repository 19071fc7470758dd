"""The pure parts of the cluster benchmarks: when is a join done (everything RUNNING, in
balance), and how a run's figures are summed up."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from _cluster import balanced, failures, placement, spread


def status(state: str, worker: str, tasks: list[tuple[str, str]]) -> dict:
    return {"connector": {"state": state, "worker_id": worker},
            "tasks": [{"id": i, "state": s, "worker_id": w} for i, (s, w) in enumerate(tasks)]}


def test_placement_counts_connectors_and_tasks_per_worker():
    statuses = {"a": status("RUNNING", "w1", [("RUNNING", "w1"), ("RUNNING", "w2")]),
                "b": status("RUNNING", "w2", [("RUNNING", "w3")])}
    assert placement(statuses, {"a": 2, "b": 1}) == {
        "w1": Counter(connector=1, task=1), "w2": Counter(connector=1, task=1),
        "w3": Counter(task=1)}


def test_placement_is_none_until_everything_runs():
    assert placement({"a": None}, {"a": 1}) is None
    unassigned = status("RUNNING", "w1", [("RUNNING", "w1"), ("UNASSIGNED", "w2")])
    assert placement({"a": unassigned}, {"a": 2}) is None
    assert placement({"a": status("RUNNING", "w1", [("RUNNING", "w1")])}, {"a": 2}) is None
    assert placement({"a": status("PAUSED", "w1", [("RUNNING", "w1")])}, {"a": 1}) is None


def test_balanced_counts_idle_workers_and_refuses_strangers():
    where = {"w1": Counter(connector=1, task=3), "w2": Counter(connector=1, task=3),
             "w3": Counter(task=3)}
    assert balanced(where, ["w1", "w2", "w3"])
    assert not balanced(where, ["w1", "w2", "w3", "w4"])  # w4 has no task yet: 3 - 0 > 1
    assert not balanced(where, ["w1", "w2"])  # w3 is not one of them
    assert not balanced({**where, "w4": Counter(task=1)}, ["w1", "w2", "w3", "w4"])
    even = {"w1": Counter(connector=1, task=3), "w2": Counter(connector=1, task=3),
            "w3": Counter(task=3), "w4": Counter(task=3)}
    assert balanced(even, ["w1", "w2", "w3", "w4"])


def test_failures_name_what_failed_with_its_trace():
    s = status("RUNNING", "w1", [("FAILED", "w1")])
    s["tasks"][0]["trace"] = "boom"
    assert failures({"a": s, "b": None}) == ["task a-0: boom"]


def test_spread_is_median_min_max():
    assert spread([3.0, 1.0, 2.0]) == "2.00 (1.00-3.00)"
    assert spread([1234.0], "{:,.0f}") == "1,234"
    assert spread([]) == "-"
