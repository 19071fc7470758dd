"""Confluent's source keys that change how rows are read, on real databases through Spark:
`validate.non.null` (nullable offset columns fail the task, as Confluent's check does),
`query.suffix` (appended to every SELECT) and `query.retry.attempts` (a read that keeps
failing is retried that many times, -1 forever)."""

from __future__ import annotations

import pytest
from file_support import OffsetStore
from support.waiting import wait_until
from test_jdbc_source import drain, ids, props_for, start_task

from kctl.api import ConnectError

pytestmark = pytest.mark.spark


def test_validate_non_null_refuses_nullable_offset_columns(engine, jdbc_db):
    ts = "TIMESTAMP(6) NULL" if jdbc_db.server and jdbc_db.server.kind == "mariadb" \
        else "TIMESTAMP"
    jdbc_db.execute(f"CREATE TABLE t (id INT PRIMARY KEY, n INT, ts {ts})")
    jdbc_db.execute("INSERT INTO t (id, n) VALUES (1, 1)")
    store = OffsetStore()
    # validate.non.null is true by default, as Confluent's (props_for turns it off)
    props = props_for(jdbc_db, mode="timestamp", timestamp_column_name="ts",
                      validate_non_null="true")
    with pytest.raises(ConnectError, match="timestamp columns ts on t because all of these "
                                           "columns are nullable"):
        start_task(engine, store, props, ["t"]).stop()
    inc = props_for(jdbc_db, mode="incrementing", incrementing_column_name="n",
                    validate_non_null="true")
    with pytest.raises(ConnectError, match="incrementing column n on t because this column "
                                           "is nullable"):
        start_task(engine, store, inc, ["t"]).stop()
    # validate.non.null=false reads it (the row whose column is null is never read)
    task = start_task(engine, store, {**inc, "validate.non.null": "false"}, ["t"])
    try:
        assert ids(drain(task, store)) == [1]
    finally:
        task.stop()


def test_query_suffix_ends_every_select(engine, postgres_db):
    postgres_db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                        "INSERT INTO t SELECT i, i FROM generate_series(1, 30) i")
    store = OffsetStore()
    # a suffix PostgreSQL accepts after a SELECT: the rows are read as before
    task = start_task(engine, store, props_for(postgres_db, mode="incrementing",
                                               query_suffix="FOR SHARE"), ["t"])
    try:
        assert sorted(ids(drain(task, store))) == list(range(1, 31))
    finally:
        task.stop()
    # one it refuses: the read fails naming it, so the suffix was really sent
    task = start_task(engine, OffsetStore(), props_for(
        postgres_db, mode="incrementing", query_suffix="NOT SQL AT ALL",
        query_retry_attempts=0, connection_backoff_ms=10), ["t"])
    try:
        with pytest.raises(ConnectError, match="syntax error"):
            wait_until(lambda: drain(task) and False, timeout=60, message="the failure")
    finally:
        task.stop()


def test_query_retry_attempts_bounds_the_retries_of_a_failing_read(engine, postgres_db):
    postgres_db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    props = props_for(postgres_db, mode="incrementing", query="SELECT id FROM t WHERE nope",
                      incrementing_column_name="id", connection_backoff_ms=10)
    for retries, reads in (("0", 1), ("2", 3)):
        task = start_task(engine, OffsetStore(), {**props, "query.retry.attempts": retries})
        try:
            with pytest.raises(ConnectError, match='column "nope" does not exist'):
                wait_until(lambda t=task: drain(t) and False, timeout=60, message="failure")
            assert task.reads == reads
        finally:
            task.stop()
    # -1 (Confluent's default): it keeps trying
    task = start_task(engine, OffsetStore(), {**props, "query.retry.attempts": "-1"})
    try:
        wait_until(lambda: drain(task) == [] and task.reads >= 5, timeout=60,
                   message="five failed reads, still running")
    finally:
        task.stop()
