"""JDBC connectors on Spark: JdbcSource (tables -> records) and JdbcSink (records -> tables)."""

from kctl.connectors.jdbc.sink import JdbcSinkConnector, JdbcSinkTask

__all__ = ["JdbcSinkConnector", "JdbcSinkTask"]
