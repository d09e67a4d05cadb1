"""Preflight checks only ParallelCluster needs: its Python package and Node.js, which its CDK synthesis runs
on. Neither needs AWS, so they run even when the credentials check failed."""

from __future__ import annotations

from fmcluster.backends.parallelcluster.nodejs import MIN_NODE_MAJOR, NodeJsProblem, find_node
from fmcluster.checks import CheckResult
from fmcluster.preflight.common import BackendChecks, Context, fix


def check_parallelcluster(ctx: Context) -> list[CheckResult]:
    """ParallelCluster's Python package and Node.js (its CDK synthesis runs on node)."""
    results = []
    try:
        from pcluster.utils import get_installed_version

        results.append(CheckResult("parallelcluster", "passed", f"aws-parallelcluster {get_installed_version()}"))
    except Exception as exc:  # ImportError, or a broken install
        results.append(CheckResult("parallelcluster", "failed", f"aws-parallelcluster is not usable: {exc}",
                                   [fix("pip install 'fmcluster[parallelcluster]'")]))
    try:
        node, version, major = find_node()
    except NodeJsProblem as exc:
        results.append(CheckResult("node.js", "failed", str(exc).split(";")[0],
                                   [fix(f"install Node.js {MIN_NODE_MAJOR} or later (e.g. `nvm install --lts`, or "
                                        "your OS package) and put `node` on PATH")]))
        return results
    if major < MIN_NODE_MAJOR:
        results.append(CheckResult("node.js", "warning", f"Node.js {version} at {node}",
                                   [f"Node.js {major} is past its end of life; ParallelCluster's CDK still runs on "
                                    "it, but jsii supports only maintained releases",
                                    fix(f"upgrade Node.js to {MIN_NODE_MAJOR} or later")]))
    else:
        results.append(CheckResult("node.js", "passed", f"Node.js {version} at {node}"))
    return results


def _checks(ctx: Context, aws_answered: bool) -> list[CheckResult]:
    return check_parallelcluster(ctx)


# ParallelCluster warns about nodes that cannot reach out, and launches them anyway.
CHECKS = BackendChecks(run=_checks, display="ParallelCluster")
