"""What JdbcSink says names what the user knows: a row MariaDB refuses is reported with the
record's field (its target column), never the staging table's internal column names
(`c12`); and a URL's `user:password@` is the login the connectors use (Spark's JDBC
drivers do not read it, so kctl hands it to them as options)."""

from __future__ import annotations

import pytest
from test_jdbc_exact_values import read, write
from test_jdbc_sink import Reporter, start_task

from kctl.api import SchemaBuilder
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
