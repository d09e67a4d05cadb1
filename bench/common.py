"""What the sandbox benchmarks share: a private sandbox, the CLI's environment, and a leftover scan."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TAG = "fmcluster:cluster"

# The leftover scan lives with the tests (they must not import bench/); the benchmarks use the same one.
sys.path.insert(0, str(REPO / "tests"))
from fixtures.leftovers import duplicates, inventory_of  # noqa: E402,F401


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fmcluster_exe() -> list[str]:
    exe = BIN / "fmcluster"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "fmcluster"]


@dataclass
class Sandbox:
    """A background sandbox with its own FMCLUSTER_HOME (started through fmcluster_sandbox.manager)."""

    home: Path
    info: dict[str, Any] = field(default_factory=dict)
    _session: Any = None

    def start(self) -> Sandbox:
        from fmcluster_sandbox import manager

        self.home.mkdir(parents=True, exist_ok=True)
        self.info = manager.start(port=free_port(), home=self.home)
        return self

    def stop(self) -> None:
        from fmcluster_sandbox import manager

        manager.stop(home=self.home)

    @property
    def env(self) -> dict[str, str]:
        from fmcluster_sandbox import manager

        return {**manager.env_vars(self.info), "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull}

    def cli_env(self, cli_home: Path) -> dict[str, str]:
        """Environment for a CLI subprocess: pointed at this sandbox, state under *cli_home*, no colours."""
        return {**os.environ, **self.env, "FMCLUSTER_HOME": str(cli_home), "NO_COLOR": "1", "COLUMNS": "200",
                "PYTHONUNBUFFERED": "1"}

    def control(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.info["endpoint_url"] + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        context = ssl.create_default_context(cafile=self.info["ca_bundle"]) if self.info.get("ca_bundle") else None
        with urllib.request.urlopen(request, timeout=30, context=context) as answer:
            return json.loads(answer.read() or b"{}")

    def faults(self, changes: dict) -> dict:
        return self.control("POST", "/_fmcluster/faults", changes)

    def client(self, service: str) -> Any:
        import boto3

        if self._session is None:
            self._session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                                  region_name="us-east-1")
        from botocore.config import Config

        # the scan runs while the sandbox throttles 20 % of calls: retry like a patient client
        return self._session.client(service, endpoint_url=self.info["endpoint_url"],
                                    verify=self.info.get("ca_bundle") or False,
                                    config=Config(retries={"mode": "standard", "max_attempts": 20}))

    # what the sandbox holds for one cluster --------------------------------------------------------
    def inventory(self, name: str, region: str = "us-east-1") -> dict[str, list[str]]:
        """What :func:`inventory_of` finds for cluster *name* in this sandbox."""
        return inventory_of(self.client, name, region)


def run(argv: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
