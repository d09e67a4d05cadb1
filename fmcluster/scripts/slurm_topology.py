#!/usr/bin/env python3
"""fmcluster: Slurm's topology.conf on a ParallelCluster head node, kept in step with where EC2 says each compute
node sits in the network, for ``TopologyPlugin=topology/tree`` (which fmcluster sets through CustomSlurmSettings).

One pass maps each Slurm node (every partition's nodes) to its instance (``scontrol show nodes``: NodeAddr is the
instance's private IP once the node is up; DescribeInstances filtered to the cluster's running compute instances),
reads the instances' places (DescribeInstanceTopology, at most 100 ids a request, every page: EC2 API reference),
and writes one switch per network node, its ``Switches=`` the network nodes under it and the bottom ones'
``Nodes=`` the Slurm nodes hanging off them. "All nodes in the network must be connected to at least one switch"
(topology.conf(5)): nodes EC2 places nowhere (powered down, or a type without a topology) hang off a switch of
their own, and one root switch joins every tree, because jobs "can only span nodes connected by the same switch
fabric" and every instance of a Region can reach every other. Slurm is told (``scontrol reconfigure``) only when
the file changed, so a replaced node moves in the tree within one timer period.

Runs on the head node's own python3 and AWS CLI (no boto3): the AWS CLI's ``--cli-input-json`` takes the API's
own request shape, so a request here is what boto3 would send.

Usage:
  slurm_topology.py placeholder               OnNodeStart: an empty topology.conf (Slurm accepts one) unless one
                                              exists, so slurmctld starts with topology/tree before the first pass
  slurm_topology.py install CLUSTER REGION    OnNodeConfigured: copy to /opt/fmcluster, a systemd timer every
                                              5 minutes, and one pass now
  slurm_topology.py update CLUSTER REGION     one pass; nothing while slurmctld runs another TopologyPlugin
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # annotations only: the head node's python3 may predate subscriptable collections.abc
    from collections.abc import Callable, Iterable, Sequence

    Call = Callable[[str, dict], dict]  # (operation, request) -> response, as the EC2 API names them

TOPOLOGY_CONF = os.environ.get("FMCLUSTER_TOPOLOGY_CONF", "/opt/slurm/etc/topology.conf")
INSTALLED = "/opt/fmcluster/slurm_topology.py"
UNIT = "fmcluster-slurm-topology"
PERIOD = "5min"
# DescribeInstanceTopology, InstanceIds: "Maximum 100 explicitly specified instance IDs" (EC2 API reference).
MAX_INSTANCE_IDS = 100
# The switch joining every tree, and the one for nodes EC2 places nowhere. Network node ids are "nn-" and hex
# (EC2 API reference, InstanceTopology), so these never collide with one.
ROOT = "fmc-root"
UNPLACED = "fmc-unplaced"
HEADER = "# fmcluster: from EC2 DescribeInstanceTopology; rewritten every {period}, do not edit\n"



def slurm_nodes(show_nodes: str) -> list[tuple[str, str]]:
    """(NodeName, NodeAddr) of each node in ``scontrol -o show nodes`` (one node a line)."""
    nodes = []
    for line in show_nodes.splitlines():
        name = re.search(r"(?:^|\s)NodeName=(\S+)", line)
        addr = re.search(r"\sNodeAddr=(\S+)", line)
        if name:
            nodes.append((name.group(1), addr.group(1) if addr else name.group(1)))
    return nodes


def topology_plugin(show_config: str) -> str:
    """The TopologyPlugin slurmctld runs, from ``scontrol show config`` ("TopologyPlugin = topology/tree")."""
    found = re.search(r"^TopologyPlugin\s*=\s*(\S+)", show_config, re.M)
    return found.group(1) if found else ""


def partition_hostlists(show_partitions: str) -> list[str]:
    """The ``Nodes=`` hostlist of each partition in ``scontrol -a -o show partitions``. Powered-down cloud nodes
    are hidden from ``scontrol show nodes`` ("Without this flag [PrivateData=cloud], cloud nodes will not appear
    in the output of commands like sinfo unless they are powered on, even for SlurmUser and root", slurm.conf(5)),
    yet they too must hang off a switch: a partition lists them all."""
    found = []
    for line in show_partitions.splitlines():
        nodes = re.search(r"\sNodes=(\S+)", line)
        if nodes and nodes.group(1) != "(null)":
            found.append(nodes.group(1))
    return found


def _pages(call: Call, operation: str, request: dict) -> Iterable[dict]:
    token = None
    while True:
        page = call(operation, dict(request, **({"NextToken": token} if token else {})))
        yield page
        token = page.get("NextToken")
        if not token:
            return


def instance_ips(call: Call, cluster: str) -> dict[str, str]:
    """Private IP -> instance id of the cluster's running compute instances (ParallelCluster tags its instances
    ``parallelcluster:cluster-name`` and ``parallelcluster:node-type``)."""
    request = {"Filters": [{"Name": "tag:parallelcluster:cluster-name", "Values": [cluster]},
                           {"Name": "tag:parallelcluster:node-type", "Values": ["Compute"]},
                           {"Name": "instance-state-name", "Values": ["running"]}]}
    found = {}
    for page in _pages(call, "DescribeInstances", request):
        for reservation in page.get("Reservations") or []:
            for instance in reservation.get("Instances") or []:
                if instance.get("PrivateIpAddress"):
                    found[instance["PrivateIpAddress"]] = instance["InstanceId"]
    return found


def network_paths(call: Call, instance_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Instance id -> its network nodes top-down, for those EC2 gives a topology. MaxResults is left out: "You
    can't specify this parameter and the instance IDs parameter in the same request" (EC2 API reference)."""
    ids = sorted(set(instance_ids))
    paths = {}
    for start in range(0, len(ids), MAX_INSTANCE_IDS):
        for page in _pages(call, "DescribeInstanceTopology", {"InstanceIds": ids[start:start + MAX_INSTANCE_IDS]}):
            for item in page.get("Instances") or []:
                if item.get("NetworkNodes"):
                    paths[item["InstanceId"]] = tuple(item["NetworkNodes"])
    return paths


def hostlist(names: Iterable[str]) -> str:
    """Slurm hostlist form of ``names`` where it is simple (a shared prefix and numbers without leading zeros:
    ``q-st-p5-[1-3,5]``); other names are listed as they are."""
    numbered: dict[str, list[int]] = {}
    plain = []
    for name in sorted(set(names)):
        match = re.fullmatch(r"(.*?[^0-9])([1-9][0-9]*|0)", name)
        if match:
            numbered.setdefault(match.group(1), []).append(int(match.group(2)))
        else:
            plain.append(name)
    parts = []
    for prefix, numbers in sorted(numbered.items()):
        numbers.sort()
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]}")
            continue
        runs: list[list[int]] = []
        for n in numbers:
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        parts.append(prefix + "[" + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs) + "]")
    return ",".join(parts + plain)


def topology_conf(nodes: Sequence[tuple[str, str]], ip_to_instance: dict[str, str],
                  paths: dict[str, tuple[str, ...]]) -> str:
    """topology.conf for topology/tree: one line a switch, children before parents, the same text for the same
    tree (so an unchanged network never reconfigures Slurm)."""
    children: dict[str, set] = {ROOT: set()}
    leaves: dict[str, set] = {}
    for name, addr in nodes:
        path = paths.get(ip_to_instance.get(addr, ""), ())
        if not path:
            leaves.setdefault(UNPLACED, set()).add(name)
            children[ROOT].add(UNPLACED)
            continue
        children[ROOT].add(path[0])
        for level in range(1, len(path)):
            children.setdefault(path[level - 1], set()).add(path[level])
        leaves.setdefault(path[-1], set()).add(name)
    # A network node that is the bottom of one instance's path and above another's (types with 3 and 4 layers in
    # one zone) keeps its nodes on a leaf of its own: a switch lists either Nodes or Switches (topology.conf(5)).
    for switch in [s for s in leaves if children.get(s)]:
        children[switch].add(f"{switch}-nodes")
        leaves[f"{switch}-nodes"] = leaves.pop(switch)
    lines = [HEADER.format(period=PERIOD)]
    for switch in sorted(leaves):
        lines.append(f"SwitchName={switch} Nodes={hostlist(leaves[switch])}\n")
    for switch in sorted((s for s in children if s != ROOT and children[s]), key=lambda s: (-_depth(s, children), s)):
        lines.append(f"SwitchName={switch} Switches={','.join(sorted(children[switch]))}\n")
    if children[ROOT]:
        lines.append(f"SwitchName={ROOT} Switches={','.join(sorted(children[ROOT]))}\n")
    return "".join(lines)


def _depth(switch: str, children: dict[str, set]) -> int:
    for parent, kids in children.items():
        if switch in kids:
            return 1 + _depth(parent, children)
    return 0


def aws_cli(region: str) -> Call:
    def call(operation: str, request: dict) -> dict:
        command = re.sub(r"(?<!^)([A-Z])", r"-\1", operation).lower()  # DescribeInstances -> describe-instances
        out = subprocess.run(["aws", "ec2", command, "--region", region, "--no-paginate", "--output", "json",
                              "--cli-input-json", json.dumps(request)], capture_output=True, text=True,
                             env=dict(os.environ, AWS_PAGER=""), check=False)
        if out.returncode != 0:
            raise RuntimeError(f"aws ec2 {command}: {out.stderr.strip() or out.returncode}")
        return json.loads(out.stdout or "{}")
    return call


def _scontrol(*args: str) -> str:
    scontrol = shutil.which("scontrol") or "/opt/slurm/bin/scontrol"
    return subprocess.run([scontrol, *args], capture_output=True, text=True, check=True).stdout


def update(cluster: str, region: str, call: Optional[Call] = None) -> bool:
    """One pass; True when topology.conf changed (and Slurm was told). A topology.conf fmcluster did not write
    (an admin's own) is left alone."""
    try:
        with open(TOPOLOGY_CONF) as f:
            current: Optional[str] = f.read()
    except OSError:
        current = None
    if current is not None and not current.startswith(HEADER.split(":")[0] + ":"):
        print(f"fmcluster slurm_topology: {TOPOLOGY_CONF} was not written by fmcluster; left as it is",
              file=sys.stderr)
        return False
    plugin = topology_plugin(_scontrol("show", "config"))
    if plugin != "topology/tree":
        return False  # fmcluster turned it off (no queue of a type with a topology), or another plugin rules
    call = call or aws_cli(region)
    addresses = dict(slurm_nodes(_scontrol("-o", "show", "nodes")))
    hostlists = partition_hostlists(_scontrol("-a", "-o", "show", "partitions"))
    names = set(_scontrol("show", "hostnames", ",".join(hostlists)).split()) if hostlists else set()
    nodes = [(name, addresses.get(name, name)) for name in sorted(names | set(addresses))]
    ips = instance_ips(call, cluster)
    text = topology_conf(nodes, ips, network_paths(call, list(ips.values())))
    if current == text:
        return False
    partial = TOPOLOGY_CONF + ".fmcluster"
    with open(partial, "w") as f:
        f.write(text)
    os.chmod(partial, 0o644)
    os.replace(partial, TOPOLOGY_CONF)  # slurmctld never reads half a file
    _scontrol("reconfigure")
    return True


def placeholder() -> None:
    if not os.path.exists(TOPOLOGY_CONF):
        os.makedirs(os.path.dirname(TOPOLOGY_CONF), exist_ok=True)
        with open(TOPOLOGY_CONF, "w") as f:
            f.write(HEADER.format(period=PERIOD))
        os.chmod(TOPOLOGY_CONF, 0o644)


def install(cluster: str, region: str) -> None:
    os.makedirs(os.path.dirname(INSTALLED), exist_ok=True)
    if os.path.abspath(__file__) != INSTALLED:
        shutil.copyfile(__file__, INSTALLED)
    os.chmod(INSTALLED, 0o755)
    with open(f"/etc/systemd/system/{UNIT}.service", "w") as f:
        f.write(f"[Unit]\nDescription=fmcluster: Slurm topology.conf from EC2 topology\n\n[Service]\nType=oneshot\n"
                f"Environment=PATH=/opt/slurm/bin:/usr/local/bin:/usr/bin:/bin\n"
                f"ExecStart=/usr/bin/env python3 {INSTALLED} update {cluster} {region}\n")
    with open(f"/etc/systemd/system/{UNIT}.timer", "w") as f:
        f.write(f"[Unit]\nDescription=fmcluster: refresh Slurm topology.conf every {PERIOD}\n\n[Timer]\n"
                f"OnBootSec={PERIOD}\nOnUnitActiveSec={PERIOD}\n\n[Install]\nWantedBy=timers.target\n")
    subprocess.run(["systemctl", "daemon-reload"], check=True)
    subprocess.run(["systemctl", "enable", "--now", f"{UNIT}.timer"], check=True)
    try:
        update(cluster, region)
    except (RuntimeError, OSError, subprocess.CalledProcessError, ValueError) as exc:
        # A first pass that fails (no compute node up yet, AWS throttling) must not fail the head node: the timer
        # runs again within PERIOD.
        print(f"fmcluster slurm_topology: first pass: {exc}; the timer tries again", file=sys.stderr)


def main(argv: list[str]) -> int:
    if argv[:1] == ["placeholder"] and len(argv) == 1:
        placeholder()
    elif argv[:1] in (["install"], ["update"]) and len(argv) == 3:
        try:
            (install if argv[0] == "install" else update)(argv[1], argv[2])
        except (RuntimeError, OSError, subprocess.CalledProcessError, ValueError) as exc:
            # update: the last good topology.conf stays and the timer tries again. install: said in the head
            # node's bootstrap log, but never failing the head node over the network tree (exit 0).
            print(f"fmcluster slurm_topology {argv[0]}: {exc}", file=sys.stderr)
            return 1 if argv[0] == "update" else 0
    else:
        print(__doc__.split("Usage:", 1)[1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
