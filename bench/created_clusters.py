"""One quickstart PCS cluster and one EKS cluster (Kueue, on a Capacity Block seeded in the sandbox), each created in
a private sandbox, measured by the caller, then destroyed and scanned for leftovers: what ``throttled_status.py`` and
``status_latency.py`` share."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_eks import EksKillRun  # noqa: E402
from chaos_run import Run  # noqa: E402
from common import Sandbox  # noqa: E402


class PcsCluster(Run):
    kind = "created-cluster"


class EksCluster(EksKillRun):
    kind = "created-cluster"


KINDS: dict[str, type[Run]] = {"pcs": PcsCluster, "eks": EksCluster}


def measure_each(backends: list[str], seed: int, prefix: str, measure: Callable[[Run, Path], dict],
                 say: Callable[..., None]) -> tuple[dict[str, dict], dict[str, dict]]:
    """For each backend: create its cluster, ``measure(cluster, directory)`` (with the sandbox's faults reset before
    and after), destroy it and scan. Returns the measures by backend (``{"create_failed": …}`` where create failed)
    and the leftovers by backend."""
    unknown = set(backends) - set(KINDS)
    if unknown:
        raise SystemExit(f"--backends takes {', '.join(KINDS)}, not {', '.join(sorted(unknown))}")
    results: dict[str, dict] = {}
    leftovers: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        directory = Path(tmp)
        sandbox = Sandbox(directory / "sandbox-home").start()
        try:
            for backend in backends:
                sandbox.faults({"reset": True})
                cluster = KINDS[backend](sandbox, directory, seed)
                if isinstance(cluster, EksCluster):
                    cluster.seed_capacity_block()
                created = cluster.create()
                say(f"{backend} {cluster.name}: create exit {created.returncode}")
                if created.returncode != 0:
                    results[backend] = {"create_failed": created.stderr[-400:]}
                else:
                    results[backend] = measure(cluster, directory)
                    say(f"{backend}: {json.dumps({k: v for k, v in results[backend].items() if k != 'failures'})}")
                    for failure in results[backend].get("failures", []):
                        say(f"  {failure}")
                sandbox.faults({"reset": True})
                cluster.destroy_and_scan()
                if cluster.leftovers:
                    leftovers[backend] = cluster.leftovers
        finally:
            sandbox.stop()
    return results, leftovers
