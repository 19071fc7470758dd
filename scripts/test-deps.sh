#!/usr/bin/env bash
# What the tests need from the system, installed when it is missing: Java for Spark; zsh and
# fish for the shell-completion tests; Chromium for the timeline page; the PostgreSQL and MariaDB servers and the JDBC drivers
# (PostgreSQL, SQLite, MariaDB) the JDBC connectors' tests load into Spark; the Mosquitto
# MQTT broker and the Redis server the example plugins (examples/plugins/) are tested with. Installs with
# apt-get when it runs as root on Debian/Ubuntu; otherwise it stops at once and prints the
# one command that installs what is missing. Then it starts the database servers on loopback
# (the test fixtures start throwaway ones from the installed binaries when none answers).
# Called by scripts/test.sh and so by .ci/run; KCTL_SKIP_SYSTEM_DEPS=1 skips it.
set -euo pipefail
[ "${KCTL_SKIP_SYSTEM_DEPS:-}" = 1 ] && exit 0
export DEBIAN_FRONTEND=noninteractive

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
command -v fish >/dev/null 2>&1 || missing+=(fish)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
[ -e /usr/share/java/postgresql.jar ] || missing+=(libpostgresql-jdbc-java)
[ -e /usr/share/java/sqlite-jdbc.jar ] || missing+=(libxerial-sqlite-jdbc-java)
[ -e /usr/share/java/mariadb-java-client.jar ] || missing+=(libmariadb-java)
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || missing+=(mosquitto)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# headless Chromium renders the rebalance timeline page in its tests
command -v chromium >/dev/null 2>&1 || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
  install="apt-get update && apt-get install -y ${missing[*]}"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test-deps: installing ${missing[*]}" >&2
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "test-deps: the tests need ${missing[*]}; install them with:" >&2
    if command -v apt-get >/dev/null 2>&1; then
      echo "  sudo sh -c '$install'" >&2
    else
      echo "  (Debian package names; on another system install their equivalents)" >&2
      echo "  $install" >&2
    fi
    exit 1
  fi
fi

# The servers on loopback; a failure here only costs the fixtures a start (the MQTT and
# Redis tests need theirs running).
if ! (echo >/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  service postgresql start >/dev/null 2>&1 || for v in /usr/lib/postgresql/*; do
    pg_ctlcluster --skip-systemctl-redirect "${v##*/}" main start >/dev/null 2>&1 && break
  done || true
fi
if ! (echo >/dev/tcp/127.0.0.1/3306) 2>/dev/null; then
  service mariadb start >/dev/null 2>&1 || true
fi
if ! (echo >/dev/tcp/127.0.0.1/1883) 2>/dev/null; then
  { mkdir -p /run/mosquitto && chown mosquitto: /run/mosquitto; } 2>/dev/null || true
  PATH="$PATH:/usr/sbin" mosquitto -d -c /etc/mosquitto/mosquitto.conf >/dev/null 2>&1 || true
fi
if ! (echo >/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null 2>&1 || true
fi
