"""The generated pages of the user guide (configuration, CLI and REST references, the
performance page) are up to date, and the guide builds with `mkdocs build --strict`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kctl import docs
from kctl.docs import PAGES, REGENERATE
from kctl.docs.cli_reference import render_cli_reference
from kctl.docs.configuration import render_configuration
from kctl.docs.performance import render_performance
from kctl.docs.rest_reference import openapi_document, render_rest_reference
from kctl.runtime.worker_config import WORKER_CONFIG
from kctl.transforms import chain

REPO = Path(__file__).resolve().parents[1]
CONFIGURATION = REPO / "docs" / "configuration.md"
STALE = f"is stale: run `{REGENERATE}` and commit the result"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl.docs", *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=180)


@pytest.fixture(scope="module")
def configuration() -> str:
    return render_configuration()


def test_configuration_md_is_up_to_date(configuration):
    assert CONFIGURATION.is_file(), f"docs/configuration.md is missing: run `{REGENERATE}`"
    assert CONFIGURATION.read_bytes().decode("utf-8") == configuration, (
        f"docs/configuration.md {STALE}")


def test_rendering_is_deterministic(configuration):
    assert render_configuration() == configuration
    for text in (configuration, render_cli_reference(), render_rest_reference()):
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


# --- the other references ------------------------------------------------------------------


def test_the_cli_reference_has_every_command_and_option():
    import typer

    from kctl.cli.main import app

    text = render_cli_reference()
    root = typer.main.get_command(app)
    for group_name, group in root.commands.items():
        assert f"`kctl {group_name}`" in text, group_name
        for name, command in (getattr(group, "commands", None) or {}).items():
            if getattr(command, "hidden", False):
                continue
            assert f"`kctl {group_name} {name}`" in text, (group_name, name)
            for param in command.params:
                for opt in getattr(param, "opts", []):
                    if opt.startswith("-"):
                        assert f"`{opt}`" in text, (group_name, name, opt)


def test_the_rest_reference_has_every_operation_of_the_openapi_document():
    doc = openapi_document()
    text = render_rest_reference()
    for path, item in doc["paths"].items():
        for method in item:
            assert f"### `{method.upper()} {path}`" in text, (method, path)
    assert "/connectors/{connector}/status" in text or "/connectors/{name}/status" in text
    for name in doc.get("components", {}).get("schemas", {}):
        assert f"### {name}\n" in text, name


def _result(benchmark: str, title: str, **figure: object) -> dict[str, object]:
    return {"benchmark": benchmark, "title": title, "command": f"python benchmarks/{benchmark}.py",
            "figures": [{"name": "rows through a worker", "value": 123456.0, "unit": "rows/s",
                         "baseline": {"name": "COPY", "value": 400000.0}, "ratio": 0.31,
                         "target": ">= 0.25", **figure}],
            "notes": "", "machine": {"cpus": 2, "cpu": "test cpu", "system": "Linux x86_64",
                                     "python": "3.11.7", "load_average_1m": 0.5},
            "commit": "abc1234", "recorded_at": "2030-01-01T00:00:00+00:00"}


def test_the_performance_page_renders_each_result_with_its_baseline_and_no_date(tmp_path):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (tmp_path / "benchmarks" / "bench_other.py").write_text('"""Times the other thing."""\n')
    (results / "bench_a.json").write_text(json.dumps(_result("bench_a", "The A pipeline")))
    page = render_performance(tmp_path)
    assert "## The A pipeline" in page
    assert "| rows through a worker | 123,456 rows/s | COPY: 400,000 | 0.31 | >= 0.25 |" in page
    assert "`python benchmarks/bench_a.py` at commit `abc1234`" in page and "2 CPUs" in page
    assert "2030" not in page  # a manual, not a diary: when it ran stays in the file
    assert "- `python benchmarks/bench_other.py`: Times the other thing." in page


# --- the command ----------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path) -> Path:
    """A copy of the generated pages and the results they come from, as in the repository."""
    for relative in PAGES:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / relative, tmp_path / relative)
    shutil.copytree(REPO / "benchmarks", tmp_path / "benchmarks",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_check_passes_on_the_repo():
    out = _run("--check")
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("relative", sorted(str(p) for p in PAGES))
def test_check_names_a_stale_page_and_write_regenerates_it(root, relative):
    assert _run("--check", "--root", str(root)).returncode == 0
    path = root / relative
    original = path.read_text()
    path.write_text(original + "\nan edit by hand\n")
    out = _run("--check", "--root", str(root))
    assert out.returncode == 1
    assert relative in out.stderr and REGENERATE in out.stderr
    assert [p for p in PAGES if str(p) in out.stderr] == [Path(relative)]
    assert docs.main(["--root", str(root)]) == 0
    assert path.read_text() == original


def test_a_new_result_file_makes_the_performance_page_stale(root):
    (root / "benchmarks" / "results" / "bench_new.json").write_text(
        json.dumps(_result("bench_new", "A new benchmark")))
    out = _run("--check", "--root", str(root))
    assert out.returncode == 1 and "performance.md" in out.stderr


# --- the site -------------------------------------------------------------------------------


def _mkdocs(config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(config.parent / "site")],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def site_copy(tmp_path_factory) -> Path:
    """The guide's sources copied, so a test can break them."""
    root = tmp_path_factory.mktemp("guide")
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    return root


def test_the_guide_builds_strictly_and_fails_on_a_broken_link(site_copy):
    built = _mkdocs(site_copy / "mkdocs.yml")
    assert built.returncode == 0, built.stderr
    assert (site_copy / "site" / "getting-started" / "index.html").is_file()
    page = site_copy / "docs" / "errors.md"
    page.write_text(page.read_text() + "\nSee [the missing page](missing.md).\n")
    broken = _mkdocs(site_copy / "mkdocs.yml")
    assert broken.returncode != 0
    assert "missing.md" in broken.stderr


def test_every_page_of_the_guide_is_in_the_navigation():
    import yaml

    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]

    def pages(entries: list) -> set[str]:
        found: set[str] = set()
        for entry in entries:
            for value in entry.values():
                found |= pages(value) if isinstance(value, list) else {value}
        return found

    listed = pages(nav)
    on_disk = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert on_disk == listed
