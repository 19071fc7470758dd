"""`kctl rebalance history` and `explain` answer scripts as every kctl command does: the
global `-o json|yaml` given before the subcommand is honoured, and a connector that neither
the cluster nor any recorded round knows is "not found" (exit 3), while a deleted one's
rounds are still found by name.
"""

from __future__ import annotations

import json

import yaml
from support.generations import story_records

from kctl.exit_status import ExitStatus
from kctl.group.history import record_key


def recorded(worker, records) -> None:
    for r in records:
        worker.statuses.put_generation(record_key(r["worker"], r["generation"]), r)


def test_the_global_output_option_is_honoured_by_history_and_explain(kctl, worker):
    recorded(worker, story_records())

    history = json.loads(kctl.ok("-o", "json", "rebalance", "history"))
    assert [r["generation"] for r in history["rounds"]] == [1, 2, 3, 4, 5, 6, 7]

    as_yaml = yaml.safe_load(kctl.ok("-o", "yaml", "rebalance", "history", "--last", "2"))
    assert [r["generation"] for r in as_yaml["rounds"]] == [6, 7]

    one = json.loads(kctl.ok("-o", "json", "rebalance", "explain", "--generation", "3"))
    assert [r["generation"] for r in one["rounds"]] == [3]

    simulated = json.loads(kctl.ok("-o", "json", "rebalance", "explain", "--workers", "2",
                                   "--connectors", "1", "--tasks", "2"))
    assert simulated["summary"]["tasks_started"] == 2

    # the command's own -o still wins over the global one
    table = kctl.ok("-o", "json", "rebalance", "history", "-o", "table", "--width", "160")
    assert "generation 3" in table and not table.lstrip().startswith("{")


def test_an_unknown_connector_exits_3_and_a_deleted_ones_rounds_are_found(kctl, worker):
    recorded(worker, story_records())

    result = kctl("rebalance", "history", "--connector", "nosuch")
    assert result.exit_code == ExitStatus.NOT_FOUND == 3, result.output
    assert "nosuch not found" in result.stderr

    # ct1 is in no config any more, but the rounds that moved it are still there
    doc = json.loads(kctl.ok("rebalance", "history", "--connector", "ct1", "-o", "json"))
    assert [r["generation"] for r in doc["rounds"]] == [3, 6, 7]

    # a connector that exists but never moved: no round, and no error
    kctl.ok("connector", "create", kctl.file("quiet.json", json.dumps(
        {"name": "quiet", "config": {"connector.class": "DataGen", "topic": "q",
                                     "throughput": 1}})))
    empty = kctl("rebalance", "history", "--connector", "quiet")
    assert empty.exit_code == 0, empty.output
    assert "no rebalance recorded for these filters" in empty.stdout
