"""JdbcSource on a table altered while it is read: a column added later comes with the
next rows, under a new version of the table's value schema; the rows read before keep
the schema they had."""

from __future__ import annotations

import pytest
from file_support import OffsetStore
from support.waiting import wait_until
from test_jdbc_source import drain, insert, int_pk, props_for, start_task, val

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
