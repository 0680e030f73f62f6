"""``hdfs://`` (and ``viewfs://``) through ``pyarrow.fs.HadoopFileSystem``: Hadoop's libhdfs in a JVM."""
from __future__ import annotations

import ctypes.util
import glob
import os
from typing import Mapping

from ..errors import UnsupportedError, arg
from .arrow import ArrowFileSystem, StoreUri, bounded
from .options import Option, store_options
from .uri import split_uri

SCHEMES = ("hdfs", "viewfs")
OPTIONS = (
    Option("user", "str", "the HDFS user (default: the process's)", "spark"),
    Option("kerb_ticket", "str", "a Kerberos ticket cache", "/tmp/krb5cc_1000"),
    Option("replication", "int", "replication of files wmcheck writes (default 3)", "3"),
    Option("buffer_size", "int", "read and write buffer size in bytes (default: Hadoop's)", "65536"),
    Option("default_block_size", "int", "block size of files wmcheck writes (default: Hadoop's)", "134217728"),
)
SETUP = ("set JAVA_HOME to a JDK, HADOOP_HOME to a Hadoop installation (or ARROW_LIBHDFS_DIR to the directory of "
         "libhdfs.so) and CLASSPATH=$(hadoop classpath --glob)")
HINT = f"check the namenode address, the network and Kerberos ({arg('fs_options', 'kerb_ticket=PATH')})"
_JVM = ("lib/server/libjvm.so", "jre/lib/amd64/server/libjvm.so", "jre/lib/server/libjvm.so", "lib/*/server/libjvm.so")


def missing_runtime(environ: Mapping[str, str] = os.environ) -> str | None:
    """What pyarrow's HDFS client will not find (None: all there), checked before it prints dlopen errors."""
    home = environ.get("JAVA_HOME")
    if not home:
        return "JAVA_HOME is not set"
    if not any(glob.glob(os.path.join(home, pattern)) for pattern in _JVM):
        return f"no libjvm.so under JAVA_HOME={home}"
    dirs = [environ.get("ARROW_LIBHDFS_DIR"), os.path.join(environ["HADOOP_HOME"], "lib", "native") if environ.get("HADOOP_HOME") else None]
    if not any(d and os.path.exists(os.path.join(d, "libhdfs.so")) for d in dirs) and not ctypes.util.find_library("hdfs"):
        return "libhdfs.so is not found (HADOOP_HOME/lib/native, ARROW_LIBHDFS_DIR)"
    if "hadoop" not in environ.get("CLASSPATH", ""):
        return "CLASSPATH holds no Hadoop jars"
    return None


def open_store(location: str, given: Mapping[str, str]) -> ArrowFileSystem:
    """``hdfs://NAMENODE[:PORT]/PATH`` (``hdfs:///PATH``: the default file system of the Hadoop configuration)."""
    from pyarrow import fs as pafs

    loc = split_uri(location)
    kwargs, timeout = store_options(given, OPTIONS, "HDFS")
    missing = missing_runtime()
    if missing:
        raise UnsupportedError(f"cannot open {location}: pyarrow reads HDFS through Hadoop's libhdfs and a JVM, and {missing}",
                               hint=SETUP)
    host, _, port = loc.host.partition(":")
    namenode = (host if loc.scheme == "hdfs" else f"{loc.scheme}://{host}") if host else "default"
    fs = bounded(lambda: pafs.HadoopFileSystem(namenode, int(port or 0), **kwargs),
                 timeout, f"HDFS at {loc.host or 'the default namenode'}")
    authority = f"{loc.scheme}://{loc.authority}"
    return ArrowFileSystem(fs, "/" + loc.path, StoreUri(authority + "/"), timeout, HINT)
