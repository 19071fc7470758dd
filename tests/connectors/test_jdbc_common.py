"""The dialects the JDBC connectors share, on each real database through Spark and DB-API."""

from __future__ import annotations

import pytest

from kctl.connectors.jdbc._common import dialect_for, driver_loaded, redact_url
from kctl.errors import ConfigError
from kctl.runtime.spark import driver_jars


def test_a_url_names_its_dialect_or_the_problem():
    assert dialect_for("jdbc:postgresql://h/db").name == "postgresql"
    assert dialect_for("jdbc:mysql://h/db").name == "mariadb"
    with pytest.raises(ConfigError, match="Unsupported database 'oracle'"):
        dialect_for("jdbc:oracle:thin:@h:1521:x")
    with pytest.raises(ConfigError, match="Not a JDBC URL"):
        dialect_for("postgresql://h/db?password=s3cret")


def test_passwords_in_urls_never_reach_messages():
    assert "s3cret" not in redact_url("jdbc:postgresql://h/db?user=u&password=s3cret&ssl=1")


def test_a_urls_login_goes_to_spark_as_options_and_to_the_driver_as_its_login():
    """Spark's JDBC drivers would read `user:pw@` as part of the host: Spark gets the URL
    without it and the login as options; connection.user/password win over it, and a
    `user=` parameter in the URL too (it stays in the URL Spark gets)."""
    url = "jdbc:postgresql://al%40ice:p%3Aw%40rd@db.example:5433/sales?ssl=true"
    pg = dialect_for(url)
    assert pg.spark_options(url) == {
        "url": "jdbc:postgresql://db.example:5433/sales?ssl=true",
        "driver": "org.postgresql.Driver", "user": "al@ice", "password": "p:w@rd"}
    assert pg.spark_options(url, "bob", "secret")["user"] == "bob"
    assert pg.spark_options(url, "bob", "secret")["password"] == "secret"
    spec = pg.parse(url)
    assert (spec.host, spec.port, spec.database) == ("db.example", 5433, "sales")
    assert (spec.params["user"], spec.params["password"]) == ("al@ice", "p:w@rd")
    assert pg.parse("jdbc:postgresql://u:pw@h/db?user=v").params["user"] == "v"
    maria = "jdbc:mariadb://root:pw@127.0.0.1:3306/x"
    assert dialect_for(maria).spark_options(maria)["url"] == \
        "jdbc:mysql://127.0.0.1:3306/x?permitMysqlScheme"
    assert "pw" not in redact_url(maria) and "p%3Aw%40rd" not in redact_url(url)


def test_installed_drivers_join_spark_jars(tmp_path):
    (tmp_path / "postgresql.jar").write_bytes(b"")
    (tmp_path / "mine.jar").write_bytes(b"")
    conf = {"spark.jars": str(tmp_path / "mine.jar")}
    assert driver_jars(conf, str(tmp_path)) == [str(tmp_path / "mine.jar"),
                                                str(tmp_path / "postgresql.jar")]
    assert driver_jars({**conf, "spark.jdbc.driver.lookup": "false"}, str(tmp_path)) == [
        str(tmp_path / "mine.jar")]


@pytest.mark.spark
def test_names_like_sql_stay_names(jdbc_db, engine):
    d = dialect_for(jdbc_db.url)
    table, col = d.table('t x"; DROP TABLE t; --'), d.quote_identifier('na"me`')
    jdbc_db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, {col} VARCHAR(20))")
    spark = engine.spark()
    assert driver_loaded(spark, d)
    df = spark.createDataFrame([(1, "a"), (2, "b")], ["id", 'na"me`'])
    df.write.format("jdbc").options(**d.spark_options(jdbc_db.url), dbtable=table) \
        .mode("append").save()
    conn = d.connect(jdbc_db.url)
    cur = conn.cursor()
    cur.execute(f"SELECT {col} FROM {table} ORDER BY id")
    assert [r[0] for r in cur.fetchall()] == ["a", "b"]
    conn.close()
    back = spark.read.format("jdbc").options(**d.spark_options(jdbc_db.url),
                                             dbtable=table).load()
    assert back.count() == 2
