"""docs/configuration.md and README.md's configuration block are generated and up to date."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kctl import docs
from kctl.docs import BEGIN, END, REGENERATE, render_configuration, render_readme_block
from kctl.runtime.worker_config import WORKER_CONFIG
from kctl.transforms import chain

REPO = Path(__file__).resolve().parents[1]
CONFIGURATION = REPO / "docs" / "configuration.md"
README = REPO / "README.md"
STALE = f"is stale: run `{REGENERATE}` and commit the result"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl.docs", *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=120)


@pytest.fixture(scope="module")
def configuration() -> str:
    return render_configuration()


def test_configuration_md_is_up_to_date(configuration):
    assert CONFIGURATION.is_file(), f"docs/configuration.md is missing: run `{REGENERATE}`"
    assert CONFIGURATION.read_bytes().decode("utf-8") == configuration, (
        f"docs/configuration.md {STALE}")


def test_readme_block_is_up_to_date():
    readme = README.read_bytes().decode("utf-8")
    assert readme.count(BEGIN) == 1 and readme.count(END) == 1
    block = readme.split(BEGIN + "\n", 1)[1].split(END, 1)[0]
    assert block == render_readme_block(), f"README.md's configuration block {STALE}"


def test_rendering_is_deterministic(configuration):
    assert render_configuration() == configuration
    assert render_readme_block() == render_readme_block()
    for text in (configuration, render_readme_block()):
        assert " at 0x" not in text
        for machine_path in (str(REPO), tempfile.gettempdir(), str(Path.home())):
            if len(machine_path) > 1:
                assert machine_path not in text


def test_output_does_not_depend_on_the_machine(tmp_path):
    """Another home directory and state dir (the state.dir default) change nothing."""
    env = {**os.environ, "HOME": str(tmp_path / "home"),
           "KCTL_STATE_DIR": str(tmp_path / "state")}
    out = _run("--check", env=env)
    assert out.returncode == 0, out.stderr


def test_every_worker_key_is_documented(configuration):
    for name in WORKER_CONFIG.names():
        assert f"| `{name}` |" in configuration, name
    assert "`~/.kctl/state`" in configuration


def test_every_builtin_transform_and_predicate_has_a_section(configuration):
    sections = {line for line in configuration.splitlines() if line.startswith("### ")}
    for alias in chain._TRANSFORM_CLASSES:
        assert f"### `{alias}`" in sections, alias
    for alias in chain._PREDICATE_CLASSES:
        assert f"### `{alias}`" in sections, alias


def test_every_section_is_there(configuration):
    headings = [line for line in configuration.splitlines() if line.startswith("## ")]
    assert headings == ["## Worker", "## Connectors (common)", "## Sink connectors",
                        "## Source connectors", "## Converters", "## FileSource",
                        "## FileSink", "## JdbcSource", "## JdbcSink", "## Transforms", "## Predicates"]
    assert REGENERATE in configuration.split("## Worker")[0]


# --- the command ----------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path) -> Path:
    """A copy of the generated files, as in the repository."""
    (tmp_path / "docs").mkdir()
    shutil.copy(CONFIGURATION, tmp_path / "docs" / "configuration.md")
    shutil.copy(README, tmp_path / "README.md")
    return tmp_path


def test_check_passes_on_the_repo():
    out = _run("--check")
    assert out.returncode == 0, out.stderr


def test_check_fails_on_a_stale_configuration_md(root):
    assert _run("--check", "--root", str(root)).returncode == 0
    path = root / "docs" / "configuration.md"
    path.write_text(path.read_text().replace("`bootstrap.servers`", "`bootstrap.server`"))
    out = _run("--check", "--root", str(root))
    assert out.returncode == 1
    assert "configuration.md" in out.stderr and "README.md" not in out.stderr
    assert REGENERATE in out.stderr


def test_check_fails_on_a_stale_readme_block(root):
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace(END, "| `old.key` | string |\n" + END))
    (root / "docs" / "configuration.md").unlink()
    out = _run("--check", "--root", str(root))
    assert out.returncode == 1
    assert "README.md" in out.stderr and "configuration.md" in out.stderr


def test_write_regenerates_only_the_block(root):
    readme = root / "README.md"
    original = readme.read_text()
    readme.write_text(original.replace(END, "stale line\n" + END))
    assert docs.main(["--root", str(root)]) == 0
    assert readme.read_text() == original
    assert docs.main(["--check", "--root", str(root)]) == 0


def test_readme_without_markers_is_an_error(root):
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace(BEGIN + "\n", ""))
    out = _run("--check", "--root", str(root))
    assert out.returncode == 2
    assert "BEGIN GENERATED" in out.stderr
