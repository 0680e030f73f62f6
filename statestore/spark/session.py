"""Spark for wmcheck: the session of this process reused, or one started after checks (pyspark, Java ≥ 17),
with quiet logs and one clear error."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from importlib.resources import files
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

from wmcheck.checkpoint.errors import SparkUnavailableError, UnsupportedError, arg
from wmcheck.statestore.spark.spark_errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17
QUIET_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
}
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
LOG4J_FILE = "log4j2.properties"


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def java_version() -> tuple[str | None, int | None]:
    """(the java binary found, its major version), as pyspark would launch it."""
    binary = _java_binary()
    if binary is None:
        return None, None
    try:
        text = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return binary, None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not match:
        return binary, None
    major = int(match[1])
    return binary, int(match[2]) if major == 1 and match[2] else major


def check_requirements() -> None:
    """Fail with one line when pyspark or a suitable Java is missing."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkUnavailableError(
            "pyspark is not installed", hint="pip install 'wmcheck[spark]' (pyspark 4.0 or newer)"
        ) from None
    binary, major = java_version()
    where = f" (JAVA_HOME={os.environ['JAVA_HOME']})" if os.environ.get("JAVA_HOME") else ""
    if binary is None:
        raise SparkUnavailableError(
            f"no Java found{where}: Spark needs Java {MIN_JAVA} or newer",
            hint="install one (e.g. apt-get install openjdk-17-jre-headless) and set JAVA_HOME or put java on PATH",
        )
    if major is None or major < MIN_JAVA:
        found = f"Java {major}" if major else "a java that does not report its version"
        raise SparkUnavailableError(
            f"found {found} at {binary}{where}: Spark 4 needs Java {MIN_JAVA} or newer",
            hint="install Java 17 or 21 and point JAVA_HOME at it",
        )


def spark_session(master: str | None = None, conf: Mapping[str, str] | None = None, remote: str | None = None,
                  quiet: bool = True) -> "SparkSession":
    """Get or create a SparkSession (local[*] by default, or a ``master`` / ``remote`` Spark Connect URL; a
    ``local[…]`` remote starts a Spark Connect server in this process, as quietly as a local session)."""
    in_process = remote is None or remote.startswith("local")
    if in_process:
        check_requirements()
    from pyspark.sql import SparkSession

    if quiet and sys.stderr.isatty():
        sys.stderr.write("wmcheck: starting Spark...\n")
    builder = SparkSession.builder.appName("wmcheck")
    builder = builder.remote(remote) if remote else builder.master(master or "local[*]")
    user = dict(conf or {})
    jvm_conf = {**(QUIET_CONF if in_process else {}), **user}
    if quiet and in_process:
        jvm_conf[JAVA_OPTIONS] = quiet_java_options(jvm_conf.get(JAVA_OPTIONS, ""))
    # a Spark Connect client can set only SQL confs; the JVM started here has the rest already
    for key, value in (user if remote else jvm_conf).items():
        builder = builder.config(key, value)
    try:
        with _stderr_discarded(quiet and in_process):
            spark = builder.getOrCreate()
    except Exception as exc:  # py4j/JVM start-up failures arrive as many exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkUnavailableError(f"Spark failed to start: {first}", hint=f"{arg('debug')} shows the full error") from exc
    if not remote:
        spark.sparkContext.setLogLevel("FATAL" if quiet else "ERROR")
        # pyspark 4.1's state reader fails on HDFS-backed stores unless the streaming query
        # manager (and with it the state store coordinator) exists: create it up front.
        spark.streams  # noqa: B018
    return spark


@contextmanager
def _stderr_discarded(discard: bool) -> Iterator[None]:
    """Standard error (file descriptor 2) sent to /dev/null while a driver JVM starts, so that the JVM inherits
    that: its own start-up warnings (e.g. "Using incubator modules") bypass log4j. Restored at once after."""
    if not discard:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def quiet_java_options(options: str = "") -> str:
    """Driver JVM options with wmcheck's log4j2 configuration (no banner, no warnings), unless one is set."""
    if "log4j2.configurationFile" in options:
        return options
    path = f"file:{files('wmcheck.statestore').joinpath(LOG4J_FILE)}"
    quoted = f'"{path}"' if " " in path else path
    return f"{options} -Dlog4j2.configurationFile={quoted}".strip()


def _running_session() -> "SparkSession | None":
    """The session of the SparkContext running in this process (any thread's), if one runs."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        check_requirements()
        raise
    if SparkContext._active_spark_context is None:  # read only: pyspark has no public "is one running"
        return None
    return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()


def get_session(master: str | None = None, conf: Mapping[str, str] | None = None, remote: str | None = None,
                packages: Sequence[str] = (), jars: Sequence[str] = ()) -> tuple["SparkSession", bool]:
    """``(session, created)``: the SparkSession running in this process when there is one (its SQL conf gets
    ``conf``; a JVM runs one context, so ``master`` cannot differ, and ``packages`` and ``jars`` Maven
    coordinates and jar files must be loaded already), else a new one from :func:`spark_session` with them.
    ``remote`` always connects anew."""
    active = _running_session() if remote is None else None
    if active is None:
        extra = {key: ",".join(items) for key, items in (("spark.jars.packages", packages), ("spark.jars", jars)) if items}
        return spark_session(master, {**(conf or {}), **extra}, remote), True
    loaded = active.sparkContext.getConf()
    absent = [item for key, items in (("spark.jars.packages", packages), ("spark.jars", jars))
              for item in items if item not in loaded.get(key, "")]
    if absent:
        raise UnsupportedError(f"{', '.join(absent)} cannot be added to the Spark session already running in this process",
                               hint="run wmcheck in a new process, or start the session with them")
    for key, value in (conf or {}).items():
        try:
            active.conf.set(key, value)
        except Exception as exc:  # static confs cannot change on a running session
            raise UnsupportedError(f"{key} cannot be set on the Spark session already running in this process: "
                                   f"{first_line(exc)}", hint="run wmcheck in a new process to start Spark with it") from None
    active.streams  # noqa: B018 - the state store coordinator (see spark_session)
    return active, False
