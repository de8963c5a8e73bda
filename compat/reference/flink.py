"""PyFlink and Flink's Kafka connector, for Flink jobs run against Martlet (issue 15, point 3).

PyFlink pins what the project cannot share (py4j 0.10.9.7 where pyspark needs 0.10.9.9,
pyarrow < 21, pandas < 2.3, apache-beam), so it lives in a virtualenv of its own and jobs run
as processes of that virtualenv's python. Both are cached:

    .cache/flink-<version>/venv/          the virtualenv, apache-flink==<version> installed
    .cache/flink-<version>/installed.txt  marker written last: what was installed; when it
                                          and the venv's python exist, no pip run happens
    .cache/m2/                            Maven's local repository (shared)
    .cache/flink-kafka-<connector>/libs/  flink-sql-connector-kafka (shaded: the DataStream
                                          connector and kafka-clients in one jar)
    .cache/flink-kafka-<connector>/classpath.txt
                                          marker written last (see ``maven.py``)

A job gets the connector through ``pipeline.jars`` (a local file URL), so nothing is resolved
while jobs run. ``MARTLET_FLINK_VERSION`` and ``MARTLET_FLINK_CONNECTOR_VERSION`` pick other
versions; the connector's suffix names the Flink minor it is built for (none exists for 2.3).

``python -m martlet.compat.reference.flink`` fetches both (``make test`` runs it first).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .maven import cache_dir, cached_classpath, copy_dependencies, file_lock, tail_text, write_atomic

DEFAULT_FLINK_VERSION = "2.2.1"
DEFAULT_CONNECTOR_VERSION = "5.0.0-2.2"
POM_PATH = Path(__file__).resolve().with_name("flink-pom.xml")
CONNECTOR_ARTIFACT = "flink-sql-connector-kafka"
MARKER_NAME = "installed.txt"
PIP_TIMEOUT_S = 1800.0


class FlinkSetupError(RuntimeError):
    """PyFlink's virtualenv or the Kafka connector could not be made."""


def flink_version() -> str:
    return os.environ.get("MARTLET_FLINK_VERSION") or DEFAULT_FLINK_VERSION


def connector_version() -> str:
    return os.environ.get("MARTLET_FLINK_CONNECTOR_VERSION") or DEFAULT_CONNECTOR_VERSION


def flink_home(version: str | None = None) -> Path:
    return cache_dir() / f"flink-{version or flink_version()}"


def flink_kafka_jar(version: str | None = None) -> str:
    """The connector jar for ``version`` (fetched once, then from the cache), as a path."""
    version = version or connector_version()
    jar = f"{CONNECTOR_ARTIFACT}-{version}.jar"
    fill = copy_dependencies(POM_PATH, {"flink.connector.version": version}, [jar],
                             f"fetching Flink's Kafka connector {version}", FlinkSetupError)
    jars = cached_classpath(cache_dir() / f"flink-kafka-{version}", fill).split(os.pathsep)
    assert [Path(path).name for path in jars] == [jar], f"the connector's cache holds {jars}, not {jar} alone"
    return jars[0]


def flink_python(version: str | None = None) -> str:
    """The python of a virtualenv holding apache-flink==``version`` (made once, then reused)."""
    version = version or flink_version()
    home = flink_home(version)
    wanted = _requirement(version)
    python = home / "venv" / "bin" / "python"
    if _installed(home) == wanted and python.exists():
        return str(python)
    home.mkdir(parents=True, exist_ok=True)
    with file_lock(home.parent / f".{home.name}.lock"):
        if _installed(home) != wanted or not python.exists():  # another process may have made it meanwhile
            _make_venv(home, wanted)
    return str(python)


def _requirement(version: str) -> str:
    return f"apache-flink=={version} (python {sys.version_info.major}.{sys.version_info.minor})"


def _installed(home: Path) -> str | None:
    try:
        return (home / MARKER_NAME).read_text().strip()
    except FileNotFoundError:
        return None


def _make_venv(home: Path, wanted: str) -> None:
    """A fresh venv in home/venv (a half-made one is removed first: venvs do not move)."""
    (home / MARKER_NAME).unlink(missing_ok=True)
    venv = home / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(venv)], "making PyFlink's virtualenv")
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          wanted.split(" ", 1)[0]], f"installing {wanted.split(' ', 1)[0]} into {venv}")
    write_atomic(home / MARKER_NAME, wanted + "\n")  # written last: the venv is complete


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise FlinkSetupError(f"{what} took over {PIP_TIMEOUT_S:.0f}s:\n"
                              + tail_text((exc.stdout or b"") + (exc.stderr or b""))) from None
    if done.returncode != 0:
        raise FlinkSetupError(f"{what} failed (exit {done.returncode}):\n" + tail_text(done.stdout + done.stderr))


def main() -> None:
    print(f"PyFlink: {flink_python()}")
    print(f"Flink's Kafka connector: {flink_kafka_jar()}")


if __name__ == "__main__":
    main()
