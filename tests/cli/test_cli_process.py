"""The `kctl` command as a user runs it: a fresh process, its exit code, its stderr.

Client commands must answer without importing Spark, Arrow or the REST server, so
`kctl connector status` is instant; these tests look at sys.modules of a real process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from support.broker import free_port
from support.waiting import wait_until

from kctl.exit_status import ExitStatus

HEAVY = ("pyspark", "pyarrow", "pandas", "fastapi", "uvicorn", "py4j", "confluent_kafka")


def kctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl.cli.main", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def with_test_plugins() -> dict[str, str]:
    """The environment with tests/ importable, so support.connectors load by dotted path."""
    tests = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        tests, os.environ.get("PYTHONPATH")]))}


def modules_after(args: list[str]) -> tuple[int, list[str]]:
    """Run the CLI in a fresh interpreter; return its exit code and the heavy modules it loaded."""
    probe = textwrap.dedent(f"""
        import json, sys
        from kctl.cli.main import app
        try:
            app({args!r}, standalone_mode=True)
        except SystemExit as e:
            code = e.code or 0
        heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
        print("\\n" + json.dumps({{"code": code, "heavy": heavy}}))
    """)
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    result = json.loads(r.stdout.strip().splitlines()[-1])
    return result["code"], result["heavy"]


def test_client_commands_import_no_spark_arrow_or_server(kctl_worker_url):
    for args in (["connector", "list"], ["connector", "status", "nope"], ["plugins", "list"],
                 ["connector", "offsets", "get", "nope"], ["dlq", "show", "nope"]):
        code, heavy = modules_after(["--url", kctl_worker_url, *args])
        assert heavy == [], f"kctl {' '.join(args)} imported {heavy}"
        assert code in (ExitStatus.SUCCESS, ExitStatus.NOT_FOUND), (args, code)


def test_rebalance_explain_imports_no_spark_arrow_or_server():
    code, heavy = modules_after(["rebalance", "explain", "--workers", "3", "--connectors", "2",
                                 "--tasks", "4", "--join", "w4"])
    assert code == 0 and heavy == []


def test_unreachable_worker_is_one_line_and_its_own_exit_status():
    url = f"http://127.0.0.1:{free_port()}"
    r = kctl("--url", url, "connector", "list")
    assert r.returncode == ExitStatus.UNREACHABLE
    assert r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr  # one line
    assert r.stderr.startswith("error: cannot reach kctl worker at " + url)
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_debug_shows_the_traceback():
    url = f"http://127.0.0.1:{free_port()}"
    r = kctl("--url", url, "--debug", "connector", "list")
    assert r.returncode == ExitStatus.UNREACHABLE  # the traceback, and the same status
    assert "Traceback (most recent call last)" in r.stderr
    assert "ClientError: cannot reach kctl worker" in r.stderr


@pytest.mark.parametrize("tail", [["--url", "{url}"], ["--url={url}"], ["--debug", "--url", "{url}"]])
def test_global_options_work_after_the_subcommand(tail):
    url = f"http://127.0.0.1:{free_port()}"
    r = kctl("connector", "list", *(t.format(url=url) for t in tail))
    assert "No such option" not in r.stderr
    assert r.returncode == ExitStatus.UNREACHABLE
    assert f"cannot reach kctl worker at {url}" in r.stderr


def test_url_comes_from_kctl_url_in_the_environment():
    import os

    url = f"http://127.0.0.1:{free_port()}"
    r = kctl("connector", "list", env={**os.environ, "KCTL_URL": url})
    assert r.returncode == ExitStatus.UNREACHABLE and url in r.stderr


def assert_refused_before_any_state(r: subprocess.CompletedProcess[str], state: Path) -> str:
    """Exit 2, the error on stderr only, no traceback, and no state dir, lock or log made."""
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == "", f"errors belong on stderr, got stdout {r.stdout!r}"
    assert r.stderr.startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr
    assert not state.exists(), sorted(str(p) for p in state.rglob("*"))
    return r.stderr


def test_worker_start_with_a_bad_config_names_every_problem_and_starts_nothing(tmp_path):
    state = tmp_path / "state"
    cfg = tmp_path / "worker.yaml"
    cfg.write_text(f"state.dir: {state}\nlisteners: http://127.0.0.1:{free_port()}\n"
                   "offset.flush.interval.ms: soon\nbogus.key: 1\n")
    err = assert_refused_before_any_state(kctl("worker", "start", str(cfg)), state)
    assert f"{cfg}: 2 problems:" in err
    assert "'bogus.key'" in err and "offset.flush.interval.ms" in err and "'soon'" in err


def test_worker_start_checks_spark_converters_and_plugin_path_before_making_state(tmp_path):
    state = tmp_path / "state"
    cfg = tmp_path / "worker.yaml"
    cfg.write_text(f"state.dir: {state}\nlisteners: http://127.0.0.1:{free_port()}\n"
                   "spark.master: yarn\nvalue.converter: ThriftConverter\n"
                   f"plugin.path: [{tmp_path / 'no-plugins'}]\n")
    err = assert_refused_before_any_state(kctl("worker", "start", str(cfg)), state)
    assert err.startswith(f"error: {cfg}: 3 problems:")
    assert "'yarn' for configuration spark.master" in err
    assert "'ThriftConverter' for configuration value.converter" in err
    assert f"'{tmp_path / 'no-plugins'}' for configuration plugin.path: no such directory" in err


@pytest.mark.parametrize("content, fragment", [
    (None, "cannot read config file"),
    ("state.dir: [oops\n", "not valid YAML: "),
    ("- state.dir\n", "expected a mapping of config keys"),
], ids=["missing", "not-yaml", "a-list"])
def test_worker_start_with_an_unreadable_config_is_one_line(tmp_path, content, fragment):
    cfg = tmp_path / "worker.yaml"
    if content is not None:
        cfg.write_text(content)
    r = kctl("worker", "start", str(cfg))
    err = assert_refused_before_any_state(r, tmp_path / "state")
    assert len(err.strip().splitlines()) == 1 and str(cfg) in err and fragment in err, err


@pytest.mark.parametrize("content, fragment", [
    (None, "cannot read connector file"),
    ("name: [oops\n", "not valid YAML or JSON"),
    ("- name: x\n", "expected a mapping with name and config"),
    (b"\xff\xfe\x00", "not UTF-8"),
    ("name: broken\nconnector.class: support.connectors.CounterSourceConnector\ncount: many\n",
     "connector broken is invalid"),
], ids=["missing", "not-yaml", "a-list", "binary", "invalid-config"])
def test_worker_start_with_a_bad_connector_file_starts_nothing(tmp_path, content, fragment):
    state = tmp_path / "state"
    cfg = tmp_path / "worker.yaml"
    cfg.write_text(f"state.dir: {state}\nlisteners: http://127.0.0.1:{free_port()}\n")
    connector = tmp_path / "connector.yaml"
    if content is not None:
        connector.write_bytes(content if isinstance(content, bytes) else content.encode())
    r = kctl("worker", "start", str(cfg), str(connector), env=with_test_plugins())
    err = assert_refused_before_any_state(r, state)
    assert str(connector) in err and fragment in err, err
    if isinstance(content, str) and "count: many" in content:  # each field problem on its own line
        assert "  - count: Invalid value 'many'" in err and "  - topic: Missing required" in err


def test_worker_start_lists_every_problem_of_every_connector_file_at_once(tmp_path):
    state = tmp_path / "state"
    cfg = tmp_path / "worker.yaml"
    cfg.write_text(f"state.dir: {state}\nlisteners: http://127.0.0.1:{free_port()}\n")
    source = "connector.class: support.connectors.CounterSourceConnector\n"
    files = {"a.yaml": f"name: a\n{source}count: many\n",
             "b.yaml": "name: [oops\n",
             "c.yaml": f"name: c\n{source}topic: t\nper.pol: 5\n",  # fine, but a typo
             "d.yaml": f"name: d\n{source}topic: t\ncount: '1.5'\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    r = kctl("worker", "start", str(cfg), *(str(tmp_path / n) for n in files),
             env=with_test_plugins())
    err = assert_refused_before_any_state(r, state)
    assert "3 connector files have problems:" in err
    for name, fragment in [("a.yaml", "connector a is invalid"), ("b.yaml", "not valid YAML"),
                           ("d.yaml", "connector d is invalid")]:
        assert f"{tmp_path / name}" in err and fragment in err, (name, err)
    assert "  - count: Invalid value 'many'" in err and "  - topic: Missing required" in err
    assert f"warning: {tmp_path / 'c.yaml'}: connector c: unknown key 'per.pol' " \
           "(did you mean 'per.poll'?)" in err


@pytest.mark.slow  # a worker process: the fast selection starts none
def test_ctrl_c_stops_the_worker_cleanly_with_exit_0(tmp_path):
    cfg = tmp_path / "worker.yaml"
    cfg.write_text(f"state.dir: {tmp_path / 'state'}\nlisteners: http://127.0.0.1:0\n"
                   "offset.flush.interval.ms: 100\n")
    connector = tmp_path / "counter.yaml"
    connector.write_text("name: ticking\nconnector.class: support.connectors.CounterSourceConnector\n"
                         "topic: ticks\ncount: 100000000\npoll.sleep.ms: 5\n")
    # its own session, so the SIGINT reaches the whole group as a terminal's Ctrl-C does
    proc = subprocess.Popen([sys.executable, "-m", "kctl.cli.main", "worker", "start", str(cfg),
                             str(connector)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=with_test_plugins(), start_new_session=True)
    try:
        head = []  # the worker reports the port it bound on its first lines
        while not (line := proc.stdout.readline()).startswith("REST API listening on "):
            assert line, "".join(head) + proc.stderr.read()
            head.append(line)
        url = line.split()[-1] + "/connectors/ticking/status"

        def task_running() -> bool:
            try:
                return httpx.get(url).json()["tasks"][0]["state"] in ("RUNNING", "FAILED")
            except (httpx.HTTPError, LookupError, ValueError):
                return proc.poll() is not None

        wait_until(task_running, timeout=60, message="worker up and its task RUNNING")
        assert httpx.get(url).json()["tasks"][0]["state"] == "RUNNING"
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out + err
    out = "".join(head) + line + out
    assert out.splitlines()[-2:] == ["stopping worker...", "worker stopped"], out
    alarming = ("Traceback", "Error", "ERROR", "Exception", "KeyboardInterrupt", "Aborted")
    assert not [word for word in alarming if word in out + err], out + err


def test_an_unexpected_exception_is_one_line_unless_debug():
    # a bug in kctl itself (here: the REST client blowing up) must not greet users with a trace
    probe = textwrap.dedent("""
        import sys
        import kctl.cli.main as m
        from kctl.cli.client import Client

        def broken(*args, **kwargs):
            raise RuntimeError("client exploded")

        Client.request = broken
        sys.argv = ["kctl", *sys.argv[1:]]
        m.main()
    """)
    r = subprocess.run([sys.executable, "-c", probe, "connector", "list"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "error: unexpected RuntimeError: client exploded (run with --debug for the traceback)"]
    r = subprocess.run([sys.executable, "-c", probe, "--debug", "connector", "list"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert "RuntimeError: client exploded" in r.stderr


def test_worker_start_on_a_port_in_use_names_the_listener_and_makes_no_state(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        state = tmp_path / "state"
        cfg = tmp_path / "worker.yaml"
        cfg.write_text(f"state.dir: {state}\nlisteners: http://127.0.0.1:{port}\n")
        err = assert_refused_before_any_state(kctl("worker", "start", str(cfg)), state)
    assert err.strip() == (f"error: {cfg}: listeners: cannot listen on 127.0.0.1:{port}: "
                           "Address already in use")


def test_worker_start_help_names_both_modes():
    r = kctl("worker", "start", "--help", env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0
    assert "standalone" in r.stdout and "distributed" in r.stdout and "group.id" in r.stdout


def test_worker_start_for_a_kafka_cluster_nobody_reaches_exits_unreachable(tmp_path):
    """Not 2 (usage): the config was fine, the cluster is down or elsewhere."""
    cfg = tmp_path / "worker.yaml"
    cfg.write_text(f"bootstrap.servers: 127.0.0.1:{free_port()}\ngroup.id: nobody\n"
                   "config.storage.topic: n-configs\noffset.storage.topic: n-offsets\n"
                   "status.storage.topic: n-status\n"
                   f"listeners: http://127.0.0.1:{free_port()}\nstate.dir: {tmp_path / 's'}\n")
    r = kctl("worker", "start", str(cfg))
    assert r.returncode == ExitStatus.UNREACHABLE, r.stdout + r.stderr
    assert "cannot reach the Kafka cluster" in r.stderr and "Traceback" not in r.stderr
