"""``fmcluster kubeconfig``: a kubeconfig for a cluster's Kubernetes API, whose user runs ``fmcluster kubeconfig NAME
--token`` for each fresh bearer token (as ``aws eks update-kubeconfig`` writes ``aws eks get-token``), so it needs
nothing but fmcluster and the credentials that made the cluster."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from fmcluster.backends import registry
from fmcluster.backends.protocol import Capability, KubeEndpoint
from fmcluster.connection import aws
from fmcluster.errors import UsageError
from fmcluster.state.store import StateStore
from fmcluster.verbs.lifecycle.common import open_cluster

EXEC_API = "client.authentication.k8s.io/v1beta1"
# EKS tokens are presigned for 60 seconds (awscli get_token.py URL_TIMEOUT); kubectl asks again after this.
TOKEN_LIFETIME = dt.timedelta(seconds=60)


def _access(name: str) -> tuple[KubeEndpoint, str]:
    session = open_cluster(StateStore(readonly=True), name)
    access = session.backend.kube_access(session.context)
    if access is None:
        profile = registry.profile(session.backend.name)
        if Capability.KUBERNETES_API not in session.backend.capabilities:
            raise UsageError(f"{name} is a {profile.display} cluster: it has no Kubernetes API (`fmcluster ssh "
                             f"{name}` reaches its {profile.login_role})")
        raise UsageError(f"the Kubernetes API of {name} is not up in {session.region}; `fmcluster status {name}` "
                         "shows what exists")
    return access, session.record.endpoint_url if session.record else aws.target_label()


@aws.read_only()
def kubeconfig(name: str) -> dict[str, Any]:
    """The kubeconfig document for cluster ``name``."""
    access, where = _access(name)
    args = ["kubeconfig", name, "--token", "--region", access.region]
    env = []
    if where.startswith("sandbox:"):
        args = ["--sandbox", *args]
    elif where != "aws":
        env.append({"name": "AWS_ENDPOINT_URL", "value": where})
    if aws.target().profile:
        env.append({"name": "AWS_PROFILE", "value": aws.target().profile})
    context = f"fmcluster-{name}"
    command, prefix = exec_command()
    user: dict[str, Any] = {"apiVersion": EXEC_API, "command": command, "args": [*prefix, *args],
                            "interactiveMode": "Never", "provideClusterInfo": False}
    if env:
        user["env"] = env
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": context, "preferences": {},
        "clusters": [{"name": context, "cluster": {"server": access.server,
                                                   "certificate-authority-data": access.certificate_authority}}],
        "users": [{"name": context, "user": {"exec": user}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
    }


def exec_command() -> tuple[str, list[str]]:
    """The command that runs this fmcluster, for kubectl to run again: the entry point's absolute path (a bare
    ``fmcluster`` fails for anyone who runs ``.venv/bin/fmcluster`` without the venv on PATH), or this Python with
    ``-m fmcluster`` when fmcluster was started as a module."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if not argv0 or argv0.endswith(".py") or argv0 == "-c":
        return os.path.abspath(sys.executable), ["-m", "fmcluster"]
    found = argv0 if os.sep in argv0 else shutil.which(argv0)
    if found is None:
        return os.path.abspath(sys.executable), ["-m", "fmcluster"]
    return os.path.abspath(found), []


def merge(existing: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` merged into the kubeconfig ``existing`` as ``aws eks update-kubeconfig`` does: its cluster, user and
    context replace the entries of the same name (or are added), every other entry stays, and its context becomes
    the current one."""
    merged: dict[str, Any] = dict(existing or {})
    merged.setdefault("apiVersion", "v1")
    merged.setdefault("kind", "Config")
    merged.setdefault("preferences", {})
    for section in ("clusters", "users", "contexts"):
        entries = [entry for entry in (merged.get(section) or []) if isinstance(entry, dict)]
        for item in new[section]:
            at = next((i for i, entry in enumerate(entries) if entry.get("name") == item["name"]), None)
            if at is None:
                entries.append(item)
            else:
                entries[at] = item
        merged[section] = entries
    merged["current-context"] = new["current-context"]
    return merged


def write(path: str, document: dict[str, Any]) -> None:
    """Write ``document`` to ``path``, merged into the kubeconfig already there, readable by its owner alone (0600,
    also when the file was wider before: it holds how to get a cluster-admin token). Atomic: a crash leaves the old
    file or the new one."""
    target = Path(os.path.realpath(path))  # ~/.kube/config may be a link: write where it points
    existing: Any = None
    if target.exists():
        try:
            existing = yaml.safe_load(target.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise UsageError(f"{path}: not a kubeconfig fmcluster can merge into ({exc}); name another file with -o"
                             ) from None
        if existing is not None and not (isinstance(existing, dict) and existing.get("kind", "Config") == "Config"):
            raise UsageError(f"{path}: not a kubeconfig (a YAML mapping of kind Config); name another file with -o")
    text = yaml.safe_dump(merge(existing, document), sort_keys=False)
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)  # mode 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(temporary, 0o600)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


@aws.read_only()
def exec_credential(name: str) -> dict[str, Any]:
    """What kubectl's exec plugin protocol asks for: a fresh token, and when it expires."""
    access, _ = _access(name)
    expires = dt.datetime.now(dt.timezone.utc) + TOKEN_LIFETIME
    return {"kind": "ExecCredential", "apiVersion": EXEC_API, "spec": {},
            "status": {"expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "token": access.token()}}
