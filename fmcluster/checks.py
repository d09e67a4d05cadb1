"""One check's verdict, shared by ``validate`` and ``preflight`` (and printed by :mod:`fmcluster.output.ui`), and
their ``--json`` report (docs/checks-json.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Status = Literal["passed", "failed", "skipped", "warning"]


@dataclass
class CheckResult:
    name: str
    status: Status
    summary: str
    details: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """docs/checks-json.md: details without the ``fix: `` lines, which become ``fix`` (null: none)."""
        fixes = [d.removeprefix("fix: ") for d in self.details if d.startswith("fix: ")]
        return {"name": self.name, "status": self.status, "summary": self.summary,
                "details": [d for d in self.details if not d.startswith("fix: ")],
                "fix": "\n".join(fixes) or None}


def checks_report(results: list[CheckResult], **about: object) -> dict[str, object]:
    """The ``--json`` object of ``validate`` and ``preflight``: ``ok`` is false when any check failed."""
    return {**about, "ok": not any(r.status == "failed" for r in results), "checks": [r.to_json() for r in results]}
