"""What the resources of one command share: where to call, the cluster's identity, the values issued so far."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fmcluster.engine.references import resolve
from fmcluster.engine.unknown import UNKNOWN
from fmcluster.engine.waiting import Stop


@dataclass
class Context:
    """What resources share during one command: where to call, the cluster's identity, and the values
    (ids, names) issued so far, which fill the documents' ``${kind.key.attribute}`` references."""

    cluster: str
    region: str
    client: Callable[[str], Any]
    cluster_id: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    values_lock: threading.Lock = field(default_factory=threading.Lock)
    # Tags read during this command, by ARN. fmcluster sets tags only at creation, so they hold for the whole
    # command: polling, discovery and drift need not read them again (an ARN carries the resource's id, so a
    # resource made again under the same name is read again).
    tags_by_arn: dict[str, dict[str, str]] = field(default_factory=dict)
    # When the command's waits must end (set on Ctrl-C; its deadline is the command's --timeout): resources
    # that wait inside a call pause on it (fmcluster.engine.waiting.pause) instead of sleeping on their own.
    stop: Stop = field(default_factory=Stop)
    # What a read-only pass (status, diff, create's plan) read so far: set only inside fmcluster.engine.reads.reading,
    # so a walk that writes never reads from it.
    snapshot: Any = None

    def tags(self, arn: str, read: Callable[[], dict[str, str]]) -> dict[str, str]:
        if arn not in self.tags_by_arn:
            self.tags_by_arn[arn] = read()
        return self.tags_by_arn[arn]

    def publish(self, outputs: dict[str, Any]) -> None:
        with self.values_lock:
            self.values.update(outputs)

    def resolve(self, body: Any, partial: bool = False) -> Any:
        """``body`` with its references filled; with ``partial``, a value not issued yet becomes
        :data:`UNKNOWN` instead of an error (plans are computed before anything exists)."""
        with self.values_lock:
            values = dict(self.values)
        return resolve(body, values, missing=UNKNOWN if partial else None)
