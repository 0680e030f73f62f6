"""Reports of ``wmcheck compat`` for CI systems: a GitHub Actions annotation and JUnit XML."""
from __future__ import annotations

from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from wmcheck.checkpoint.fs import scheme_of

from .compat_views import compat_summary
from .text import workflow_escape

if TYPE_CHECKING:
    from wmcheck.statestore.spark.compat import CompatReport


def compat_github(report: "CompatReport", allow_output_change: bool) -> str:
    """One annotation (error when the exit code fails, else a notice), then the summary line."""
    code = report.exit_code(allow_output_change)
    level = "error" if code else "warning" if report.changes else "notice"
    title = f"wmcheck compat: {report.verdict}" + (f" ({report.refusal.error_class})" if report.refusal else "")
    where = "" if scheme_of(report.checkpoint) else f"file={workflow_escape(report.checkpoint, True)},"
    summary = compat_summary(report, allow_output_change)
    return f"::{level} {where}title={workflow_escape(title, True)}::{workflow_escape(summary)}\n{summary}"


def compat_junit(report: "CompatReport", allow_output_change: bool) -> str:
    """A test suite with four cases: the restart, the output, the state (its rows and schemas), the watermark after
    the batch (its delays too), and with a baseline a fifth, the output of the next batches against the old code's;
    all but the restart skipped when Spark refused. A failure for each change that makes
    the exit code 1."""
    root = ET.Element("testsuites", name="wmcheck compat")
    suite = ET.SubElement(root, "testsuite", name=report.checkpoint)
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    output = report.output
    differs = {
        "output": output is not None and output.differs,
        "state": any(s.differs for s in report.state) or bool(report.schemas),
        "watermark": report.watermark is not None and report.watermark.differs,
        "next batches": report.next is not None and report.next.differs,
    }
    summary = compat_summary(report, allow_output_change)
    for name in ("restart", "output", "state", "watermark") + (("next batches",) if report.next is not None else ()):
        title = f"{name} of batch {report.batch}" if name != "next batches" else "output of the next batches"
        case = ET.SubElement(suite, "testcase", classname=report.query, name=title)
        counts["tests"] += 1
        if name == "restart":
            if report.refusal is not None:
                ET.SubElement(case, "failure", message=summary, type=report.refusal.error_class).text = report.refusal.message
                counts["failures"] += 1
        elif report.refusal is not None:
            ET.SubElement(case, "skipped", message="the new query does not restart")
            counts["skipped"] += 1
        elif name == "next batches" and report.next is not None and report.next.not_run:
            ET.SubElement(case, "skipped", message=report.next.note or "not run")
            counts["skipped"] += 1
        elif differs[name] and not allow_output_change:
            ET.SubElement(case, "failure", message=summary, type=f"{name} differs")
            counts["failures"] += 1
        elif differs[name]:
            ET.SubElement(case, "system-out").text = f"allowed: {summary}"
    for key, value in counts.items():
        suite.set(key, str(value))
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
