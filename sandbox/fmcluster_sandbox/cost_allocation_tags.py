"""Cost Explorer's cost allocation tags (ListCostAllocationTags, UpdateCostAllocationTagsStatus), which moto lacks.

Billing User Guide, "Activating user-defined cost allocation tags": a user-defined tag key shows up among the cost
allocation tags once a resource carries it, Inactive; costs are grouped by it only after it is activated (here:
UpdateCostAllocationTagsStatus). AWS takes up to 24 hours to list a new key; the sandbox lists it at once. Keys are
those on EC2 resources (moto) and on PCS and EKS resources (the emulators), handed in by the server; ``aws:`` keys
are AWS's own and not listed as user-defined. UpdateCostAllocationTagsStatus (Cost Explorer API reference): at most
20 entries, setting a status a key already has is no change, and an entry that cannot be updated comes back in
``Errors`` (AWS documents no codes; the sandbox's for a key no resource carries is ``TagKeyNotFound``).
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
from collections.abc import Callable
from typing import Any

from fmcluster_sandbox import model_check

Answer = tuple[int, dict[str, str], bytes]
TARGET_PREFIX = "AWSInsightsIndexService."
OPERATIONS = ("ListCostAllocationTags", "UpdateCostAllocationTagsStatus")


class CostAllocationTags:
    def __init__(self, tag_keys: Callable[[str], set[str]], now: Callable[[], _dt.datetime]):
        self._tag_keys, self._now = tag_keys, now
        self._status: dict[tuple[str, str], tuple[str, str]] = {}  # (account, key) -> (status, last updated)
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._status.clear()

    def handle(self, operation: str, body: bytes, account: str) -> Answer:
        try:
            params = json.loads(body or b"{}")
        except ValueError as exc:
            return _error("ValidationException", f"Cannot parse request body: {exc}")
        problems = model_check.check("ce", operation, params)
        if problems:
            return _error("ValidationException", "; ".join(f"{field}: {message}" for field, message in problems))
        if operation == "UpdateCostAllocationTagsStatus":
            return _ok({"Errors": self._update(account, params["CostAllocationTagsStatus"])})
        return _ok(self._list(account, params))

    def _entries(self, account: str) -> list[dict[str, Any]]:
        seen = {key for key in self._tag_keys(account) if not key.startswith("aws:")}
        with self._lock:
            keys = seen | {key for (acct, key) in self._status if acct == account}
            entries = []
            for key in sorted(keys):
                status, updated = self._status.get((account, key), ("Inactive", None))
                entry = {"TagKey": key, "Type": "UserDefined", "Status": status}
                if updated:
                    entry["LastUpdatedDate"] = updated
                entries.append(entry)
        return entries

    def _list(self, account: str, params: dict[str, Any]) -> dict[str, Any]:
        entries = self._entries(account)
        if params.get("Status"):
            entries = [e for e in entries if e["Status"] == params["Status"]]
        if params.get("Type"):
            entries = [e for e in entries if e["Type"] == params["Type"]]
        if params.get("TagKeys"):
            entries = [e for e in entries if e["TagKey"] in params["TagKeys"]]
        size = params.get("MaxResults") or 100
        start = int(params.get("NextToken") or 0)
        out: dict[str, Any] = {"CostAllocationTags": entries[start:start + size]}
        if start + size < len(entries):
            out["NextToken"] = str(start + size)
        return out

    def _update(self, account: str, changes: list[dict[str, str]]) -> list[dict[str, str]]:
        known = {entry["TagKey"] for entry in self._entries(account)}
        errors = []
        stamp = self._now().isoformat(timespec="seconds").replace("+00:00", "Z")
        with self._lock:
            for change in changes:
                key, status = change["TagKey"], change["Status"]
                if key not in known:
                    errors.append({"TagKey": key, "Code": "TagKeyNotFound",
                                   "Message": f"No resource in this account carries the tag key {key}"})
                elif self._status.get((account, key), ("Inactive", None))[0] != status:
                    self._status[(account, key)] = (status, stamp)
        return errors


def _ok(result: dict[str, Any]) -> Answer:
    return 200, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(result).encode()


def _error(code: str, message: str) -> Answer:
    body = json.dumps({"__type": code, "Message": message}).encode()
    return 400, {"Content-Type": "application/x-amz-json-1.1"}, body


def ec2_tag_keys(account: str) -> set[str]:
    """Tag keys on the account's EC2 resources (moto), every Region it used."""
    from moto.ec2.models import ec2_backends

    keys: set[str] = set()
    for backend in list(ec2_backends[account].values()):
        for tags in list(backend.tags.values()):
            keys.update(tags)
    return keys
