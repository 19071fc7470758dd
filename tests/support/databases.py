"""Real databases for the JDBC tests: PostgreSQL and MariaDB on loopback, SQLite in a file.

A server already answering on its usual port (5432 trust auth, 3306 root without a
password) is reused; otherwise a throwaway one is started from the installed binaries in a
temporary directory on a free port and stopped at the end of the session. Each test gets
its own database (dropped afterwards), so tests never see each other's tables.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import pytest

from support.broker import free_port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 0.5):
            return True
    except OSError:
        return False


def _wait(port: int, proc: subprocess.Popen | None, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if _answers(port):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start listening on {port}")


@dataclass
class Server:
    """A database server on loopback; `database()` makes a fresh database in it."""

    kind: str  # postgresql | mariadb
    port: int
    user: str
    proc: subprocess.Popen | None = None
    datadir: str | None = None

    def connect(self, database: str | None = None) -> Any:
        if self.kind == "postgresql":
            import psycopg

            return psycopg.connect(host="127.0.0.1", port=self.port, user=self.user,
                                   dbname=database or "postgres", autocommit=True)
        import pymysql

        return pymysql.connect(host="127.0.0.1", port=self.port, user=self.user, password="",
                               database=database, autocommit=True)

    def url(self, database: str) -> str:
        if self.kind == "postgresql":
            return f"jdbc:postgresql://127.0.0.1:{self.port}/{database}?user={self.user}"
        return f"jdbc:mariadb://127.0.0.1:{self.port}/{database}?user={self.user}"

    @contextmanager
    def database(self) -> Iterator[Database]:
        name = "kctl_" + uuid.uuid4().hex[:10]
        with self.connect() as c:
            c.cursor().execute(f"CREATE DATABASE {name}")
        try:
            yield Database(self, name)
        finally:
            with self.connect() as c:
                if self.kind == "postgresql":
                    c.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                else:
                    c.cursor().execute(f"DROP DATABASE IF EXISTS {name}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.datadir:
            shutil.rmtree(self.datadir, ignore_errors=True)


@dataclass
class Database:
    """One database of a server (or an SQLite file): its JDBC URL and a DB-API handle."""

    server: Server | None
    name: str

    @property
    def url(self) -> str:
        if self.server is None:
            return f"jdbc:sqlite:{self.name}"
        return self.server.url(self.name)

    def connect(self) -> Any:
        if self.server is None:
            import sqlite3

            return sqlite3.connect(self.name, isolation_level=None, timeout=30)
        return self.server.connect(self.name)

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        conn = self.connect()
        try:
            cur = conn.cursor()
            cur.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []
        finally:
            conn.close()

    def execute(self, *statements: str) -> None:
        conn = self.connect()
        try:
            cur = conn.cursor()
            for s in statements:
                cur.execute(s)
            if self.server is None:
                return
            conn.commit()
        finally:
            conn.close()


def start_postgres() -> Server:
    """The PostgreSQL on 5432 if one answers, else a throwaway cluster (initdb) on a free port."""
    if _answers(5432):
        return Server("postgresql", 5432, "postgres")
    bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    if not bindirs:
        _missing("PostgreSQL", 5432, "postgresql")
    bindir = bindirs[-1]
    datadir = tempfile.mkdtemp(prefix="kctl-pg-")
    os.chmod(datadir, 0o777)
    as_user = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_user, f"{bindir}/initdb", "-D", datadir, "-U", "postgres",
                    "-A", "trust"], check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen([*as_user, f"{bindir}/postgres", "-D", datadir, "-p", str(port),
                             "-k", datadir, "-c", "listen_addresses=127.0.0.1",
                             "-c", "fsync=off"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(port, proc, "postgres")
    return Server("postgresql", port, "postgres", proc, datadir)


def start_mariadb() -> Server:
    """The MariaDB on 3306 if one answers, else a throwaway server on a free port."""
    if _answers(3306):
        return Server("mariadb", 3306, "root")
    if not (shutil.which("mariadb-install-db") and os.path.exists("/usr/sbin/mariadbd")):
        _missing("MariaDB", 3306, "mariadb-server")
    datadir = tempfile.mkdtemp(prefix="kctl-maria-")
    user = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run(["mariadb-install-db", f"--datadir={datadir}", *user,
                    "--auth-root-authentication-method=normal"],
                   check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen(["/usr/sbin/mariadbd", f"--datadir={datadir}", *user,
                             f"--port={port}", "--bind-address=127.0.0.1",
                             f"--socket={datadir}/mysqld.sock", "--skip-grant-tables"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(port, proc, "mariadbd")
    return Server("mariadb", port, "root", proc, datadir)


def _missing(what: str, port: int, package: str) -> NoReturn:
    pytest.fail(f"{what} neither answers on 127.0.0.1:{port} nor is installed: run "
                "`bash scripts/test-deps.sh` (as root it installs what the tests need, else it "
                f"prints the command), or `apt-get install {package}`", pytrace=False)
