"""JDBC connectors on Spark: JdbcSource (tables -> records) and JdbcSink (records -> tables)."""

from kctl.connectors.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from kctl.connectors.jdbc.source import JdbcSourceConnector, JdbcSourceTask

__all__ = ["JdbcSinkConnector", "JdbcSinkTask", "JdbcSourceConnector", "JdbcSourceTask"]
