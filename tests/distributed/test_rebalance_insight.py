"""Why did my tasks move? Asked of a live cluster of worker processes through the CLI.

Story: w1 and w2 form a `sessioned` group and run a DataGen source with four tasks; w3
joins, then leaves cleanly. `kctl rebalance history` (asked of any worker) tells each
round's cause: the group forming, the connector created at its config offset, w3 joining
and leaving; `--connector` keeps the rounds that moved its work. `rebalance explain
--generation` prints a real round as the simulator's rounds are printed, and `--replay`
runs every recorded round through the same assignor and gets the same answer. `group
describe` lists the members with their URLs and work, naming the source of each field
(the test broker's DescribeGroups gives member ids only). The timeline page, written by
the CLI and served by a worker, renders in headless Chromium with a lane per worker.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml
from support.browser import dom, screenshot
from support.cluster import Cluster
from support.timelines import bars, chart, lanes
from support.waiting import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.slow]

GEN, SINK = "insight-gen", "insight-sink"


def history(worker, *args: str) -> dict:
    return json.loads(worker.kctl("rebalance", "history", "-o", "json", *args).stdout)


def causes(doc: dict) -> list[tuple[str, str]]:
    return [(c["cause"], c.get("worker") or c.get("connector") or "")
            for r in doc["rounds"] for c in r["causes"]]


def test_a_user_finds_out_why_tasks_moved(kafka_broker, tmp_path: Path):
    cluster = Cluster(tmp_path, kafka_broker.bootstrap, **{"connect.protocol": "sessioned"})
    try:
        w1, w2 = cluster.add(), cluster.add()
        config = tmp_path / f"{GEN}.yaml"
        config.write_text(yaml.safe_dump({"name": GEN, "config": {
            "connector.class": "DataGen", "topic": "insight-seq", "tasks.max": 4,
            "throughput": 20}}))
        w1.kctl("connector", "create", str(config))
        wait_until(lambda: cluster.running(GEN, 4), timeout=90, message="datagen running",
                   on_timeout=cluster.logs)

        w3 = cluster.add()
        wait_until(lambda: w3.worker_id in cluster.placement(GEN).values(), timeout=90,
                   message="w3 runs some of the datagen's work", on_timeout=cluster.logs)
        w3.stop()
        wait_until(lambda: ("worker left", w3.worker_id) in causes(history(w1)), timeout=90, interval=0.5,
                   message="a round records w3 leaving", on_timeout=cluster.logs)
        wait_until(lambda: cluster.running(GEN, 4), timeout=90, message="datagen settled")

        # any worker answers, from every worker's records
        doc = history(w2)
        told = causes(doc)
        assert doc["rounds"][0]["causes"][0] == {"cause": "group formed",
                                                 "workers": [w1.worker_id]}
        assert ("worker joined", w2.worker_id) in told
        assert ("worker joined", w3.worker_id) in told
        assert ("worker left", w3.worker_id) in told
        created = [c for r in doc["rounds"] for c in r["causes"]
                   if c["cause"] == "connector created"]
        assert created and created[0]["connector"] == GEN
        assert isinstance(created[0]["config_offset"], int)
        for r in doc["rounds"]:  # explain's contract, merged from the workers' records
            assert set(r) >= {"generation", "at_ms", "trigger", "leader", "members",
                              "assignments", "assigned", "revoked", "delay_ms", "sets"}
        generations = [r["generation"] for r in doc["rounds"]]
        assert generations == sorted(set(generations))

        # the rounds that moved the connector's work, the last two, the recent ones
        mine = history(w1, "--connector", GEN)["rounds"]
        assert mine and all(GEN in json.dumps(r["assigned"]) + json.dumps(r["revoked"])
                            + json.dumps(r["sets"]) + json.dumps(r["causes"]) for r in mine)
        assert len(mine) < len(doc["rounds"])
        assert [r["generation"] for r in history(w1, "--last", "2")["rounds"]] == \
            generations[-2:]
        assert history(w1, "--since", "1h")["rounds"] == history(w1)["rounds"]

        # one real round, printed as a simulated one; and replayed
        joined = next(r for r in doc["rounds"]
                      if {"cause": "worker joined", "worker": w3.worker_id} in r["causes"])
        shown = w1.kctl("rebalance", "explain", "--generation", str(joined["generation"]),
                        "--width", "200").stdout
        assert f"generation {joined['generation']}" in shown
        assert f"worker joined: {w3.worker_id}" in shown
        assert "leader" in shown and "summary" in shown
        for r in doc["rounds"]:
            if r["replayable"]:
                replayed = w2.kctl("rebalance", "explain", "--generation",
                                   str(r["generation"]), "--replay", check=False)
                assert replayed.returncode == 0, replayed.stdout + replayed.stderr
                assert "reproduced" in replayed.stdout
        missing = w1.kctl("rebalance", "explain", "--generation", "9999", check=False)
        assert missing.returncode == 3 and "no record of generation 9999" in missing.stderr

        # who is in the group now, and where each fact came from
        group = json.loads(w1.kctl("group", "describe", "-o", "json").stdout)
        assert group["group"] == cluster.group
        assert sorted(m["worker"] for m in group["members"]) == sorted(
            [w1.worker_id, w2.worker_id])
        assert {m["url"] for m in group["members"]} == {w1.url, w2.url}
        work = [t for m in group["members"] for t in m["tasks"]]
        assert sorted(work) == [f"{GEN}-{i}" for i in range(4)]
        assert group["protocol"] == "sessioned" and group["leader"] in (w1.worker_id,
                                                                        w2.worker_id)
        assert group["sources"]["generation"] == "worker records"
        assert set(group["broker_members"]) == {m["member_id"] for m in group["members"]}
        table = w2.kctl("group", "describe").stdout
        assert w1.worker_id in table and "sources:" in table

        # a sink connector's consumer group: its tasks, committed offsets and lag
        sink = tmp_path / "insight-sink.yaml"
        sink.write_text(yaml.safe_dump({"name": SINK, "config": {
            "connector.class": "support.connectors.CollectingSinkConnector",
            "topics": "insight-seq", "tasks.max": 2}}))
        w2.kctl("connector", "create", str(sink))
        wait_until(lambda: cluster.running(SINK, 2), timeout=90, message="sink running",
                   on_timeout=cluster.logs)
        groups = json.loads(w1.kctl("group", "describe", f"connect-{SINK}", "-o", "json").stdout)
        assert groups["kind"] == "sink" and groups["connector"] == SINK
        assert sorted(m["task"] for m in groups["members"]) == [f"{SINK}-0", f"{SINK}-1"]

        def committed() -> dict:
            doc = json.loads(w1.kctl("group", "describe", f"connect-{SINK}", "-o",
                                     "json").stdout)
            return doc if doc["partitions"] and all(
                p["committed"] for p in doc["partitions"]) else {}

        described = wait_until(committed, timeout=60, message="the sink committed offsets")
        for p in described["partitions"]:
            # an end below the committed offset (the test broker's short ListOffsets answer)
            # is a lag shown as unknown, never a negative one
            behind = p["end"] - p["committed"]
            assert p["topic"] == "insight-seq" and p["lag"] == (behind if behind >= 0 else None)
        lags = [p["lag"] for p in described["partitions"]]
        assert described["lag"] == (None if None in lags else sum(lags))
        assert set(described["sources"]) == {"members", "committed", "end"}
        table = w2.kctl("group", "describe", f"connect-{SINK}").stdout
        assert "insight-seq" in table and "LAG" in table

        # the picture: written by the CLI, and served by any worker
        page = tmp_path / "history.html"
        w1.kctl("rebalance", "history", "--html", str(page))
        drawn = chart(dom(page.as_uri()), 0)
        assert set(lanes(drawn)) >= {w1.worker_id, w2.worker_id, w3.worker_id}
        served = f"{w2.url}/rebalances/timeline"
        assert httpx.get(served, timeout=30).headers["content-type"].startswith("text/html")
        shown = dom(served)
        assert bars(chart(shown, 0)) and 'data-rendered="' in shown
        screenshot(served, "timeline-live-cluster")
    finally:
        cluster.stop()
