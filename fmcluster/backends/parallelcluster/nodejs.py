"""Node.js, which ParallelCluster's CDK synthesis (jsii) runs on."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from fmcluster.errors import FmclusterError

# The oldest Node.js release line still maintained (jsii warns on anything older).
MIN_NODE_MAJOR = 22
# jsii prints a many-line banner on every run under a Node.js past its end of life unless this variable
# holds jsii's own acknowledgement text. fmcluster's preflight reports the Node.js version instead (one
# line, with the fix), so the banner adds only noise between the progress lines.
_JSII_EOL_VARIABLE = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
_JSII_EOL_ACKNOWLEDGEMENT = (
    "Node14 is now end of life (EOL) as of April 30, 2023. Support of EOL runtimes are only guaranteed for 30 "
    "days after EOL. By silencing this warning you acknowledge that you are using an EOL version of Node and "
    "will upgrade to a supported version as soon as possible."
)


class NodeJsProblem(FmclusterError):
    exit_code = 1


def find_node() -> tuple[str, str, int]:
    """(path, version text, major version) of ``node``, or :class:`NodeJsProblem` saying what to do."""
    node = shutil.which("node")
    if node is None:
        raise NodeJsProblem(f"Node.js is not on PATH; ParallelCluster needs it to build the cluster's CloudFormation "
                            f"template. Install Node.js {MIN_NODE_MAJOR} or later (e.g. `nvm install --lts`, or your "
                            "OS package) and put `node` on PATH. Nothing was created.")
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise NodeJsProblem(f"`{node} --version` failed ({exc}); reinstall Node.js {MIN_NODE_MAJOR} or later") from None
    match = re.match(r"v?(\d+)", version)
    if not match:
        raise NodeJsProblem(f"`{node} --version` printed {version!r}; reinstall Node.js {MIN_NODE_MAJOR} or later")
    return node, version, int(match.group(1))


def quiet_jsii_banner() -> None:
    os.environ.setdefault(_JSII_EOL_VARIABLE, _JSII_EOL_ACKNOWLEDGEMENT)
