"""The `kctl` command as a user runs it: a fresh process, its exit code, its stderr.

Client commands must answer without importing Spark, Arrow or the REST server, so
`kctl connector status` is instant; these tests look at sys.modules of a real process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from support.broker import free_port

HEAVY = ("pyspark", "pyarrow", "pandas", "fastapi", "uvicorn", "py4j", "confluent_kafka")


def kctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl.cli.main", *args], capture_output=True,
                          text=True, timeout=60, env=env)


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
        assert code in (0, 2), (args, code)


def test_rebalance_explain_imports_no_spark_arrow_or_server():
    code, heavy = modules_after(["rebalance", "explain", "--workers", "3", "--connectors", "2",
                                 "--tasks", "4", "--join", "w4"])
    assert code == 0 and heavy == []


def test_unreachable_worker_is_one_line_and_exit_1():
    url = f"http://127.0.0.1:{free_port()}"
    r = kctl("--url", url, "connector", "list")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr  # one line
    assert r.stderr.startswith("error: cannot reach kctl worker at " + url)
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_debug_shows_the_traceback():
    url = f"http://127.0.0.1:{free_port()}"
    r = kctl("--url", url, "--debug", "connector", "list")
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert "ClientError: cannot reach kctl worker" in r.stderr


def test_url_comes_from_kctl_url_in_the_environment():
    import os

    url = f"http://127.0.0.1:{free_port()}"
    r = kctl("connector", "list", env={**os.environ, "KCTL_URL": url})
    assert r.returncode == 1 and url in r.stderr


def test_worker_start_with_a_bad_config_names_every_problem_and_starts_nothing(tmp_path):
    state = tmp_path / "state"
    cfg = tmp_path / "worker.yaml"
    cfg.write_text(f"state.dir: {state}\nlisteners: http://127.0.0.1:{free_port()}\n"
                   "offset.flush.interval.ms: soon\nbogus.key: 1\n")
    r = kctl("worker", "start", str(cfg))
    assert r.returncode == 2
    out = r.stdout + r.stderr
    assert f"{cfg}: 2 problems:" in out
    assert "'bogus.key'" in out and "offset.flush.interval.ms" in out and "'soon'" in out
    assert "Traceback" not in out
    assert not state.exists()  # not started half-configured
