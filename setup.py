"""Package discovery: every package below the top-level source directories, installed under ``wmcheck``
(cli/ -> wmcheck.cli, checkpoint/checks/ -> wmcheck.checkpoint.checks), and api/ as the ``wmcheck`` package itself
(the public API: ``from wmcheck import check``); the C walk of RocksDB data blocks, built where a C compiler is
(else the NumPy reader alone reads them: optional); the rest is in pyproject.toml."""
from setuptools import Extension, find_packages, setup

TOP = ("cli", "checkpoint", "statestore")

setup(
    package_dir={"wmcheck": "api", **{f"wmcheck.{top}": top for top in TOP}},
    packages=["wmcheck", *(f"wmcheck.{name}" for name in find_packages(include=[f"{top}*" for top in TOP])
                          if name.split(".")[0] in TOP)],
    ext_modules=[Extension("wmcheck.statestore.rocksdb.sst_walk", ["statestore/rocksdb/sst_walk.c"], optional=True)],
)
