"""JdbcSink's configuration: Confluent's keys and kctl's own, the combinations a key alone
cannot judge, and the errors the sink raises."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kctl.api import (
    ConfigDef,
    ConfigType,
    ConnectError,
    DataError,
    Importance,
    NonEmptyString,
    Range,
    ValidString,
)
from kctl.connectors.jdbc._common import connection_config_def
from kctl.connectors.jdbc._confluent import confluent_problems, sink_config_def

INSERT, UPSERT, UPDATE = "insert", "upsert", "update"
PK_NONE, PK_KAFKA, PK_RECORD_KEY, PK_RECORD_VALUE = "none", "kafka", "record_key", "record_value"
AT_LEAST_ONCE, EXACTLY_ONCE = "at_least_once", "exactly_once"
STAGE_AUTO, STAGE_COPY, STAGE_SPARK = "auto", "copy", "spark"
KAFKA_PK_DEFAULTS = ("__connect_topic", "__connect_partition", "__connect_offset")
KEY_PK_DEFAULT = "__connect_key"

WRITES_GROUP, DELIVERY_GROUP = "Writes", "Delivery"
# the name users know the sink by: its errors are found there (status traces and DLQ
# headers carry it) and its modules log under it
SINK_MODULE = "kctl.connectors.jdbc.sink"

CONFIG_DEF = connection_config_def().merge(
    ConfigDef()
    .define("table.name.format", ConfigType.STRING, "${topic}", NonEmptyString(),
            Importance.MEDIUM, "The table a topic's records go to; ${topic} is replaced by "
            "the topic's name. `schema.table` names a table in another schema.",
            group=WRITES_GROUP)
    .define("insert.mode", ConfigType.STRING, INSERT, ValidString.in_(INSERT, UPSERT, UPDATE),
            Importance.HIGH, "insert: plain INSERTs. upsert: insert or update by primary key "
            "(INSERT ... ON CONFLICT / ON DUPLICATE KEY UPDATE, one statement per batch). "
            "update: UPDATE existing rows by primary key.", group=WRITES_GROUP)
    .define("pk.mode", ConfigType.STRING, PK_NONE,
            ValidString.in_(PK_NONE, PK_KAFKA, PK_RECORD_KEY, PK_RECORD_VALUE), Importance.HIGH,
            "Where the primary key comes from: none; kafka (topic, partition, offset "
            "columns); record_key (the key's fields, or the key itself); record_value (fields "
            "of the value).", group=WRITES_GROUP)
    .define("pk.fields", ConfigType.LIST, "", None, Importance.MEDIUM,
            "kafka: the three column names (default __connect_topic, __connect_partition, "
            "__connect_offset). record_key: the key fields to use (empty: all), or the "
            "column name for a primitive key (default __connect_key). record_value: the value "
            "fields that form the key (empty: all).", group=WRITES_GROUP)
    .define("fields.whitelist", ConfigType.LIST, "", None, Importance.MEDIUM,
            "Value fields to write (empty: all). Key columns are always written.",
            group=WRITES_GROUP)
    .define("auto.create", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Create a missing table from the record schema (key columns form the primary "
            "key).", group=WRITES_GROUP)
    .define("auto.evolve", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Follow a value schema that evolves: add a column for each new optional field "
            "(nullable; a new required field without a default fails the task), and widen a "
            "column whose type no longer holds its field where the database can without "
            "loss (integer -> bigint, -> double precision, or on PostgreSQL a bigint -> "
            "numeric; a decimal's digits; a number that became text -> text; SQLite's "
            "columns take any value). Without it, or where the database cannot (MariaDB's "
            "bigint against a double), a batch whose table lacks a column or whose column "
            "is too narrow fails the task naming the table and column, before anything is "
            "written.", group=WRITES_GROUP)
    .define("delete.enabled", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Tombstones (null values) delete the row of their key; needs "
            "pk.mode=record_key.", group=WRITES_GROUP)
    .define("batch.size", ConfigType.INT, 100_000, Range.at_least(1), Importance.MEDIUM,
            "Records per batch and table. Each batch is one Spark job (0.1-0.2 s of JVM time "
            "however small) and one transaction, so batches are large.", group=WRITES_GROUP)
    .define("batch.max.wait.ms", ConfigType.LONG, 2000, Range.at_least(0), Importance.LOW,
            "Write a table's buffered records once the oldest has waited this long (checked "
            "as records arrive; offset commits write everything buffered).",
            group=WRITES_GROUP)
    .define("staging.method", ConfigType.STRING, STAGE_AUTO,
            ValidString.in_(STAGE_AUTO, STAGE_COPY, STAGE_SPARK), Importance.LOW,
            "How a batch reaches the task's staging table before one statement merges it: "
            "copy (PostgreSQL's COPY FROM STDIN of the batch as CSV: no Spark job, 10-20x "
            "faster), spark (Spark's JDBC writer), auto (copy on PostgreSQL, spark "
            "elsewhere).", group=WRITES_GROUP)
    .define("max.retries", ConfigType.INT, 10, Range.at_least(0), Importance.MEDIUM,
            "Attempts at a batch that fails for a passing reason (a lost connection, a "
            "deadlock, a serialization failure) before the task fails.", group=WRITES_GROUP)
    .define("retry.backoff.ms", ConfigType.INT, 3000, Range.at_least(0), Importance.MEDIUM,
            "Wait before a batch is attempted again.", group=WRITES_GROUP)
    .define("delivery.guarantee", ConfigType.STRING, AT_LEAST_ONCE,
            ValidString.in_(AT_LEAST_ONCE, EXACTLY_ONCE), Importance.HIGH,
            "at_least_once: offsets are committed once rows are written (a crash may write "
            "some rows again). exactly_once: each batch commits with the offsets it covers "
            "in one database transaction, and a task resumes from the database's offsets.",
            group=DELIVERY_GROUP)
    .define("exactly.once.offsets.table", ConfigType.STRING, "__kctl_sink_offsets",
            NonEmptyString(), Importance.LOW,
            "The table exactly_once keeps consumer offsets in (created when missing).",
            group=DELIVERY_GROUP)
).merge(sink_config_def())  # Confluent's other keys: accepted, or refused with the reason


class JdbcSinkError(ConnectError):
    """The task cannot go on: the database is unreachable or refuses the login, the driver
    is missing, a table does not fit the records. The message is one line, without the
    password."""

    __module__ = SINK_MODULE


class RowRejected(DataError):
    """The database rejected one row; the message is the database's own."""

    __module__ = SINK_MODULE


def config_problems(props: Mapping[str, Any]) -> dict[str, str]:
    """Combinations a key alone cannot judge, by the key to blame."""
    def get(k: str, default: str) -> str:
        return str(props.get(k) if props.get(k) is not None else default).strip().lower()

    out: dict[str, str] = {}
    pk_mode, mode = get("pk.mode", PK_NONE), get("insert.mode", INSERT)
    if get("delete.enabled", "false") == "true" and pk_mode != PK_RECORD_KEY:
        out["delete.enabled"] = (f"delete.enabled=true needs pk.mode=record_key (tombstones "
                                 f"name the row to delete by their key), not {pk_mode}")
    if mode in (UPSERT, UPDATE) and pk_mode == PK_NONE:
        out["pk.mode"] = f"insert.mode={mode} needs a primary key: set pk.mode"
    fields = [f for f in str(props.get("pk.fields") or "").split(",") if f.strip()]
    if pk_mode == PK_KAFKA and fields and len(fields) != 3:
        out["pk.fields"] = ("pk.mode=kafka takes three column names (topic, partition, "
                            f"offset), got {len(fields)}")
    method = get("staging.method", STAGE_AUTO)
    url = str(props.get("connection.url") or "")
    if method == STAGE_COPY and url and not url.lower().startswith("jdbc:postgresql:"):
        out["staging.method"] = ("staging.method=copy needs PostgreSQL (COPY FROM STDIN); "
                                 "use auto or spark for this database")
    if pk_mode == PK_NONE and fields:
        out["pk.fields"] = "pk.fields needs a pk.mode other than none"
    return {**confluent_problems(props, source=False), **out}
