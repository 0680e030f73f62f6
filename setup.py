"""Package discovery: every package below the top-level source directories, installed under ``wmcheck``
(cli/ -> wmcheck.cli, checkpoint/checks/ -> wmcheck.checkpoint.checks); the rest is in pyproject.toml."""
from setuptools import find_packages, setup

TOP = ("cli", "checkpoint", "statestore")

setup(
    package_dir={f"wmcheck.{top}": top for top in TOP},
    packages=[f"wmcheck.{name}" for name in find_packages(include=[f"{top}*" for top in TOP]) if name.split(".")[0] in TOP],
)
