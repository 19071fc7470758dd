"""JDBC connectors on Spark: JdbcSource (tables -> records) and JdbcSink (records -> tables)."""
