"""A class-data sharing archive for the worker's JVM: the `.pyc` of Spark's classes.

A local SparkSession loads and verifies some 15,000 classes from Spark's jars at every start;
measured here, the JVM's start and its first jobs took 6.2 s (7.5 s with G1 and C2), and
3.4 s (4.4 s) with the classes mapped from an archive (JDK's AppCDS). The first JVM of a
machine records which classes it loaded (`-XX:ArchiveClassesAtExit`) and writes the archive
when it exits; every later JVM of the same Java and Spark maps it
(`-XX:SharedArchiveFile`). An archive the JVM cannot use (another Java, another class path)
is skipped by the JVM itself, with nothing lost but the time it saves.

The archive lives in a cache directory (`$KCTL_CACHE_DIR`, else `$XDG_CACHE_HOME/kctl`,
else `~/.cache/kctl`) under a name that changes with the Java binary and Spark's jars, so an
upgrade records a new one. `spark.class.data.sharing: disabled` turns it all off (Kafka's
enabled/disabled, not on/off, which YAML reads as booleans).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kctl.errors import ConfigError

log = logging.getLogger(__name__)

CONFIG = "spark.class.data.sharing"
MODES = ("enabled", "disabled")
CACHE_ENV = "KCTL_CACHE_DIR"
# The JVM explains every class it cannot archive (signed jars, old class files: hundreds of
# lines), and every archive it cannot map; none of it is the user's business.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# JVM options by which a user runs class-data sharing their own way (kctl then adds none)
USERS_OWN = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare:off", "AOTCache")


def mode_of(conf: dict[str, str]) -> str:
    mode = conf.get(CONFIG, "enabled").strip().lower()
    if mode not in MODES:
        raise ConfigError(f"Invalid {CONFIG} {mode!r}: expected enabled (record Spark's "
                          "classes once, then map them at every start) or disabled", key=CONFIG)
    return mode


def cache_dir() -> Path:
    if env := os.environ.get(CACHE_ENV):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "kctl"


def java_binary() -> str | None:
    """The java that pyspark's launcher runs: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def archive_key(java: str, jars_dir: str) -> str:
    """Changes when the JVM or Spark's class path does (the JVM refuses an archive of
    another class path, so a stale one would only cost a wasted start)."""
    digest = hashlib.sha256()
    st = os.stat(java)
    digest.update(f"{java}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for name in sorted(os.listdir(jars_dir)) if os.path.isdir(jars_dir) else ():
        digest.update(f"{name}\0".encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class ClassArchive:
    """Where one Java + Spark pair keeps its archive, and the JVM options that use it."""

    path: Path

    @classmethod
    def for_this_machine(cls, directory: Path | None = None) -> ClassArchive | None:
        java = java_binary()
        if java is None:  # Spark's own launcher will say that Java is missing
            return None
        import pyspark

        jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
        return cls((directory or cache_dir()) / f"spark-{archive_key(java, jars)}.jsa")

    @property
    def ready(self) -> bool:
        return self.path.is_file()

    def recording_path(self, pid: int | None = None) -> Path:
        """Where one recording JVM writes; renamed into place once it exited cleanly, so a
        JVM killed mid-write never leaves a half archive under the real name."""
        return self.path.with_name(f"{self.path.name}.{pid or os.getpid()}.partial")

    def java_options(self) -> str:
        """Map the archive if there is one, else record one."""
        if self.ready:
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._remove_stale_recordings()
        return f"-XX:ArchiveClassesAtExit={self.recording_path()} {QUIET}"

    def keep_recording(self, pid: int | None = None) -> bool:
        """After the recording JVM exited: put its archive in place (the last of several
        JVMs recording at once wins; their archives are alike)."""
        partial = self.recording_path(pid)
        if not partial.is_file() or partial.stat().st_size == 0:
            return False
        os.replace(partial, self.path)
        log.info("Saved Spark's class data to %s: later JVMs start faster", self.path)
        return True

    def _remove_stale_recordings(self) -> None:
        for partial in self.path.parent.glob(f"{self.path.name}.*.partial"):
            pid = partial.name[len(self.path.name) + 1:-len(".partial")]
            if pid.isdigit() and not _alive(int(pid)):
                partial.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
