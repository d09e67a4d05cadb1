"""Parts of a cluster a command could not read while AWS answered: today the cluster's Kubernetes API refusing
this caller (its EKS access entry deleted, say). Discovery notes them on the command's Context instead of failing,
so that ``status`` still shows what AWS holds (with the refusal as a problem) and ``destroy`` still tears the AWS
side down: the Kubernetes objects go with their cluster."""

from __future__ import annotations

import threading

from fmcluster.engine import Context

_lock = threading.Lock()


def note(ctx: Context, part: str, why: str) -> None:
    """Record that ``part`` (e.g. ``kubernetes``) was not read, and why (one line); the first reason stays."""
    with _lock:
        vars(ctx).setdefault("_unread", {}).setdefault(part, " ".join(why.split()))


def unread(ctx: Context) -> dict[str, str]:
    """Part → why, for what this command could not read so far."""
    with _lock:
        return dict(vars(ctx).get("_unread", {}))
