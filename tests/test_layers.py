"""Dependencies point one way: foundation (errors, file access, layout, the text log) -> state files
(statestore/formats, rocksdb, encodings, keys) -> logs -> model -> batch facts (watermarks, the replay plan) ->
(repair | summary | timeline) -> checks (a finding's fix is a repair's request) -> the state store's engines and
Spark features -> cli. A module imports its own group and lower layers only, never a sibling (function-level imports
included), so e.g. the repair API does not import (and register) the checks."""
from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

TOP = ("cli", "checkpoint", "statestore")
FOUNDATION = ["checkpoint.errors", "checkpoint.batch_span", "checkpoint.numbers", "checkpoint.timeutil", "checkpoint.extras",
              "checkpoint.checksums", "checkpoint.layout", "checkpoint.fs", "checkpoint.logs.textlog", "checkpoint.records"]
"""What the state-file rooms of statestore/ may import of checkpoint/."""
STATE_FILES = ["statestore.formats", "statestore.rocksdb", "statestore.encodings", "statestore.keys"]
"""statestore/'s JVM-free knowledge of state files: what checkpoint/ may import of statestore/."""
# (layer rank, group, the modules and packages it holds, named relative to wmcheck; the longest name matching wins)
GROUPS = {
    "foundation": (0, FOUNDATION),
    "state files": (1, STATE_FILES),
    "logs": (2, ["checkpoint.logs", "checkpoint.operator_kinds", "checkpoint.not_a_checkpoint", "checkpoint.sources",
                 "checkpoint.locations", "checkpoint.repair_records"]),
    "model": (3, ["checkpoint.model", "checkpoint.relocation", "checkpoint.repartitions", "checkpoint.activity",
                  "checkpoint.pinned_conf", "checkpoint.conf_values", "checkpoint.broken_tail"]),
    "batch facts": (4, ["checkpoint.watermarks", "checkpoint.sinks", "checkpoint.batch_inputs",  # what each batch read
                        "checkpoint.kafka_retention", "checkpoint.source_labels"]),  # (the replay plan), stalls
    "checks": (5.5, ["checkpoint.checks", "checkpoint.validate", "checkpoint.verdict"]),  # findings carry repairs' requests
    "repair": (5, ["checkpoint.repair"]),
    "summary": (5, ["checkpoint.summary"]),
    "timeline": (5, ["checkpoint.watermarks.timeline"]),
    "state store": (6, ["statestore"]),  # the engines, their output, Spark's reader, replay, the repartition runner, compat
    "cli": (7, ["cli"]),
}
RANKS = {group: rank for group, (rank, _) in GROUPS.items()}


def group_of(module: str) -> str:
    """The group of a module named relative to ``wmcheck`` (``checkpoint.repair.api`` -> ``repair``)."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        found = [group for group, (_, names) in GROUPS.items() if ".".join(parts[:i]) in names]
        if found:
            return found[0]
    raise AssertionError(f"wmcheck.{module} belongs to no layer: add it to GROUPS")


def within(module: str, names: list[str]) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module relative to ``wmcheck``) of every import of a wmcheck module in ``path``, nested ones too."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("wmcheck."):
                base = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:  # ``from . import views`` imports a module (a C one has its stub)
                sub = ROOT.joinpath(*base, alias.name)
                module = sub.with_suffix(".py").is_file() or sub.with_suffix(".pyi").is_file() or sub.is_dir()
                target = base + [alias.name] if module else base
                out.append((node.lineno, ".".join(target)))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name.removeprefix("wmcheck.")) for a in node.names if a.name.startswith("wmcheck.")]
    return out


def allowed(importer: str, imported: str) -> bool:
    mine, theirs = group_of(importer), group_of(imported)
    return mine == theirs or RANKS[theirs] < RANKS[mine]


def test_modules_import_only_their_group_and_lower_layers():
    files = [p for top in TOP for p in (ROOT / top).rglob("*.py")]
    assert len(files) > 50
    wrong = [f"{p.relative_to(ROOT)}:{line} imports wmcheck.{target} ({group_of(module_name(p))} -> {group_of(target)})"
             for p in files for line, target in imports(p) if target.split(".")[0] in TOP
             and not allowed(module_name(p), target)]
    assert wrong == []


def test_the_rule_catches_sideways_and_upward_imports():
    assert not allowed("checkpoint.repair.backup", "checkpoint.checks.logs")
    assert not allowed("checkpoint.checks.logs", "statestore.spark.repartition")
    assert not allowed("statestore.formats.load", "checkpoint.model") and not allowed("checkpoint.layout", "statestore.formats.files")
    assert not allowed("checkpoint.model", "statestore.engine.python_engine")
    assert not allowed("checkpoint.repair.api", "checkpoint.validate")
    assert not allowed("checkpoint.model", "checkpoint.summary")
    assert not allowed("checkpoint.layout", "checkpoint.model")
    assert allowed("checkpoint.repair.api", "checkpoint.repair_records") and allowed("cli.show", "checkpoint.summary")
    assert allowed("statestore.spark.replay", "checkpoint.batch_inputs")
    assert allowed("checkpoint.model", "statestore.formats.files") and allowed("statestore.formats.schema", "checkpoint.logs.textlog")


ABOVE_THE_STATE_FILES = ["checkpoint.checks", "checkpoint.repair", "checkpoint.validate", "checkpoint.verdict",
                         "checkpoint.summary", "checkpoint.watermarks.timeline"]
"""What no room of statestore/ outside statestore/spark/ imports: the checks, the repairs, show's and timeline's facts."""
SPARK_ENTRIES = {"statestore", "statestore.engines"}
"""Where Spark's engine is chosen (``read_state``, ``--engine spark``), imported only when it is."""


def one_way_breaks(edges: list[tuple[str, str]]) -> list[str]:
    """Imports (importer, imported) against the one-way rule between checkpoint/ and statestore/."""
    wrong = []
    for mine, theirs in edges:
        if mine.startswith("checkpoint") and theirs.startswith("statestore") and not within(theirs, STATE_FILES):
            wrong.append(f"{mine} -> {theirs}: checkpoint/ imports statestore's state-file rooms only")
        elif within(mine, STATE_FILES) and theirs.startswith("checkpoint") and not within(theirs, FOUNDATION):
            wrong.append(f"{mine} -> {theirs}: the state-file rooms import checkpoint's foundation only")
        elif mine.startswith("statestore") and not within(mine, ["statestore.spark"]) and (
                within(theirs, ABOVE_THE_STATE_FILES) or within(theirs, ["statestore.spark"]) and mine not in SPARK_ENTRIES):
            wrong.append(f"{mine} -> {theirs}: only statestore/spark/ imports checks, repairs or Spark's room")
    return wrong


def test_checkpoint_and_the_state_store_import_each_other_one_way():
    """checkpoint/ imports of statestore/ only the state-file rooms (formats, rocksdb, encodings, keys), and they
    import of checkpoint/ only its foundation; the JVM-free rooms of statestore/ never import checkpoint's checks or
    repairs, nor statestore/spark/ (but where Spark's engine is chosen): the repartition runner, in statestore/spark/,
    is the one module of statestore/ that runs a repair."""
    edges = [(module_name(p), target) for p in package_files() for _, target in imports(p) if target.split(".")[0] in TOP]
    assert one_way_breaks(edges) == []
    assert "statestore.spark.repartition" in {mine for mine, theirs in edges if within(theirs, ["checkpoint.repair"])}
    assert one_way_breaks([("checkpoint.model", "statestore.engine.store_files"), ("statestore.formats.load", "checkpoint.model"),
                           ("statestore.engine.python_jobs", "checkpoint.repair.api"), ("statestore.discovery", "statestore.spark.reader"),
                           ("statestore.engines", "statestore.spark.spark_engine"), ("checkpoint.model", "statestore.formats.files")]) == [
        "checkpoint.model -> statestore.engine.store_files: checkpoint/ imports statestore's state-file rooms only",
        "statestore.formats.load -> checkpoint.model: the state-file rooms import checkpoint's foundation only",
        "statestore.engine.python_jobs -> checkpoint.repair.api: only statestore/spark/ imports checks, repairs or Spark's room",
        "statestore.discovery -> statestore.spark.reader: only statestore/spark/ imports checks, repairs or Spark's room"]


def test_importing_the_repair_api_imports_no_check():
    code = ("import sys, wmcheck.checkpoint.repair; "
            "print(sorted(m for m in sys.modules if m.split('.')[:3] in (['wmcheck', 'checkpoint', 'checks'], "
            "['wmcheck', 'checkpoint', 'validate'])))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


STATE_FORMAT_NAMES = re.compile(r"""["'](\.?(snapshot|zip|changelog)|\.delta)["']""")


def test_state_file_formats_are_named_in_their_registry_only():
    """Adding a state file format touches statestore/formats/registry.py (and its tests): no other module names one
    (``"delta"`` is also a Delta Lake source's kind, so only its suffix is looked for)."""
    files = [p for top in TOP for p in (ROOT / top).rglob("*.py") if p != ROOT / "statestore" / "formats" / "registry.py"]
    named = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1) if STATE_FORMAT_NAMES.search(line)]
    assert named == []
    assert STATE_FORMAT_NAMES.search('kind == "zip"') and STATE_FORMAT_NAMES.search("name.endswith('.delta')")


STATE_FILE_LITERAL = re.compile(r"\.(delta|snapshot|zip|changelog|sst)\b|^\.?(snapshot|zip|changelog)$|(^|/)SSTs(/|$)")
"""A state file's suffix (``.zip``, ``13.delta``, ``*.sst``) or RocksDB's shared directory (``SSTs``) in a string."""


def state_file_literals(path: Path, decoders: set[str]) -> list[str]:
    """Strings (docstrings aside) in ``path`` that spell a state file's suffix, the shared directory or a decoder."""
    tree = ast.parse(path.read_text(), str(path))
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
             and (STATE_FILE_LITERAL.search(n.value) or n.value in decoders)]
    return [f"{where}:{n.lineno}: {n.value!r}" for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def test_no_module_outside_the_state_store_spells_a_state_file_suffix_or_decoder():
    """Checks, repairs and the CLI ask statestore/formats/registry.py (a format's kind, its decoder object,
    ``SST_DIR``, ``file_name``): a new state file layout touches statestore/ only. (``records`` is also an output
    format of the CLI, so decoder names are looked for in checkpoint/.)"""
    from wmcheck.statestore.formats.registry import DECODERS

    names = {d.name for d in DECODERS}
    files = [ROOT / "api" / "__init__.py", *(ROOT / "cli").rglob("*.py"), *(ROOT / "checkpoint").rglob("*.py")]
    assert [hit for p in files for hit in state_file_literals(p, names if "checkpoint" in p.parts else set())] == []


def test_the_suffix_rule_catches_suffixes_the_shared_dir_and_decoder_names(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""Reads V.zip and SSTs/ (a docstring)."""\nA = f"{v}_*.zip"\nB = f"{d}/SSTs/"\nC = "rocksdb-zip"\n'
                     'D = "1.delta does not exist"\nE = "delta"\nF = "the deltas"\nG = "zip"\n')
    assert [hit.split(": ", 1)[1] for hit in state_file_literals(probe, {"rocksdb-zip"})] == [
        "'_*.zip'", "'/SSTs/'", "'rocksdb-zip'", "'1.delta does not exist'", "'zip'"]


def test_the_python_state_engine_imports_nothing_of_sparks_reader_and_the_command_only_the_engine_protocol():
    """Both engines sit behind ``statestore.engines``: ``wmcheck state`` names neither, and the JVM-free engine
    loads no module of Spark's reader (its targets and summaries are shared, not borrowed)."""
    code = ("import sys, wmcheck.statestore.engine.python_engine, wmcheck.cli.state; "
            "print(sorted(m for m in sys.modules if m in ('wmcheck.statestore.spark.reader', 'wmcheck.statestore.spark.spark_engine', "
            "'wmcheck.statestore.spark.session', 'pyspark')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    engine_modules = {"statestore.engine.python_engine", "statestore.spark.spark_engine", "statestore.spark.reader", "statestore.summary"}
    assert engine_modules & {target for _, target in imports(ROOT / "cli" / "state.py")} == set()


def imported_names(tree: ast.Module) -> set[str]:
    """The names a module binds by importing (``from x import y as z`` binds z; ``import a.b`` binds a)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.asname or a.name.split(".")[0] for a in node.names}
    return out


def root_name(node: ast.expr) -> str | None:
    """``a`` of ``a.b[c].d`` (None when the expression does not start with a name)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def private_imports(path: Path) -> list[str]:
    """Private names imported from another module, and private modules imported from outside their package."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    tree = ast.parse(path.read_text(), str(path))
    imported = {line: target for line, target in imports(path)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.lineno not in imported:
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name}")
    for line, target in imports(path):
        parts = target.split(".")
        for i, part in enumerate(parts):
            owner = ".".join(parts[:i])
            if part.startswith("_") and not part.startswith("__") and owner != package:
                out.append(f"{path.relative_to(ROOT)}:{line} imports the private module wmcheck.{target}")
    return out


def registrations(path: Path) -> list[str]:
    """Module-level statements that change something the module imported (an entry put into another module's
    table, a method called on it, a ``register`` call or decorator): registration by the side effect of importing."""
    tree = ast.parse(path.read_text(), str(path))
    names = imported_names(tree)
    where = f"{path.relative_to(ROOT)}"
    out = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        out += [f"{where}:{node.lineno} changes {root_name(t)}" for t in targets
                if isinstance(t, (ast.Attribute, ast.Subscript)) and root_name(t) in names]
        call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
        if call and root_name(call) in names and (isinstance(call.func, ast.Attribute) or "register" in ast.unparse(call.func)):
            out.append(f"{where}:{node.lineno} calls {ast.unparse(node.value.func)}")
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out += [f"{where}:{node.lineno} decorated by {ast.unparse(d)}" for d in node.decorator_list
                    if "register" in ast.unparse(d).lower()]
    return out


def package_files() -> list[Path]:
    return [p for top in TOP for p in (ROOT / top).rglob("*.py")]


def test_no_module_imports_another_modules_private_names():
    assert [line for p in package_files() for line in private_imports(p)] == []


def test_nothing_registers_itself_by_being_imported():
    """Checks and repairs are listed in their registries (checkpoint/checks/registry.py, checkpoint/repair/registry.py)."""
    assert [line for p in package_files() for line in registrations(p)] == []


def test_the_rules_catch_private_imports_and_registration_by_import(tmp_path, monkeypatch):
    import test_layers

    fake = tmp_path / "statestore"
    fake.mkdir()
    (fake / "spy.py").write_text("from wmcheck.checkpoint.repair._hooks import current\n"
                                 "from wmcheck.checkpoint.repair.api import _held, run\n"
                                 "from .requests import REQUESTS\n\n"
                                 "REQUESTS['x'] = object\nREQUESTS.update(y=object)\n\n\n@register\nclass A:\n    pass\n")
    (tmp_path / "checkpoint" / "repair").mkdir(parents=True)
    (tmp_path / "checkpoint" / "repair" / "_hooks.py").write_text("")
    monkeypatch.setattr(test_layers, "ROOT", tmp_path)
    assert private_imports(fake / "spy.py") == [
        "statestore/spy.py:2 imports _held", "statestore/spy.py:1 imports the private module "
        "wmcheck.checkpoint.repair._hooks"]
    assert registrations(fake / "spy.py") == ["statestore/spy.py:5 changes REQUESTS", "statestore/spy.py:6 calls "
                                              "REQUESTS.update", "statestore/spy.py:10 decorated by register"]


def test_every_repair_is_registered_once_by_its_command():
    from wmcheck.checkpoint.repair import registry, requests

    assert list(registry.REQUESTS) == ["rewind", "set-watermark", "relocate", "repartition", "reset-offsets"]
    assert all(cls.command == command for command, cls in registry.REQUESTS.items())
    assert not hasattr(requests, "REQUESTS")


# -- typed documents across seams -------------------------------------------------------------------

DOCUMENT_SEAMS = [*sorted((ROOT / "checkpoint" / "repair").glob("*.py")), *(ROOT / "cli" / f"{m}.py" for m in (
    "repair", "repartition", "replay", "output", "views", "repair_views", "reset_offsets")), ROOT / "statestore" / "spark" / "repartition.py"]
"""Where the repair document, the replay plan, a plan's request/before/after and backup manifests are made or read."""
PARSERS = re.compile(r"(^|_)(from_json|parse)|^read_manifest$")
"""Functions that turn JSON into those documents: the one place their keys are spelled."""
MAPPINGS = {"roots", "environ", "metadata", "value"}
"""Mappings that are no document: the roots by name (checkpoint, sink), the environment, a dataclass field's metadata,
a source offset's JSON as Spark wrote it (``SourceOffset.value``)."""
NOT_DOCUMENTS = {("views.py", "state_rows")}
"""The rows of the state itself (records read from the stores)."""


def string_key_lookups(path: Path) -> list[str]:
    """``x["key"]`` and ``x.get("key")`` outside a parser, on anything but :data:`MAPPINGS`."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if PARSERS.search(name) or (path.name, name) in NOT_DOCUMENTS:
                continue
            key = receiver = None
            if isinstance(child, ast.Subscript) and isinstance(child.ctx, ast.Load):
                key, receiver = child.slice, child.value
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.func.attr == "get" \
                    and child.args:
                key, receiver = child.args[0], child.func.value
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and not (
                    isinstance(receiver, (ast.Name, ast.Attribute)) and
                    (receiver.id if isinstance(receiver, ast.Name) else receiver.attr) in MAPPINGS):
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{where}:{child.lineno} ({name}): {ast.unparse(child)}")
            visit(child, name)

    visit(ast.parse(path.read_text()), "")
    return found


def test_documents_are_typed_across_seams():
    """Results cross from the library to the CLI as frozen dataclasses: no string-key lookups outside parsers."""
    assert [hit for path in DOCUMENT_SEAMS for hit in string_key_lookups(path)] == []


def test_the_document_rule_catches_a_string_key_lookup(tmp_path):
    probe = tmp_path / "repair.py"
    probe.write_text((ROOT / "cli" / "repair.py").read_text() + "\n\ndef shown(doc, roots):\n"
                     '    return doc["before"]["watermark_ms"], doc.get("steps"), roots["sink"]\n\n\n'
                     "def plan_from_json(obj):\n    return obj[\"steps\"]\n")
    assert [hit.split(": ", 1)[1] for hit in string_key_lookups(probe)] == [
        "doc['before']['watermark_ms']", "doc['before']", "doc.get('steps')"]


@functools.cache
def package_modules() -> frozenset[str]:
    return frozenset(module_name(p) for p in package_files())


def runtime_imports(path: Path) -> list[str]:
    """The wmcheck modules ``path`` imports when it runs (function-level imports included, ``if TYPE_CHECKING:``
    blocks left out), each named by the module it is (a name imported from a package is that package)."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for inner in node.body for n in ast.walk(inner)}
    lines = {n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in typing_only}
    modules = package_modules()
    out = []
    for line, target in imports(path):
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if line in lines and target and target != module_name(path):
            out.append(target)
    return out


def import_cycles() -> list[list[str]]:
    """Groups of wmcheck modules that import each other, directly or through others, when they run."""
    graph = {module_name(p): set(runtime_imports(p)) for p in package_files()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycles():
    """No two modules import each other, not even through a function-level import."""
    assert import_cycles() == []


LOG_PATH = re.compile(r'f"\{(OFFSETS|COMMITS|SOURCES|SINK_LOG)\}/')
COMPACTION_RULE = re.compile(r"%\s*interval\b")


def test_spark_log_paths_and_the_compaction_rule_are_written_in_metadata_log_only():
    """A metadata log's file paths come from its LogKind (``OFFSET_LOG.path(12)``), never built by hand, and Spark's
    compaction rule ``(N + 1) % interval`` is written once."""
    found = {(p.relative_to(ROOT).as_posix(), pattern.pattern) for p in package_files()
             for pattern in (LOG_PATH, COMPACTION_RULE) for line in p.read_text().splitlines() if pattern.search(line)}
    assert found == {("checkpoint/logs/metadata_log.py", COMPACTION_RULE.pattern)}


def test_one_function_opens_a_file_sink():
    defined = [p.relative_to(ROOT).as_posix() for p in package_files()
               for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.FunctionDef) and node.name == "open_file_sink"]
    assert defined == ["checkpoint/locations.py"]


def untyped_shared_state(path: Path) -> list[str]:
    """Attributes of a check module's ``Context`` that hold anything by a string key (``dict[str, Any]``), and
    reads or writes of a ``memo``: what checks share goes through ``ctx.once(function)``, typed by the function."""
    tree = ast.parse(path.read_text(), str(path))
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute) \
                and re.fullmatch(r"dict\[str, *Any\]", ast.unparse(node.annotation)):
            hits.append(f"{path.name}:{node.lineno}: self.{node.target.attr}: {ast.unparse(node.annotation)}")
        if isinstance(node, ast.Attribute) and node.attr == "memo":
            hits.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return hits


def test_checks_share_results_through_typed_services_not_string_keys():
    checks = sorted((ROOT / "checkpoint" / "checks").glob("*.py"))
    assert [hit for path in checks for hit in untyped_shared_state(path)] == []


def test_the_shared_state_rule_catches_a_memo(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import Any\n\n\nclass Context:\n    def __init__(self):\n"
                     "        self.memo: dict[str, Any] = {}\n\n\ndef plans(ctx):\n    return ctx.memo['plans']\n")
    assert untyped_shared_state(probe) == ["probe.py:6: self.memo: dict[str, Any]", "probe.py:6: self.memo",
                                           "probe.py:10: ctx.memo"]


def test_dataclasses_are_wmchecks_deferred_ones():
    """Every dataclass of the sources is made by wmcheck's ``@dataclass`` (checkpoint/records.py: made when first
    used), not by the standard library's at import."""
    direct = re.compile(r"^from dataclasses import [^\n]*\bdataclass\b|@dataclasses\.dataclass", re.M)
    found = [str(p.relative_to(ROOT)) for top in (*TOP, "api") for p in (ROOT / top).rglob("*.py")
             if p != ROOT / "checkpoint" / "records.py" and direct.search(p.read_text())]
    assert found == []


SOURCE_KINDS = frozenset({"file", "kafka", "delta", "rate", "long", "none", "unknown"})
"""The kinds of source wmcheck tells apart (``SourceOffset.kind``; ``rate`` for a kind of its own to come)."""
NOT_SOURCE_KINDS = {("checkpoint/repair/trust.py", "found.kind"), ("checkpoint/repair/entries.py", "kind"),
                    *(("checkpoint/repair/" + m, "s.kind") for m in ("sink_effects.py", "sink_step.py", "requests.py"))}
"""Kinds of other things compared with the same words: a backed-up file-system entry's (``file`` or ``link``), a plan's
sink's (``delta``, ``kafka``, ``file``: :mod:`wmcheck.checkpoint.sinks`)."""


def _kind_names(node: ast.expr) -> set[str]:
    """The source kind names a constant, or a tuple, list, set or ``frozenset({...})`` of constants, spells."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) in {"frozenset", "set", "tuple"} and node.args:
        return _kind_names(node.args[0])
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {n for e in node.elts for n in _kind_names(e)}
    if isinstance(node, ast.Dict):
        return {n for k in node.keys if k is not None for n in _kind_names(k)}
    return {node.value} & SOURCE_KINDS if isinstance(node, ast.Constant) and isinstance(node.value, str) else set()


def _is_kind(node: ast.expr) -> bool:
    """``kind``, ``x.kind``, ``kinds``, or a call of a function naming a kind (``source_kind(ckpt, src)``)."""
    if isinstance(node, ast.Call):
        return _is_kind(node.func) or "_kind" in ast.unparse(node.func)
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name.startswith("kind")


def source_kind_names(path: Path) -> list[str]:
    """Where ``path`` tells source kinds apart by name: a kind (``src.kind``, ``kind``) compared with a kind's name
    (``== "kafka"``, ``in ("file", "long")``), or a collection of two or more kinds' names (``KNOWN = {"file", ...}``)."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            kinds = [o for o in operands if _is_kind(o) and (where, ast.unparse(o)) not in NOT_SOURCE_KINDS]
            if kinds and any(_kind_names(o) for o in operands):
                hits.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and len(_kind_names(node)) >= 2:
            hits.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return hits


def test_source_kinds_are_told_apart_in_their_own_modules_only():
    """Adding a kind of source touches checkpoint/sources/ (its module and the registry): no other module compares a
    kind's name; they ask the kind object (``SourceOffset.source``, ``sources.registry``). The ``"kind"`` of outputs
    is its name."""
    files = [p for p in [*package_files(), ROOT / "api" / "__init__.py"] if "sources" not in p.relative_to(ROOT).parts[:2]]
    assert [hit for p in files for hit in source_kind_names(p)] == []


def test_the_source_kind_rule_catches_comparisons_and_lists_of_kinds(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('FILE_KINDS = ("file", "long")\nKNOWN = frozenset({"kafka", "delta"})\n\n\n'
                     'def f(src, kind, found):\n    a = src.kind == "kafka" or kind in ("none",) or "delta" != src.kind\n'
                     '    b = found.kind == "link" or src.kind in FILE_KINDS or src.role == "file"\n'
                     '    return a, b, source_kind(None, src) != "file"\n')
    assert [hit.split(": ", 1)[1] for hit in source_kind_names(probe)] == [
        "('file', 'long')", "{'kafka', 'delta'}", "src.kind == 'kafka'", "kind in ('none',)", "'delta' != src.kind",
        "source_kind(None, src) != 'file'"]
