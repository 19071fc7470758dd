"""`PUT /admin/loggers/{logger}?scope=cluster` sets the level on every worker (KIP-976).

Story: three workers; a user asks one that is not the leader to set a logger to DEBUG for
the cluster. The request reaches the leader, which sets it on every member: each worker's
own `GET /admin/loggers/{logger}` answers DEBUG. `scope=worker` (the default) still sets
only the worker asked, and a bad level is refused with 400 before any worker changes.
"""

from __future__ import annotations

import httpx
import pytest
from support.cluster import Cluster
from support.waiting import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.slow]

LOGGER = "kctl.runtime.worker"


def level(url: str, name: str = LOGGER) -> str:
    return httpx.get(f"{url}/admin/loggers/{name}", timeout=10).json()["level"]


def test_scope_cluster_sets_the_level_on_every_worker(kafka_broker, tmp_path):
    cluster = Cluster(tmp_path, kafka_broker.bootstrap)
    try:
        workers = [cluster.add(), cluster.add(), cluster.add()]
        wait_until(lambda: len({g["generation"] for g in cluster.generations()
                                if len(g.get("members") or ()) == 3}) >= 1, timeout=90,
                   message="a generation with all three workers", on_timeout=cluster.logs)
        leader = max(cluster.generations(), key=lambda g: g["generation"])["leader"]
        asked = next(w for w in workers if not leader.startswith(w.worker_id + "-"))
        assert {level(w.url) for w in workers} == {"INFO"}

        r = httpx.put(f"{asked.url}/admin/loggers/{LOGGER}", params={"scope": "cluster"},
                      json={"level": "LOUD"}, timeout=30)
        assert r.status_code == 400
        assert {level(w.url) for w in workers} == {"INFO"}

        r = httpx.put(f"{asked.url}/admin/loggers/{LOGGER}", params={"scope": "cluster"},
                      json={"level": "DEBUG"}, timeout=30)
        assert r.status_code == 204, r.text
        assert [level(w.url) for w in workers] == ["DEBUG"] * 3

        r = httpx.put(f"{asked.url}/admin/loggers/{LOGGER}", json={"level": "ERROR"},
                      timeout=30)
        assert r.status_code == 200 and LOGGER in r.json()
        assert sorted(level(w.url) for w in workers) == ["DEBUG", "DEBUG", "ERROR"]
    finally:
        cluster.stop()
