#!/usr/bin/env bash
# The static gate: ruff over everything, and mypy --strict over the modules pyproject.toml's
# [tool.mypy] lists. Fails on the first lint or type error.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m ruff check .
python3 -m mypy
