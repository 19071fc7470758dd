"""A Confluent JDBC user's first hour with kctl, through a worker process and the CLI, on
a real PostgreSQL (issue 23's findings, each seen this way before it was fixed):

- a config written for Confluent's connector (its class name, `table.whitelist`) runs, and
  reads only the whitelisted table (the whitelist was ignored: every table was read);
- `kctl connector validate` warns about a typo instead of saying "valid" without a word;
- a password inside `connection.url` is hidden wherever the config is shown, in the status
  and in the worker's log;
- a source whose include list matches no table says so in its status, and `create --wait`
  returns at once with the warning (it waited 60 s and timed out);
- a source that fails on a database outage says what failed, not "Tolerance exceeded".
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]

URL_SECRET = "UrlSecret-Pw77"


def yaml(path: Path, settings: dict) -> Path:
    path.write_text(json.dumps(settings))  # JSON is YAML
    return path


class Proxy:
    """A TCP proxy to the database that the test can take down (an outage)."""

    def __init__(self, target_port: int):
        self.target = target_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.up = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.up:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        with contextlib.suppress(OSError):
            b.shutdown(socket.SHUT_WR)

    def down(self) -> None:
        """Refuse new connections and cut the open ones."""
        self.up = False
        self.server.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()


@pytest.fixture
def stack(tmp_path, postgres_db) -> Iterator[tuple[Worker, object]]:
    postgres_db.execute(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer TEXT NOT NULL)",
        "INSERT INTO orders SELECT g, 'c' || g FROM generate_series(1, 100) g",
        "CREATE TABLE customers (id BIGINT PRIMARY KEY, name TEXT NOT NULL)",
        "INSERT INTO customers SELECT g, 'n' || g FROM generate_series(1, 10) g",
        "CREATE TABLE secrets (id BIGINT PRIMARY KEY, pin TEXT NOT NULL)",
        "INSERT INTO secrets VALUES (1, '0000')")
    w = Worker(tmp_path)
    yaml(tmp_path / "worker.yaml", {
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "offset.flush.interval.ms": 200, "spark.master": "local[2]",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"})
    w.start()
    try:
        yield w, postgres_db
    finally:
        w.stop()


def offsets(w: Worker, name: str) -> dict[str, dict]:
    return {o["partition"]["table"]: o["offset"] for o in w.offsets(name)
            if "table" in o["partition"]}


def test_a_confluent_config_runs_reads_only_its_whitelist_and_hides_the_url_password(
        stack, tmp_path):
    w, db = stack
    url = db.url + f"&password={URL_SECRET}"  # trust authentication: any password works
    config = {"name": "confluent", "connector.class":
              "io.confluent.connect.jdbc.JdbcSourceConnector", "connection.url": url,
              "mode": "incrementing", "incrementing.column.name": "id",
              "table.whitelist": "orders", "topic.prefix": "pg-", "tasks.max": 3,
              "poll.interval.ms": 200, "validate.non.null": True,
              "numeric.mapping": "best_fit", "db.timezone": "UTC"}
    typo = yaml(tmp_path / "typo.yaml", {**config, "batch.max.row": 500})
    checked = w.kctl("connector", "validate", str(typo))
    assert "confluent: configuration is valid (1 warning(s) on stderr)" in checked.stdout
    assert "unknown key 'batch.max.row' (did you mean 'batch.max.rows'?)" in checked.stderr
    assert URL_SECRET not in checked.stdout + checked.stderr

    w.kctl("connector", "create", str(yaml(tmp_path / "confluent.yaml", config)))
    wait_until(lambda: offsets(w, "confluent").get("orders") == {"incrementing": 100},
               timeout=180, interval=0.5, message="every order read")
    # only the whitelisted table: one task, one topic, no offsets of the others
    tasks = json.loads(w.kctl("connector", "get", "confluent", "-o", "json").stdout)["tasks"]
    assert len(tasks) == 1
    assert set(offsets(w, "confluent")) == {"orders"}
    topics = httpx.get(f"{w.url}/connectors/confluent/topics", timeout=30).json()
    assert topics["confluent"]["topics"] == ["pg-orders"]

    # the URL's password: hidden wherever the config, the status or the log show it
    shown = [w.kctl("connector", "config", "confluent", "-o", "json").stdout,
             w.kctl("connector", "config", "confluent").stdout,
             w.kctl("connector", "get", "confluent", "-o", "json").stdout,
             w.kctl("connector", "get", "confluent").stdout,
             w.kctl("connector", "status", "confluent", "-o", "json").stdout,
             (tmp_path / "worker.log").read_text()]
    for text in shown:
        assert URL_SECRET not in text
    assert json.loads(shown[0])["connection.url"].endswith("&password=[hidden]")


def test_an_include_list_that_matches_nothing_is_a_warning_and_wait_returns(stack, tmp_path):
    w, db = stack
    f = yaml(tmp_path / "typo.yaml", {
        "name": "typo", "connector.class": "JdbcSource", "connection.url": db.url,
        "mode": "bulk", "table.include.list": "order", "topic.prefix": "pg-"})
    # it returns on the warning: waiting out the timeout would exit 1 ("timed out")
    r = w.kctl("connector", "create", str(f), "--wait", "--timeout", "600")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "No table of jdbc:postgresql://" in r.stderr
    assert "matches table.include.list=order" in r.stderr
    assert "Tables there: customers, orders, secrets" in r.stderr
    st = w.status("typo")
    assert st["connector"]["state"] == "RUNNING" and st["tasks"] == []
    assert "no task runs" in st["connector"]["trace"]
    # the table appears and the user restarts the connector: it lists the tables again at
    # once (table.poll.interval.ms is a minute) and a task starts; the warning goes
    db.execute("CREATE TABLE \"order\" (id BIGINT PRIMARY KEY)")
    w.kctl("connector", "restart", "typo")
    st = wait_until(lambda: (s := w.status("typo"))["tasks"] and s, timeout=30,
                    message="a task for the new table, started by the restart")
    assert not st["connector"].get("trace")


def test_a_database_outage_fails_the_source_saying_what_failed(stack, tmp_path):
    w, db = stack
    proxy = Proxy(db.server.port)
    url = db.url.replace(f":{db.server.port}/", f":{proxy.port}/")
    w.kctl("connector", "create", str(yaml(tmp_path / "outage.yaml", {
        "name": "outage", "connector.class": "JdbcSource", "connection.url": url,
        "mode": "incrementing", "table.include.list": "orders", "topic.prefix": "pg-",
        "poll.interval.ms": 200, "query.retry.attempts": 0, "connection.attempts": 1,
        "connection.backoff.ms": 100})))
    wait_until(lambda: offsets(w, "outage").get("orders") == {"incrementing": 100},
               timeout=180, interval=0.5, message="the orders read")
    proxy.down()
    st = wait_until(lambda: (s := w.status("outage"))["tasks"] and
                    s["tasks"][0]["state"] == "FAILED" and s, timeout=120,
                    message="the source FAILED")
    trace = st["tasks"][0]["trace"]
    assert "Tolerance exceeded" not in trace, trace
    assert "Failed reading from the source (poll)" in trace, trace
    assert "Reading orders failed" in trace, trace
