#!/usr/bin/env bash
# Set up kctl and run the main job end to end on the embedded defaults (no server needed):
# three files (text, csv, json lines) -> FileSource -> embedded log -> FileSink (exactly once).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e . 2>&1 | grep -v "Running pip as the 'root' user" || true
exec python3 examples/quickstart.py "$@"
