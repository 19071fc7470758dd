"""A real headless browser (Debian's chromium) to look at the pages kctl writes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ARTIFACTS = Path(os.environ.get("KCTL_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[2] / "build" / "test-artifacts"))


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "chromium is missing: apt-get install -y chromium"
    return path


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-dev-shm-usage", "--virtual-time-budget=8000", *args],
        capture_output=True, text=True, timeout=120)


def dom(url: str, size: str = "1400,1000") -> str:
    """The page's DOM after its scripts ran, in a window of this size."""
    result = _run(f"--window-size={size}", "--dump-dom", url)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def screenshot(url: str, name: str, size: str = "1400,1000") -> Path:
    """A PNG of the page, kept as a test artifact (build/test-artifacts/<name>.png)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / f"{name}.png"
    target.unlink(missing_ok=True)
    result = _run(f"--window-size={size}", f"--screenshot={target}", url)
    assert result.returncode == 0 and target.exists(), result.stderr[-2000:]
    return target
