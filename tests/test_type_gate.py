"""The type gate (scripts/check.sh): mypy --strict over the modules pyproject.toml lists.

The repository passes it; a copy of the package with one type error in a gated module
fails it, and the report names the file and the error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mypy(root: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache)], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_repository_passes_the_type_gate(tmp_path: Path):
    result = mypy(ROOT, tmp_path / "cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_type_error_in_a_gated_module_fails_the_gate(tmp_path: Path):
    shutil.copytree(ROOT / "kctl", tmp_path / "kctl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    protocol = tmp_path / "kctl" / "group" / "protocol.py"
    protocol.write_text(protocol.read_text()
                        + "\n\ndef generation_of(member: GroupMember[int]) -> str:\n"
                          "    return member.generation\n")
    result = mypy(tmp_path, tmp_path / "cache")
    assert result.returncode != 0
    assert "kctl/group/protocol.py" in result.stdout, result.stdout
    assert 'Incompatible return value type (got "int", expected "str")' in result.stdout
