"""Starting Spark for wmcheck: checks first (pyspark, Java ≥ 17), quiet logs, one clear error."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from importlib.resources import files
from typing import Iterator, Mapping

from wmcheck.checkpoint.errors import SparkUnavailableError, UnsupportedError

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


def spark_session(master: str | None = None, conf: Mapping[str, str] | None = None, remote: str | None = None, quiet: bool = True):
    """Get or create a SparkSession (local[*] by default, or --master / --remote Spark Connect; a
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
        if quiet and in_process:
            _launch_silent_jvm({"spark.app.name": "wmcheck", "spark.master": master or remote or "local[*]", **jvm_conf})
        spark = builder.getOrCreate()
    except Exception as exc:  # py4j/JVM start-up failures arrive as many exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkUnavailableError(f"Spark failed to start: {first}", hint="rerun with --debug for the full error") from None
    if not remote:
        spark.sparkContext.setLogLevel("FATAL" if quiet else "ERROR")
        # pyspark 4.1's state reader fails on HDFS-backed stores unless the streaming query
        # manager (and with it the state store coordinator) exists: create it up front.
        spark.streams  # noqa: B018
    return spark


def _launch_silent_jvm(settings: Mapping[str, str]) -> None:
    """Start the driver JVM (as pyspark would) with its stderr discarded: the JVM's own start-up
    warnings (e.g. "Using incubator modules") bypass log4j. A no-op when a JVM already runs."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    SparkContext._gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.DEVNULL})
    SparkContext._jvm = SparkContext._gateway.jvm


def quiet_java_options(options: str = "") -> str:
    """Driver JVM options with wmcheck's log4j2 configuration (no banner, no warnings), unless one is set."""
    if "log4j2.configurationFile" in options:
        return options
    path = f"file:{files('wmcheck.statestore').joinpath(LOG4J_FILE)}"
    quoted = f'"{path}"' if " " in path else path
    return f"{options} -Dlog4j2.configurationFile={quoted}".strip()


def get_session(master: str | None = None, conf: Mapping[str, str] | None = None, remote: str | None = None):
    """``(session, created)``: the active SparkSession of this process when there is one (its SQL conf
    gets ``conf``; a JVM runs one context, so ``master`` cannot differ), else a new one from
    :func:`spark_session`. ``remote`` always connects anew."""
    if remote is None:
        try:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession
        except ImportError:
            check_requirements()
            raise
        if SparkContext._active_spark_context is not None:
            active = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
            from pyspark.errors import AnalysisException

            for key, value in (conf or {}).items():
                try:
                    active.conf.set(key, value)
                except AnalysisException:
                    raise UnsupportedError(f"{key} cannot be set on the Spark session already running in this process",
                                           hint="run wmcheck in a new process to start Spark with it") from None
            active.streams  # noqa: B018 - the state store coordinator (see spark_session)
            return active, False
    return spark_session(master, conf, remote), True


@contextmanager
def session_scope(master: str | None = None, conf: Mapping[str, str] | None = None, remote: str | None = None) -> Iterator:
    """A session for one command: reuses the active one, stops one it started (a clean JVM shutdown)."""
    spark, created = get_session(master, conf, remote)
    try:
        yield spark
    finally:
        if created:
            stop_for_exit(spark)


def stop_for_exit(spark) -> None:
    """Stop a session the command started, as the process is about to exit: the JVM's SparkContext stops
    cleanly, but pyspark's accumulator server (a daemon thread that notices a shutdown only at its next
    0.5 s poll) is told to stop without waiting for it, which would add ~0.4 s to every command."""
    context = getattr(spark, "sparkContext", None)  # Spark Connect sessions have none
    server = getattr(context, "_accumulatorServer", None)
    if context is not None and server is not None:
        context._accumulatorServer = None
        server.server_shutdown = True
        server._BaseServer__shutdown_request = True  # what socketserver's shutdown() sets before it waits
    spark.stop()
