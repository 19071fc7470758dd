"""JdbcSink's target tables: their columns as the database reports them, created
(auto.create) or evolved (auto.evolve: columns added, and widened where the database can
without loss) so a batch's columns all exist and hold its values."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kctl.api import Schema, Type
from kctl.api.arrow import PRECISION_PARAM
from kctl.api.data import DECIMAL
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
        self._fit: set[tuple[str, tuple[Column, ...]]] = set()  # layouts whose types fit

    def _norm(self, name: str) -> str:
        return name if self.dialect.name == "postgresql" else name.lower()

    def columns(self, table: str) -> dict[str, str] | None:
        """The table's columns by normalised name; None when it does not exist."""
        q, params = sql.table_columns_query(self.dialect, table)
        rows = self.db.query(q, params)
        return {self._norm(r[0]): r[0] for r in rows} if rows else None

    def ensure(self, table: str, columns: list[Column]) -> None:
        """Create (auto.create) or evolve (auto.evolve) the table so every column exists
        and holds the batch's values."""
        known = self._columns.get(table)
        if known is not None and all(self._norm(c.name) in known for c in columns):
            self._widen(table, columns)
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
            self._widen(table, columns)
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
        self._widen(table, columns)

    def _widen(self, table: str, columns: list[Column]) -> None:
        """Widen the columns whose type does not hold the batch's field (a schema that
        evolved: int -> bigint -> numeric or double, a decimal's digits, a number become
        text), where the database can without loss; without auto.evolve, or where it
        cannot, the task fails naming the table and column. Checked once per layout."""
        layout = (table, tuple(columns))
        if self.dialect.name == "sqlite" or layout in self._fit:
            return  # SQLite's columns take any value
        q, params = sql.column_types_query(self.dialect, table)
        have = {self._norm(r[0]): DbColumn(r[0], str(r[1]), r[2], r[3],
                                           str(r[4]).upper() == "YES")
                for r in self.db.query(q, params)}
        changes: list[tuple[DbColumn, str, Column]] = []
        for c in columns:
            col = have.get(self._norm(c.name))
            if col is None:
                continue
            wider = wider_type(self.dialect.name, col, c.schema)
            if wider == "":
                raise JdbcSinkError(
                    f"Table {table} column {col.name} is {col.data_type}, which does not hold "
                    f"the field's {_describe(c.schema)} values, and {self.dialect.name} cannot "
                    "widen it without loss: change the column's type by hand")
            if wider is not None:
                changes.append((col, wider, c))
        if changes and not self.auto_evolve:
            col, wider, c = changes[0]
            raise JdbcSinkError(
                f"Table {table} column {col.name} is {col.data_type}, which does not hold "
                f"the field's {_describe(c.schema)} values, and auto.evolve is false (it "
                f"would widen the column to {wider})")
        if changes:
            log.info("Widening columns of %s: %s", table,
                     ", ".join(f"{col.name} {col.data_type} -> {w}" for col, w, _ in changes))
            self.db.ddl(*(sql.widen_column(self.dialect, table, col.name, w, col.nullable)
                          for col, w, _ in changes))
        self._fit.add(layout)


# --- widening existing columns ------------------------------------------------------------

_INT_RANK = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 3, "integer": 3, "bigint": 4}
_NEEDED_RANK = {Type.INT8: 1, Type.INT16: 2, Type.INT32: 3, Type.INT64: 4}
_INT_DIGITS = {1: 3, 2: 5, 3: 10, 4: 19}
_FLOATS = ("real", "float", "double", "double precision")
_TEXTS = ("text", "character varying", "varchar", "longtext", "mediumtext", "char",
          "character", "tinytext")


@dataclass(frozen=True)
class DbColumn:
    """A target column as information_schema describes it."""

    name: str
    data_type: str
    precision: int | None
    scale: int | None
    nullable: bool


def wider_type(dialect: str, have: DbColumn, field: Schema) -> str | None:
    """The column type that holds the field's values and every value the column holds,
    when the column's own does not and the database can widen it without loss; "" when
    it cannot; None when the column already holds the field."""
    t = have.data_type.lower()
    rank = _INT_RANK.get(t)
    maria = dialect == "mariadb"
    if field.name == DECIMAL:
        params = field.parameters or {}
        scale = int(params.get("scale", "0"))
        precision = int(params.get(PRECISION_PARAM, "0") or 0) or None
        if t in _FLOATS or t in _TEXTS:
            return None
        if rank is not None:
            have_digits, have_scale = _INT_DIGITS[rank], 0
        elif t in ("numeric", "decimal"):
            if have.precision is None:  # PostgreSQL's unconstrained numeric holds any
                return None
            have_scale = have.scale or 0
            have_digits = have.precision - have_scale
        else:
            return None
        if not maria and precision is None:
            return "NUMERIC"
        new_scale = max(have_scale, scale)
        digits = max(have_digits, (precision or 65) - scale)
        if rank is None and new_scale == have_scale and digits == have_digits:
            return None
        if maria:
            digits = min(digits, 65 - new_scale)
            return f"DECIMAL({digits + new_scale},{new_scale})"
        return f"NUMERIC({digits + new_scale},{new_scale})" if digits + new_scale <= 1000 \
            else "NUMERIC"
    needed = _NEEDED_RANK.get(field.type) if field.name is None else None
    if needed is not None:
        if rank is not None and rank < needed:
            return "BIGINT" if needed == 4 else {2: "SMALLINT", 3: "INTEGER" if not maria
                                                 else "INT"}[needed]
        if t in ("numeric", "decimal") and have.precision is not None and \
                have.precision - (have.scale or 0) < _INT_DIGITS[needed]:
            s = have.scale or 0
            return "NUMERIC" if not maria else f"DECIMAL({min(_INT_DIGITS[needed] + s, 65)},{s})"
        return None
    if field.type in (Type.FLOAT32, Type.FLOAT64) and field.name is None:
        if (rank is not None and rank <= 3) or t in ("real", "float"):
            return "DOUBLE PRECISION" if not maria else "DOUBLE"
        if rank == 4:  # a double loses a bigint beyond 2**53; a numeric keeps both
            return "" if maria else "NUMERIC"
        return None
    if field.type is Type.STRING and field.name is None:
        if rank is not None or t in _FLOATS or t in ("numeric", "decimal", "boolean"):
            return "LONGTEXT" if maria else "TEXT"  # each value as its text
        return None
    return None


def _describe(schema: Schema) -> str:
    if schema.name == DECIMAL:
        params = schema.parameters or {}
        return (f"decimal({params.get(PRECISION_PARAM, '?')},{params.get('scale', '0')})")
    return schema.type.value
