"""Reports of ``wmcheck check`` for CI systems: GitHub Actions annotations and JUnit XML."""
from __future__ import annotations

import posixpath
from typing import Sequence
from xml.etree import ElementTree as ET

from wmcheck.checkpoint.fs import scheme_of
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.validate import CHECKS, OPEN_FAILED, Check, Finding, fails

from .fixes import fix_text
from .text import workflow_escape


@dataclass(frozen=True)
class Result:
    """The findings of one checkpoint, with what was asked of it."""

    location: str
    findings: list[Finding]
    checks: Sequence[Check]
    has_sink: bool

    @property
    def unreadable(self) -> bool:
        return any(f.code == OPEN_FAILED for f in self.findings)

    def skip_reason(self, check: Check) -> str | None:
        """Why ``check`` did not run on this checkpoint, if it did not."""
        if check not in self.checks:
            return "not selected (--select/--ignore)"
        if check.needs_sink and not self.has_sink:
            return "needs --file-sink"
        return None

    def summary(self, strict: bool) -> str:
        """One line: the checkpoint, pass or fail, and the counts."""
        if self.unreadable:
            return f"{self.location}: cannot be read"
        errors = sum(f.severity == "error" for f in self.findings)
        warnings = len(self.findings) - errors
        status = "FAIL" if any(fails(f, strict) for f in self.findings) else "ok"
        ran = sum(1 for c in self.checks if self.skip_reason(c) is None)  # WM000 too: the checkpoint was opened
        return f"{self.location}: {status}: {errors} error(s), {warnings} warning(s) from {ran} checks"


def finding_file(finding: Finding) -> str | None:
    """The finding's file as a path relative to where wmcheck ran (None for remote checkpoints)."""
    if scheme_of(finding.checkpoint) or scheme_of(finding.path):
        return None
    return posixpath.normpath(posixpath.join(finding.checkpoint, finding.path)) if finding.path else finding.checkpoint


def github(results: Sequence[Result], strict: bool) -> str:
    """``::error``/``::warning`` annotations, then one summary line per checkpoint."""
    lines = []
    for result in results:
        for f in result.findings:
            level = "error" if f.severity == "error" else "warning"
            props = [f"title={workflow_escape(f'{f.code} {CHECKS[f.code].title}', True)}"]
            where = finding_file(f)
            if where:
                props.insert(0, f"file={workflow_escape(where, True)}")
            lines.append(f"::{level} {','.join(props)}::{workflow_escape(f'{f.message}. Fix: {fix_text(f.fix, f.checkpoint)}')}")
    lines += [r.summary(strict) for r in results]
    return "\n".join(lines)


def junit(results: Sequence[Result], strict: bool) -> str:
    """JUnit XML: a test suite per checkpoint, a test case per check."""
    root = ET.Element("testsuites", name="wmcheck check")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for result in results:
        suite = ET.SubElement(root, "testsuite", name=result.location)
        counts = dict.fromkeys(totals, 0)
        for check in CHECKS.values():
            if (check.code == OPEN_FAILED) != result.unreadable:
                continue
            case = ET.SubElement(suite, "testcase", classname=result.location, name=f"{check.code} {check.title}")
            counts["tests"] += 1
            mine = [f for f in result.findings if f.code == check.code]
            reason = result.skip_reason(check) if check.run is not None else None
            if check.code == OPEN_FAILED:
                ET.SubElement(case, "error", message=mine[0].message, type=OPEN_FAILED).text = \
                    f"{mine[0].message}. Fix: {fix_text(mine[0].fix, mine[0].checkpoint)}"
                counts["errors"] += 1
            elif reason:
                ET.SubElement(case, "skipped", message=reason)
                counts["skipped"] += 1
            elif any(fails(f, strict) for f in mine):
                text = "\n".join(f"{f.path}: {f.message}. Fix: {fix_text(f.fix, f.checkpoint)}" for f in mine)
                ET.SubElement(case, "failure", message=f"{mine[0].path}: {mine[0].message}", type=mine[0].severity).text = text
                counts["failures"] += 1
            elif mine:
                ET.SubElement(case, "system-out").text = "\n".join(
                    f"warning: {f.path}: {f.message}. Fix: {fix_text(f.fix, f.checkpoint)}" for f in mine)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
