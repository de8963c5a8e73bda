"""Jars from Maven Central, fetched once into the git-ignored cache and reused.

Layout of one cached item (the reference Kafka, Hadoop, the Java driver):

    <cache>/m2/                 Maven's local repository, shared by every item
    <cache>/<item>/...          the item's jars
    <cache>/<item>/classpath.txt  marker, written last: jar paths relative to the item
                                folder; when it and every jar it names exist, no Maven run
                                and no network call happen

The cache is ``$MARTLET_CACHE_DIR``, else ``<repo>/.cache``. A file lock keeps two
processes from fetching the same item at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

MARKER_NAME = "classpath.txt"
MAVEN_TIMEOUT_S = 900.0


def project_hash(project: Path) -> str:
    """A hash of a Maven project's sources (its pom.xml and everything under src/): what a
    build cached under it was made from."""
    digest = hashlib.sha256()
    files = [project / "pom.xml", *sorted(p for p in (project / "src").rglob("*") if p.is_file())]
    for path in files:
        digest.update(path.relative_to(project).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def cache_dir() -> Path:
    env = os.environ.get("MARTLET_CACHE_DIR")
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / ".cache"


def cached_classpath(home: Path, fill: Callable[[Path], list[str]]) -> str:
    """The classpath of the item in `home`; on a miss `fill(staging)` must put the jars into
    the staging folder and return their paths relative to it."""
    classpath = read_marker(home)
    if classpath is not None:
        return classpath
    home.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(home.parent / f".{home.name}.lock"):
        classpath = read_marker(home)  # another process may have fetched meanwhile
        if classpath is None:
            classpath = _fill(home, fill)
    return classpath


def _fill(home: Path, fill: Callable[[Path], list[str]]) -> str:
    staging = home.with_name(f"{home.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        names = fill(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(home, ignore_errors=True)
    staging.rename(home)
    write_atomic(home / MARKER_NAME, "\n".join(names) + "\n")  # written last: the item is complete
    classpath = read_marker(home)
    assert classpath is not None, f"{home}: the jars named in {MARKER_NAME} are missing"
    return classpath


def read_marker(home: Path) -> str | None:
    try:
        names = (home / MARKER_NAME).read_text().split()
    except FileNotFoundError:
        return None
    jars = [str(home / name) for name in names]
    if not jars or not all(os.path.isfile(jar) for jar in jars):
        return None
    return os.pathsep.join(jars)


def run_maven(pom: Path, args: list[str], what: str, error: type[Exception]) -> None:
    """Run `mvn -f pom args...` against the shared local repository; raise `error` with the
    tail of Maven's output when it fails or runs over MAVEN_TIMEOUT_S."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(f"Maven (mvn) is not on PATH: cannot {what}")
    command = [mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(pom), f"-Dmaven.repo.local={cache_dir() / 'm2'}",
               *args]
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=MAVEN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"") + (exc.stderr or b"")
        raise error(f"{what} took over {MAVEN_TIMEOUT_S:.0f}s:\n{tail_text(output)}") from None
    if done.returncode != 0:
        raise error(f"{what} failed (mvn exit {done.returncode}): {' '.join(command)}\n"
                    + tail_text(done.stdout + done.stderr))


def copy_dependencies(pom: Path, properties: dict[str, str], required: list[str], what: str,
                      error: type[Exception]) -> Callable[[Path], list[str]]:
    """A `fill` for cached_classpath: the pom's runtime dependencies into <staging>/libs."""
    def fill(staging: Path) -> list[str]:
        libs = staging / "libs"
        props = [f"-D{name}={value}" for name, value in properties.items()]
        run_maven(pom, [*props, "dependency:copy-dependencies", "-DincludeScope=runtime",
                        f"-DoutputDirectory={libs}"], what, error)
        names = sorted(p.name for p in libs.glob("*.jar"))
        missing = [jar for jar in required if jar not in names]
        if missing:
            raise error(f"{what}: Maven fetched no {', '.join(missing)} into {libs}")
        return [f"libs/{name}" for name in names]
    return fill


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    import fcntl

    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(text)
    os.replace(tmp, path)


_JAVA_FRAME = re.compile(r"\s+at \S|\s*\.\.\. \d+ more$")


def tail_text(data: bytes | str, lines: int = 40) -> str:
    """The last `lines` lines, Java stack frames left out (they hide the messages)."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    kept = [line for line in data.splitlines() if not _JAVA_FRAME.match(line)]
    return "\n".join(kept[-lines:])
