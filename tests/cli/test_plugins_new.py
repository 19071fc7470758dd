"""`kctl plugins new`: the project it writes installs with pip, is listed as a plugin, passes
its own tests, and runs on a `kctl worker start` process.

The projects are installed with `pip install --target` into the test's directory and put on
PYTHONPATH, so the interpreter the other tests share never sees them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from support.waiting import wait_until
from support.worker import LISTENER, Worker

REPO = Path(__file__).resolve().parents[2]


def kctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kctl.cli.main", *args], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200", **(env or {})},
                          timeout=120)


def installed(tmp_path: Path, *projects: Path) -> dict[str, str]:
    """pip installs the projects into tmp_path/site; the environment that sees them."""
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--disable-pip-version-check", "--target", str(site),
                        *map(str, projects)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    path = os.pathsep.join(filter(None, [str(site), str(REPO), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path}


def test_a_new_source_and_sink_install_are_listed_and_pass_their_own_tests(tmp_path):
    for args in (("weather-station",), ("lines-out", "--sink")):
        r = kctl("plugins", "new", *args, "--dir", str(tmp_path))
        assert r.returncode == 0, r.stdout + r.stderr
    source, sink = tmp_path / "weather-station", tmp_path / "lines-out"
    assert (source / "weather_station" / "__init__.py").exists()
    assert 'WeatherStationSource = "weather_station:WeatherStationSourceConnector"' in \
        (source / "pyproject.toml").read_text()
    assert kctl("plugins", "new", "weather-station", "--dir", str(tmp_path)).returncode != 0, \
        "an existing project is not overwritten"

    env = installed(tmp_path, source, sink)
    listed = json.loads(kctl("plugins", "list", "--local", "-o", "json", env=env).stdout)
    aliases = {p["aliases"][0]: p for p in listed["plugins"]}
    assert aliases["WeatherStationSource"]["type"] == "source"
    assert aliases["LinesOutSink"]["type"] == "sink"
    assert aliases["WeatherStationSource"]["version"] == "0.1.0"
    assert listed["broken"] == [] and listed["ambiguous"] == []

    for project in (source, sink):
        # -P: the installed package, not the project directory, is what the tests import
        r = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "tests"], cwd=project, capture_output=True, text=True, timeout=300,
                           env={**os.environ, **env})
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert re.search(r"\b[23] passed\b", r.stdout), r.stdout[-2000:]


def test_the_scaffold_command_imports_no_spark_or_arrow(tmp_path):
    script = ("import sys; from typer.testing import CliRunner; from kctl.cli.main import app; "
              f"r = CliRunner().invoke(app, ['plugins', 'new', 'x', '--dir', {str(tmp_path)!r}]);"
              " assert r.exit_code == 0, r.output; "
              "print(sorted({m.split('.')[0] for m in sys.modules} & "
              "{'pyspark', 'pyarrow', 'pandas', 'py4j'}))")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_a_bad_name_or_both_kinds_is_refused(tmp_path):
    assert kctl("plugins", "new", "9lives", "--dir", str(tmp_path)).returncode != 0
    r = kctl("plugins", "new", "x", "--source", "--sink", "--dir", str(tmp_path))
    assert r.returncode != 0 and "one of --source and --sink" in r.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_new_source_runs_on_a_worker_as_its_readme_says(tmp_path):
    assert kctl("plugins", "new", "weather-station", "--dir", str(tmp_path)).returncode == 0
    env = installed(tmp_path, tmp_path / "weather-station")
    readme = (tmp_path / "weather-station" / "README.md").read_text()
    document = json.loads(re.search(r"^ {4}(\{\"name\".*\})$", readme, re.MULTILINE)[1])
    (tmp_path / "weather_station.json").write_text(json.dumps(document))
    (tmp_path / "worker.yaml").write_text(json.dumps({
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "offset.flush.interval.ms": 200, "spark.start": "lazy"}))
    w = Worker(tmp_path, env=env)
    w.start(tmp_path / "weather_station.json")
    try:
        def offsets() -> list:
            r = httpx.get(f"{w.url}/connectors/weather_station/offsets", timeout=5)
            return r.json()["offsets"] if r.status_code == 200 else []

        committed = wait_until(lambda: len(offsets()) == 2 and offsets(), timeout=120,
                               message="both streams' offsets committed",
                               on_timeout=lambda: w.log()[-3000:] + "\n" + str(w.status("weather_station")))
        assert {o["partition"]["stream"] for o in committed} == {"a", "b"}
        assert [t["state"] for t in w.status("weather_station")["tasks"]] == ["RUNNING"] * 2
    finally:
        w.stop()


@pytest.mark.slow
@pytest.mark.broker
def test_a_new_source_runs_on_a_two_worker_cluster_as_the_guide_says(tmp_path, kafka_broker):
    """The guide's cluster steps: the package installed for every worker, the workers started
    with one group, the connector created through one of them; its tasks run on both."""
    from support.cluster import ClusterWorker, cluster_settings

    assert kctl("plugins", "new", "weather-station", "--dir", str(tmp_path)).returncode == 0
    env = installed(tmp_path, tmp_path / "weather-station")
    settings = cluster_settings(kafka_broker.bootstrap, f"weather-{uuid.uuid4().hex[:8]}")
    workers = [ClusterWorker(tmp_path, f"w{i}", settings) for i in (1, 2)]
    for w in workers:
        w.env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], w.env["PYTHONPATH"]])
    topic = f"weather-{uuid.uuid4().hex[:8]}"
    (tmp_path / "weather_station.json").write_text(json.dumps({"name": "weather_station", "config": {
        "connector.class": "WeatherStationSource", "topic": topic, "streams": "a,b",
        "tasks.max": "2"}}))
    try:
        for w in workers:
            w.start()
        for w in workers:
            listed = json.loads(w.kctl("plugins", "list", "-o", "json").stdout)
            assert "weather_station.WeatherStationSourceConnector" in {p["class"] for p in listed}
        workers[0].kctl("connector", "create", str(tmp_path / "weather_station.json"))

        def spread() -> bool:
            tasks = workers[1].status("weather_station")["tasks"]
            return len(tasks) == 2 and {t["state"] for t in tasks} == {"RUNNING"} and \
                {t["worker_id"] for t in tasks} == {w.worker_id for w in workers}

        wait_until(spread, timeout=120, message="a task RUNNING on each worker",
                   on_timeout=lambda: workers[0].log()[-3000:])
        wait_until(lambda: len(workers[0].offsets("weather_station")) == 2, timeout=60,
                   message="both streams' offsets committed")
    finally:
        for w in workers:
            w.stop()
