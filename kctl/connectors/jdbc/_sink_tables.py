"""JdbcSink's target tables: their columns as the database reports them, created
(auto.create) or widened (auto.evolve) so a batch's columns all exist."""

from __future__ import annotations

import logging

from kctl.connectors.jdbc import _sink_sql as sql
from kctl.connectors.jdbc._sink_config import SINK_MODULE, JdbcSinkError
from kctl.connectors.jdbc._sink_db import Session
from kctl.connectors.jdbc._sink_sql import Column

log = logging.getLogger(SINK_MODULE)  # the sink's own logger, as its settings name it


class Tables:
    """The target tables this task writes, their columns cached by normalised name."""

    def __init__(self, db: Session, *, auto_create: bool, auto_evolve: bool,
                 table_types: tuple[str, ...]) -> None:
        self.db = db
        self.dialect = db.dialect
        self.auto_create = auto_create
        self.auto_evolve = auto_evolve
        self.table_types = table_types
        self._columns: dict[str, dict[str, str] | None] = {}  # table -> normalised -> name

    def _norm(self, name: str) -> str:
        return name if self.dialect.name == "postgresql" else name.lower()

    def columns(self, table: str) -> dict[str, str] | None:
        """The table's columns by normalised name; None when it does not exist."""
        q, params = sql.table_columns_query(self.dialect, table)
        rows = self.db.query(q, params)
        return {self._norm(r[0]): r[0] for r in rows} if rows else None

    def ensure(self, table: str, columns: list[Column]) -> None:
        """Create (auto.create) or widen (auto.evolve) the table so every column exists."""
        known = self._columns.get(table)
        if known is not None and all(self._norm(c.name) in known for c in columns):
            return
        first = table not in self._columns
        known = self._columns[table] = self.columns(table)
        if known is not None and first and "VIEW" not in self.table_types:
            q, params = sql.table_is_view_query(self.dialect, table)
            if self.db.query(q, params):  # as Confluent's: views are not among table.types
                del self._columns[table]
                raise JdbcSinkError(f"{table} is a view and table.types "
                                    f"({','.join(self.table_types)}) does not list VIEW")
        if known is None:
            if not self.auto_create:
                raise JdbcSinkError(f"Table {table} does not exist and auto.create is false")
            log.info("Creating table %s", table)
            try:
                self.db.ddl(sql.create_table(self.dialect, table, columns))
            except JdbcSinkError:
                if self.columns(table) is None:  # not a race with another task
                    raise
            known = self._columns[table] = self.columns(table) or {}
        missing = [c for c in columns if self._norm(c.name) not in known]
        if not missing:
            return
        if not self.auto_evolve:
            raise JdbcSinkError(f"Table {table} has no column for "
                                f"{', '.join(c.name for c in missing)} and auto.evolve is false")
        for c in missing:
            if c.key:
                raise JdbcSinkError(f"Table {table} has no column for key field {c.name}; "
                                    "auto.evolve adds only value columns")
            if not (c.schema.optional or c.schema.default is not None):
                raise JdbcSinkError(f"Table {table} has no column for {c.name}, a required "
                                    "field without a default: auto.evolve adds only optional "
                                    "fields (as nullable columns)")
        log.info("Adding columns %s to %s", [c.name for c in missing], table)
        self.db.ddl(*(sql.add_column(self.dialect, table, c) for c in missing))
        self._columns[table] = self.columns(table) or {}
