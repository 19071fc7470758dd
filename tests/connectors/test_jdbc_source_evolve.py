"""JdbcSource on a table altered while it is read: a column added later comes with the
next rows, under a new version of the table's value schema; the rows read before keep
the schema they had."""

from __future__ import annotations

import pytest
from file_support import OffsetStore
from support.waiting import wait_until
from test_jdbc_source import drain, insert, int_pk, props_for, start_task, val

from kctl.connectors.jdbc import JdbcSourceTask

pytestmark = pytest.mark.spark


def test_a_column_added_while_the_table_is_read_is_a_new_schema_version(engine, jdbc_db):
    jdbc_db.execute(f"CREATE TABLE events (id {int_pk(jdbc_db)}, what VARCHAR(20))")
    insert(jdbc_db, "events", [(1, "a"), (2, "b")], "id, what")
    store = OffsetStore()
    task = start_task(engine, store, props_for(jdbc_db, mode="incrementing"), ["events"])
    try:
        before = drain(task, store)
        jdbc_db.execute("ALTER TABLE events ADD COLUMN qty INTEGER")
        insert(jdbc_db, "events", [(3, "c", 7)], "id, what, qty")
        after = wait_until(lambda: drain(task, store), timeout=30, message="the new row")
        assert [val(r) for r in before] == [{"id": 1, "what": "a"}, {"id": 2, "what": "b"}]
        assert [val(r) for r in after] == [{"id": 3, "what": "c", "qty": 7}]
        old, new = before[0].value_schema, after[0].value_schema
        assert new.field("qty").schema.optional and old.field("qty") is None
        assert old.name == new.name and new.version == old.version + 1
    finally:
        task.stop()


def alter_after_resolution(monkeypatch, db, table: str, row: tuple) -> list[str]:
    """Arm Spark's next read of `table` to race a schema change: right after Spark resolved
    the read's columns (`_load`), and before it reads a row, the table gains `note` and a
    row with it. Returns the SQL of the reads it raced (one)."""
    raced: list[str] = []
    load = JdbcSourceTask._load

    def racing(self, t, sql, partition):
        df = load(self, t, sql, partition)  # the columns are resolved here
        if not raced:
            raced.append(sql)
            db.execute(f"ALTER TABLE {table} ADD COLUMN note VARCHAR(20)")
            insert(db, table, [row], "id, what, note")
        return df

    monkeypatch.setattr(JdbcSourceTask, "_load", racing)
    return raced


@pytest.mark.parametrize("query", [False, True], ids=["table", "query"])
def test_a_column_added_between_the_columns_and_the_rows_of_a_read_is_not_lost(
        engine, jdbc_db, monkeypatch, query):
    jdbc_db.execute(f"CREATE TABLE events (id {int_pk(jdbc_db)}, what VARCHAR(20))")
    insert(jdbc_db, "events", [(1, "a"), (2, "b")], "id, what")
    store = OffsetStore()
    props = props_for(jdbc_db, mode="incrementing")
    if query:
        props.update({"query": "SELECT * FROM events", "incrementing.column.name": "id"})
    task = start_task(engine, store, props, None if query else ["events"])
    try:
        before = drain(task, store)
        raced = alter_after_resolution(monkeypatch, jdbc_db, "events", (301, "late", "new"))
        after = wait_until(lambda: drain(task, store), timeout=30, message="row 301")
        after += drain(task, store)
        assert raced, "the schema change did not race a read"
        assert [val(r) for r in before] == [{"id": 1, "what": "a"}, {"id": 2, "what": "b"}]
        # row 301 comes with the value of the column it was written with
        assert [val(r) for r in after] == [{"id": 301, "what": "late", "note": "new"}]
        assert after[0].value_schema.field("note") is not None
        assert store.offset(after[0].source_partition) == {"incrementing": 301}
    finally:
        task.stop()
