"""What JdbcSink says names what the user knows: a row MariaDB refuses is reported with the
record's field (its target column), never the staging table's internal column names
(`c12`); and a URL's `user:password@` is the login the connectors use (Spark's JDBC
drivers do not read it, so kctl hands it to them as options)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pytest
from file_support import OffsetStore
from test_jdbc_exact_values import read, write
from test_jdbc_sink import Reporter, start_task
from test_jdbc_source import drain, props_for, val
from test_jdbc_source import start_task as start_source

from kctl.api import ConnectError, SchemaBuilder
from kctl.api.data import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA

pytestmark = pytest.mark.spark


def test_a_row_mariadb_refuses_names_the_users_column(engine, mariadb_db):
    """In a database whose default character set is latin1, an emoji cannot be staged:
    MariaDB refuses it naming the staging table's column (`c1`); the record's error names
    the field `note` and the table instead."""
    database = mariadb_db.url.rsplit("/", 1)[1].split("?")[0]
    mariadb_db.execute(f"ALTER DATABASE `{database}` CHARACTER SET latin1")
    reporter = Reporter()
    task, _ = start_task(engine, mariadb_db, reporter)
    try:
        schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
                  .field("note", OPTIONAL_STRING_SCHEMA).build())
        topic = write(task, schema, [{"note": "plain"}, {"note": "party \U0001f389"}])
        assert read(mariadb_db, topic, "note") == {0: "plain"}
        [(record, error)] = reporter.reported
        assert record.value["id"] == 1
        assert f"`note` (of {topic})" in str(error), str(error)
        assert "c1" not in str(error).replace(topic, "")
    finally:
        task.stop()


@pytest.fixture
def login(mariadb_db: Any) -> Iterator[tuple[str, str]]:
    """A MariaDB user with a password (the test server's root has none), allowed on the
    story's database."""
    user, password = "kctl_" + uuid.uuid4().hex[:8], "p@ss:" + uuid.uuid4().hex[:6]
    database = mariadb_db.url.rsplit("/", 1)[1].split("?")[0]
    mariadb_db.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'",
                       f"GRANT ALL ON `{database}`.* TO '{user}'@'%'")
    yield user, password
    mariadb_db.execute(f"DROP USER '{user}'@'%'")


def with_login(url: str, user: str, password: str) -> str:
    """jdbc:mariadb://host/db?user=root as jdbc:mariadb://user:password@host/db
    (percent-encoded; a `user=` parameter would win over it)."""
    scheme, rest = url.split("?", 1)[0].split("://", 1)
    return f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{rest}"


def test_a_urls_user_and_password_are_the_login_of_both_connectors(engine, mariadb_db, login):
    """`jdbc:mariadb://user:pw@host/db` was accepted and its password silently not used;
    now the sink (its DB-API statements and Spark's staging writes) and the source (its
    metadata queries and Spark's reads) log in with it, and a wrong one is refused,
    saying so without showing it."""
    user, password = login
    url = with_login(mariadb_db.url, user, password)
    sink = SimpleNamespace(url=url, query=mariadb_db.query)
    reporter = Reporter()
    task, _ = start_task(engine, sink, reporter, **{"staging.method": "spark"})
    try:
        schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
                  .field("note", OPTIONAL_STRING_SCHEMA).build())
        topic = write(task, schema, [{"note": "written"}, {"note": "as the user"}])
    finally:
        task.stop()
    assert read(mariadb_db, topic, "note") == {0: "written", 1: "as the user"}
    assert reporter.reported == []
    records = drain_table(engine, url, topic)
    assert sorted(val(r)["note"] for r in records) == ["as the user", "written"]

    wrong = with_login(mariadb_db.url, user, "not-" + password)
    with pytest.raises(ConnectError) as failed:
        start_task(engine, SimpleNamespace(url=wrong), Reporter())
    assert "Access denied" in str(failed.value) and user in str(failed.value)
    assert password not in str(failed.value)


def drain_table(engine: Any, url: str, table: str) -> list[Any]:
    task = start_source(engine, OffsetStore(), props_for(SimpleNamespace(url=url)), [table])
    try:
        return drain(task)
    finally:
        task.stop()
