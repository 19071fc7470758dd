"""A standalone worker answers kctl's group and rebalance paths through its herder alone:
a sink connector's consumer group is described from its tasks, its committed offsets and
its topic's end (read by the herder, not by REST), and a worker that never rebalanced has
an empty history."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support import connectors as sc
from support.waiting import wait_until

from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig

SOURCE = "support.connectors.CounterSourceConnector"
SINK = "support.connectors.CollectingSinkConnector"
WAIT = 20.0


@pytest.fixture
def api(tmp_path) -> Iterator[httpx.Client]:
    w = StandaloneWorker(WorkerConfig({"state.dir": str(tmp_path / "state"),
                                       "listeners": "http://127.0.0.1:0",
                                       "offset.flush.interval.ms": 100}))
    w.start()
    try:
        with httpx.Client(base_url=w.rest.url, timeout=30) as client:
            yield client
    finally:
        w.stop()


def test_a_sink_connectors_group_shows_its_tasks_offsets_and_lag(api):
    topic = "groups-story-t"
    for name, config in [("groups-src", {"connector.class": SOURCE, "topic": topic,
                                         "count": 20}),
                         ("groups-snk", {"connector.class": SINK, "topics": topic})]:
        r = api.post("/connectors", json={"name": name, "config": config})
        assert r.status_code == 201, r.text
    wait_until(lambda: len(sc.SINK_RECEIVED["groups-snk"]) >= 20, timeout=WAIT,
               message="the sink got the source's 20 records")

    # a standalone worker has no worker group of its own: only the sink's group is named
    assert api.get("/groups").json() == {"worker_group": "", "groups": ["", "connect-groups-snk"]}

    def caught_up() -> dict | None:
        doc = api.get("/groups/connect-groups-snk").json()
        return doc if doc["lag"] == 0 else None

    doc = wait_until(caught_up, timeout=WAIT, message="the sink's offsets committed")
    assert doc["kind"] == "sink" and doc["connector"] == "groups-snk"
    assert [m["task"] for m in doc["members"]] == ["groups-snk-0"]
    assert doc["partitions"] == [{"topic": topic, "partition": 0, "committed": 20, "end": 20,
                                  "lag": 0}]
    assert "error" not in doc


def test_a_group_that_is_not_the_clusters_is_404(api):
    r = api.get("/groups/connect-nosuch")
    assert r.status_code == 404
    assert r.json()["error_code"] == 404 and "connect-nosuch" in r.json()["message"]


def test_a_worker_that_never_rebalanced_has_no_rounds(api):
    r = api.get("/rebalances", params={"last": 5, "since": "15m"})
    assert r.status_code == 200, r.text
    assert r.json()["rounds"] == []
    page = api.get("/rebalances/timeline")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    r = api.get("/rebalances", params={"since": "yesterday"})
    assert r.status_code == 400 and "since" in r.json()["errors"]
