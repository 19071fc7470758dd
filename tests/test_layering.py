"""The layering of docs/ARCHITECTURE.md is a contract (`.importlinter`), checked here.

The repository keeps it; a copy of the package with one import that crosses a layer
upward, a connector reaching into the runtime, the group protocol taking a thread, or REST
reaching past the herder into a store or a Kafka client, breaks it, and the report names
the offending import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())", "--no-cache"]


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([*LINT, str(root / ".importlinter")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_repository_keeps_every_import_contract():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "kctl", tmp_path / "kctl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def add_import(root: Path, module: str, line: str) -> None:
    path = root / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}\n")


@pytest.mark.parametrize(
    ("module", "line", "report"),
    [
        ("kctl.storage.offsets", "import kctl.runtime.worker",
         "kctl.storage is not allowed to import kctl.runtime"),
        ("kctl.connectors.file.source", "import kctl.runtime.worker",
         "kctl.connectors is not allowed to import kctl.runtime"),
        ("kctl.connectors.file.sink", "import kctl.states",
         "kctl.connectors is not allowed to import kctl.states"),
        ("kctl.connectors.jdbc.source", "from kctl.errors import ConfigError",
         "kctl.connectors is not allowed to import kctl.errors"),
        ("kctl.group.protocol", "import threading",
         "kctl.group is not allowed to import threading"),
        ("kctl.group.assignors.consumer", "import importlib.metadata",
         "kctl.group is not allowed to import importlib"),
        ("kctl.states", "import kctl.api",
         "kctl.states is not allowed to import kctl.api"),
        ("kctl.rest.rebalances", "from kctl.transport.group_admin import describe_group",
         "kctl.rest is not allowed to import kctl.transport"),
        ("kctl.rest.app", "from kctl.storage.status import StatusBackingStore",
         "kctl.rest is not allowed to import kctl.storage"),
        ("kctl.runtime.worker", "import kctl.testing",
         "kctl.runtime is not allowed to import kctl.testing"),
        ("kctl.cli.plugins", "import kctl.testing",
         "kctl.cli is not allowed to import kctl.testing"),
    ],
)
def test_a_layering_violation_breaks_the_contract(copy: Path, module: str, line: str,
                                                  report: str):
    add_import(copy, module, line)
    result = lint(copy)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert report in result.stdout, result.stdout
