"""The example plugins (examples/plugins/*) import as their installed packages would."""

from __future__ import annotations

import sys
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[2] / "examples" / "plugins"
for project in sorted(PLUGINS.iterdir()):
    if project.is_dir() and str(project) not in sys.path:
        sys.path.insert(0, str(project))
