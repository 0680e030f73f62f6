"""The user's own code named as ``module:function`` (``--query``, ``--foreach-batch``): found, imported, and its
exceptions located in it."""
from __future__ import annotations

import importlib
import importlib.util
import os
import traceback
from types import ModuleType
from typing import Callable

from wmcheck.checkpoint.errors import CheckpointError, arg

NAMED = {"foreach_batch": arg("foreach_batch"), "query": arg("query"), "baseline": arg("baseline")}
"""The parameters that name a ``module:function``, as messages name them."""
_ENGINE = tuple(f"{os.sep}{part}{os.sep}" for part in ("pyspark", "py4j", "wmcheck", "statestore"))


def user_frame(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of the user's code (not pyspark's, py4j's, wmcheck's or the import
    machinery's)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen") and not any(part in f.filename for part in _ENGINE)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"


def _split(spec: str, param: str, example: str) -> tuple[str, str]:
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr.isidentifier():
        raise CheckpointError(f"{NAMED[param]} expects module:function, got {spec!r}", param=param,
                              hint=f"e.g. {example} or ./{example.rpartition('.')[2].replace(':', '.py:')}")
    return module_name, attr


def _is_file(module_name: str) -> bool:
    return module_name.endswith(".py") or os.sep in module_name


def _not_found(module_name: str, param: str, why: object) -> CheckpointError:
    return CheckpointError(f"{NAMED[param]}: cannot import {module_name}: {why}", param=param,
                           hint="the module must be importable from the current directory or PYTHONPATH")


def locate_callable(spec: str, param: str, example: str) -> None:
    """Check that ``spec`` (``module:function`` or ``path/to/file.py:function``) names a module that exists, without
    running it: a module may need a Spark session to import (a ``@udf`` at its top level)."""
    module_name, _ = _split(spec, param, example)
    if _is_file(module_name):
        if not os.path.isfile(module_name):
            raise _not_found(module_name, param, f"no file {module_name}")
        return
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError) as exc:
        raise _not_found(module_name, param, exc) from None
    if found is None:
        raise _not_found(module_name, param, f"No module named {module_name!r}")


def _import(module_name: str) -> ModuleType:
    if not _is_file(module_name):
        return importlib.import_module(module_name)
    location = importlib.util.spec_from_file_location(os.path.basename(module_name)[:-3] or "sink", module_name)
    if location is None or location.loader is None or not os.path.isfile(module_name):
        raise ImportError(f"no file {module_name}")
    module = importlib.util.module_from_spec(location)
    location.loader.exec_module(module)
    return module


def load_callable(spec: str, param: str, example: str) -> Callable:
    """``module:function`` or ``path/to/file.py:function`` -> the function; ``param`` names the parameter that
    gave ``spec`` in errors, ``example`` is one such spec (``mypackage.sinks:write_batch``). What importing the
    module raises is one line naming the exception and the line of the module that raised it."""
    module_name, attr = _split(spec, param, example)
    try:
        module = _import(module_name)
    except ImportError as exc:
        raise _not_found(module_name, param, exc) from None
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckpointError(f"{NAMED[param]}: importing {module_name} raised {type(exc).__name__}"
                              f"{': ' + text if text else ''} (at {user_frame(exc)})", param=param,
                              hint=f"{arg('debug')} shows the traceback") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise CheckpointError(f"{NAMED[param]}: {module_name} has no function {attr}", hint="check the name after ':'",
                              param=param)
    return fn
