"""Read ``dcgmi diag -r N -j``: each test's status per GPU, the failing GPUs and DCGM's own messages.

DCGM publishes no stable schema for this JSON (DCGM docs, "Diagnostic Errors": "That JSON has no published stable
schema"), so the reader accepts both shapes DCGM has printed and refuses anything else:

* DCGM 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results": [...]}]}],
  "version"}}``, each result naming its GPUs in ``gpu_ids`` (a string ``"0,1,2"`` or a number); a ``null`` may sit
  between tests (NVIDIA's own capture, tests/data/burn-in/dcgm-3.1.0-nvidia-real-output.json, has eight).
* DCGM 4.x: the root key ``"DCGM Diagnostic"`` and results naming ``entity_group``/``entity_id``, the version under
  ``metadata`` (key names from NVIDIA/DCGM ``nvvs/include/NvvsJsonStrings.h``).

Statuses are read case-insensitively (3.1.0 prints ``PASS``, 3.3 ``Pass``); a status this reader does not know is
kept as ``unknown`` and never counts as a pass. Text before the JSON document (a banner) is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from fmcluster.backends.burn_in.outputs import UnreadableOutput

Status = Literal["pass", "fail", "warn", "skip", "not_run", "unknown"]
_STATUSES: dict[str, Status] = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail",
                                "warn": "warn", "warning": "warn", "skip": "skip", "skipped": "skip",
                                "not run": "not_run", "notrun": "not_run"}
_ROOTS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
TOOL = "dcgmi diag -j"


@dataclass(frozen=True)
class DiagResult:
    category: str
    test: str
    gpus: tuple[int, ...]  # empty when DCGM names no GPU for the result
    status: Status
    messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiagReport:
    version: str | None
    results: tuple[DiagResult, ...]
    runtime_error: str | None = None

    @property
    def failures(self) -> tuple[DiagResult, ...]:
        return tuple(r for r in self.results if r.status in ("fail", "unknown"))

    @property
    def warnings(self) -> tuple[DiagResult, ...]:
        return tuple(r for r in self.results if r.status == "warn")

    @property
    def failing_gpus(self) -> tuple[int, ...]:
        return tuple(sorted({gpu for r in self.failures for gpu in r.gpus}))

    @property
    def skipped(self) -> tuple[DiagResult, ...]:
        return tuple(r for r in self.results if r.status in ("skip", "not_run"))

    @property
    def passed(self) -> bool:
        """Ran, none failed, and at least one result passed or warned: a report whose every test was skipped
        (DCGM skips tests it is not allowed to run, NVIDIA/DCGM issue 55) checked nothing. Warnings do not fail a
        node (DCGM's own verdict); the gate shows them."""
        ran = any(r.status in ("pass", "warn") for r in self.results)
        return self.runtime_error is None and ran and not self.failures

    def summary(self) -> str:
        if self.runtime_error:
            return f"DCGM {self.version or '?'} did not run: {self.runtime_error}"
        if not self.failures:
            return f"DCGM {self.version or '?'}: {len(self.results)} result(s) passed" + (
                f", {len(self.warnings)} warning(s)" if self.warnings else "")
        parts = [f"{r.test} on GPU {','.join(map(str, r.gpus)) or '?'}: {r.status}"
                 + (f" ({r.messages[0]})" if r.messages else "") for r in self.failures]
        return f"DCGM {self.version or '?'}: " + "; ".join(parts)


def parse(text: str) -> DiagReport:
    document = _document(text)
    root_key = next((key for key in _ROOTS if key in document), None)
    if root_key is None:
        raise UnreadableOutput(TOOL, f"no {' or '.join(repr(k) for k in _ROOTS)} key (keys: {sorted(document)})",
                               text)
    root = document[root_key]
    if not isinstance(root, dict):
        raise UnreadableOutput(TOOL, f"{root_key!r} is not an object", text)
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    version = root.get("version") or metadata.get("version")
    error = root.get("runtime_error") or document.get("runtime_error")
    categories = root.get("test_categories")
    if categories is None and error:
        return DiagReport(_text(version), (), str(error))
    if not isinstance(categories, list):
        raise UnreadableOutput(TOOL, "no test_categories list", text)
    results = tuple(_results(categories, text))
    return DiagReport(_text(version), results, str(error) if error else None)


def _document(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        raise UnreadableOutput(TOOL, "no JSON document", text)
    try:
        document, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as err:
        raise UnreadableOutput(TOOL, f"broken JSON ({err.msg} at line {err.lineno})", text) from None
    if not isinstance(document, dict):
        raise UnreadableOutput(TOOL, "the JSON document is not an object", text)
    return document


def _results(categories: list[Any], text: str) -> Iterable[DiagResult]:
    for category in categories:
        if category is None:
            continue
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise UnreadableOutput(TOOL, "a test category without a tests list", text)
        name = str(category.get("category", "?"))
        for test in category["tests"]:
            if test is None:  # DCGM 3.1 prints a null between tests
                continue
            if not isinstance(test, dict) or not isinstance(test.get("results"), list):
                raise UnreadableOutput(TOOL, f"a test in {name} without a results list", text)
            for result in test["results"]:
                if result is None:
                    continue
                if not isinstance(result, dict) or "status" not in result:
                    raise UnreadableOutput(TOOL, f"a result of {test.get('name')!r} without a status", text)
                yield DiagResult(name, str(test.get("name", "?")), _gpus(result, text),
                                 _STATUSES.get(str(result["status"]).strip().lower(), "unknown"),
                                 tuple(_messages(result)))


def _gpus(result: dict[str, Any], text: str) -> tuple[int, ...]:
    if "entity_id" in result:
        if str(result.get("entity_group", "GPU")).upper() != "GPU":
            return ()
        raw: Any = result["entity_id"]
    else:
        raw = result.get("gpu_ids", result.get("gpu_id"))
    if raw is None or raw == "":
        return ()
    try:
        return tuple(int(part) for part in str(raw).split(","))
    except ValueError:
        raise UnreadableOutput(TOOL, f"GPU ids {raw!r} are not numbers", text) from None


def _messages(result: dict[str, Any]) -> Iterable[str]:
    for key in ("warnings", "info"):
        value = result.get(key)
        for item in value if isinstance(value, list) else [value] if value else []:
            if isinstance(item, dict):
                item = item.get("warning") or item.get("message") or ""
            if item:
                yield str(item)


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None
