"""Where each node of a Slurm cluster sits in the network, as slurmctld holds it (``scontrol show topology``), for
the burn-in's pairs (issue 39: "pair nodes by topology: neighbours first, then across layers").

On ParallelCluster the head node keeps Slurm's ``topology/tree`` from EC2 DescribeInstanceTopology
(``fmcluster/scripts/slurm_topology.py``): one switch per EC2 network node, named by its id, the bottom ones listing
their nodes, and two switches of its own: :data:`ROOT`, joining every spine (a job "can only span nodes connected by
the same switch", topology.conf(5)), and :data:`UNPLACED`, over the nodes EC2 places nowhere. A node's path here is
EC2's, read back from Slurm: its switches from the top down, without those two, so that "through layer k" means
the same as on EKS, where the path comes from the nodes' ``topology.k8s.aws/network-node-layer-*`` labels. A
cluster without a tree (PCS, whose topology setting botocore's model does not have; any cluster with another
topology plugin) gives no path, and the burn-in pairs its nodes in name order.

Slurm 22.05's ``scontrol show topology`` prints a switch a line: ``SwitchName=s Level=L LinkSpeed=1 Nodes=<hostlist>
Switches=<hostlist>`` (Level 0 at the bottom; a switch's ``Nodes`` are every node below it). The hostlists are
expanded by Slurm itself (``scontrol show hostnames``), not by a parser of ours.
"""

from __future__ import annotations

import shlex

from fmcluster.backends.slurm import batch

# The switches slurm_topology.py adds (its ROOT and UNPLACED; tests/backends/slurm holds the two equal).
ROOT = "fmc-root"
UNPLACED = "fmc-unplaced"
_OWN_LEAF = "-nodes"
_MARK = "FMCLUSTER-HOSTNAMES"


def node_paths(remote: batch.Remote, nodes: list[str] | tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Each of ``nodes`` that Slurm's tree places under an EC2 network node: its switches from the top down. Nodes
    under no such switch, and every node of a cluster without a tree, are left out."""
    # Without a tree, Slurm 22.05 prints nothing but "scontrol: error: No topology information available" on stderr
    shown = remote.run("scontrol show topology")
    if shown.returncode != 0:
        return {}
    switches: dict[str, dict[str, str]] = {}
    for line in shown.stdout.splitlines():
        fields = dict(field.split("=", 1) for field in line.split() if "=" in field)
        if fields.get("SwitchName") and fields.get("Level", "").isdigit():
            switches[fields["SwitchName"]] = fields
    if not switches:
        return {}
    lists = sorted({f[key] for f in switches.values() for key in ("Nodes", "Switches") if f.get(key)})
    expanded = _hostnames(remote, lists)
    parent = {child: name for name, f in switches.items() for child in expanded.get(f.get("Switches", ""), [])}
    wanted = set(nodes)
    paths: dict[str, tuple[str, ...]] = {}
    for name, f in switches.items():
        if f["Level"] != "0" or name in (ROOT, UNPLACED):
            continue
        chain = [name]
        while chain[-1] in parent and len(chain) <= len(switches):
            chain.append(parent[chain[-1]])
        # slurm_topology.py hangs the nodes of a network node that also has network nodes below it on a leaf
        # "<node>-nodes" of its own (a switch lists Nodes or Switches, not both): that leaf is not EC2's
        path = tuple(s for s in reversed(chain) if s not in (ROOT, UNPLACED)
                     and not (s.endswith(_OWN_LEAF) and s[:-len(_OWN_LEAF)] in chain))
        for node in expanded.get(f.get("Nodes", ""), []):
            if node in wanted:
                paths[node] = path
    return paths


def _hostnames(remote: batch.Remote, hostlists: list[str]) -> dict[str, list[str]]:
    """Each hostlist expression as Slurm expands it, in one ssh round trip."""
    if not hostlists:
        return {}
    script = "".join(f"echo {_MARK} {shlex.quote(h)}; scontrol show hostnames {shlex.quote(h)}; " for h in hostlists)
    result = remote.run(script)
    expanded: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in result.stdout.splitlines():
        if line.startswith(_MARK + " "):
            current = expanded.setdefault(line[len(_MARK) + 1:], [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return expanded
