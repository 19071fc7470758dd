"""Two worker processes on the TLS broker, behind https and HTTP Basic auth: writes are
forwarded to the leader with the user's credentials, task configs travel to the leader as
signed internal requests over verified https, and a task restart is forwarded to the worker
that runs it. kctl and a plain HTTP client drive it; without credentials nothing changes."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from support.cluster import Cluster, ClusterWorker
from support.waiting import wait_until

USER, PASSWORD = "operator", "cluster-secret"


class SecureWorker(ClusterWorker):
    def __init__(self, root: Path, name: str, settings: dict[str, Any]):
        super().__init__(root, name, settings)
        path = self.work / "worker.yaml"
        doc = yaml.safe_load(path.read_text())
        doc["listeners"] = "https://127.0.0.1:0"  # the worker reports the port it bound
        path.write_text(yaml.safe_dump(doc))
        self.ca = settings["listeners.https.ssl.truststore.location"]
        self.env = {**self.env, "KCTL_CACERT": self.ca, "KCTL_USER": USER,
                    "KCTL_PASSWORD": PASSWORD}

    def http(self, auth: Any = (USER, PASSWORD)) -> httpx.Client:
        return httpx.Client(base_url=self.url, auth=auth, timeout=30,
                            verify=ssl.create_default_context(cafile=self.ca))

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"worker exited with {self.proc.returncode}:\n"
                                 + self.log()[-3000:])
        return self.joined()

    def joined(self) -> bool:
        try:
            with self.http() as c:
                return c.get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def kctl(self, *args: str, check: bool = True) -> Any:
        r = subprocess.run([sys.executable, "-m", "kctl.cli.main", "--url", self.url, *args],
                           capture_output=True, text=True, env={**self.env, "COLUMNS": "200"})
        if check and r.returncode != 0:
            raise AssertionError(f"kctl {' '.join(args)} failed: {r.stdout}{r.stderr}")
        return r


class SecureCluster(Cluster):
    def add(self, **overrides: Any) -> SecureWorker:
        w = SecureWorker(self.root, f"w{len(self.workers) + 1}", {**self.settings, **overrides})
        w.start()
        self.workers.append(w)
        return w


@pytest.fixture
def cluster(tmp_path, tls_broker, tls_files):
    creds = tmp_path / "credentials.properties"
    creds.write_text(f"{USER}={PASSWORD}\n")
    c = SecureCluster(tmp_path, tls_broker.bootstrap, **{
        # the broker over TLS, for every Kafka client of the workers
        "security.protocol": "SSL", "ssl.truststore.location": str(tls_files.ca),
        # REST over https, trusted by the other worker through the same CA
        "listeners.https.ssl.keystore.location": str(tls_files.server),
        "listeners.https.ssl.truststore.location": str(tls_files.ca),
        "rest.extension.classes": "org.apache.kafka.connect.rest.basic.auth.extension."
                                  "BasicAuthSecurityRestExtension",
        "rest.basic.auth.credentials.file": str(creds)})
    yield c
    c.stop()


def source(topic: str) -> dict[str, str]:
    return {"connector.class": "support.connectors.CounterSourceConnector", "topic": topic,
            "count": "100000", "per.poll": "1", "poll.sleep.ms": "50", "tasks.max": "2"}


def test_a_secure_cluster_forwards_signs_and_refuses_strangers(cluster, tmp_path):
    w1, w2 = cluster.add(), cluster.add()
    for i, w in enumerate((w1, w2)):  # one of the two writes is forwarded to the leader
        f = tmp_path / f"c{i}.json"
        f.write_text(json.dumps({"name": f"c{i}", **source(f"secure-{i}")}))
        w.kctl("connector", "create", str(f))
    for name in ("c0", "c1"):
        wait_until(lambda name=name: cluster.running(name, 2), timeout=90,
                   message=f"{name} and its two tasks RUNNING (task configs reached the "
                           "leader over signed https)", on_timeout=cluster.logs)
    # a task restart asked of the worker that does not run it is forwarded to the one that
    # does, over https, with the user's credentials
    status = cluster.status("c0")
    task = status["tasks"][0]
    other = w2 if task["worker_id"] == w1.worker_id else w1
    with other.http() as c:
        r = c.post("/connectors/c0/tasks/0/restart")
        assert r.status_code == 204, r.text
    # strangers: no credentials, a wrong password - through either worker, nothing changes
    for w in (w1, w2):
        with w.http(auth=None) as anonymous:
            r = anonymous.post("/connectors", json={"name": "intruder",
                                                    "config": source("x")})
            assert r.status_code == 401 and "Basic" in r.headers["www-authenticate"]
            assert anonymous.delete("/connectors/c0").status_code == 401
        with w.http(auth=(USER, "guess")) as wrong:
            assert wrong.put("/connectors/c1/pause").status_code == 401
        r = w.kctl("connector", "list", "-o", "json")
        assert sorted(json.loads(r.stdout)) == ["c0", "c1"]
    assert cluster.status("c1")["connector"]["state"] == "RUNNING"
    # kctl without credentials is refused; with them (KCTL_USER/KCTL_PASSWORD) it works
    env_without = {k: v for k, v in w2.env.items() if k not in ("KCTL_USER", "KCTL_PASSWORD")}
    r = subprocess.run([sys.executable, "-m", "kctl.cli.main", "--url", w2.url, "connector",
                        "delete", "c1"], capture_output=True, text=True, env=env_without)
    assert r.returncode == 1 and "unauthorized" in r.stderr
    w2.kctl("connector", "delete", "c0")  # forwarded to the leader if w2 is not it
    with w1.http() as c:
        wait_until(lambda: c.get("/connectors").json() == ["c1"], timeout=30,
                   message="c0 deleted, c1 kept")
