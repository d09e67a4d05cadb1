"""Bad specs: every one is a SpecError with its exact position, and through the CLI exit 2 and no traceback
(the CLI's entry point in this process; the installed command for the few cases that are about it).

Positions below are 1-based (line, column), counted by hand from the YAML text of each case.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.in_process import run_in_process

from fmcluster.errors import SpecError
from fmcluster.spec import load_spec

FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")

# A valid queue block (lines 4-7 when it follows "name:", "backend:" and "queues:" lines).
QUEUE = """\
  - name: train
    instance_type: p5.48xlarge
    nodes: 2
"""
PC = "name: demo\nbackend: parallelcluster\nqueues:\n" + QUEUE  # 6 lines
PCS = "name: demo\nbackend: pcs\nqueues:\n" + QUEUE  # 6 lines
EKS = "name: demo\nbackend: eks\nqueues:\n" + QUEUE  # 6 lines
GB200_BLOCK = "    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}\n"


def _many_queues(count: int, nodes: int = 1) -> str:
    lines = [f"  - {{name: q{i:02d}, instance_type: p5.48xlarge, nodes: {nodes}}}" for i in range(count)]
    return "name: demo\nbackend: pcs\nqueues:\n" + "\n".join(lines) + "\n"


def _with_tags(base: str, count: int) -> str:
    """``base`` plus ``count`` tags, one a line from line 8 (after a 6-line base and "tags:"), value at column 10."""
    return base + "tags:\n" + "".join(f"  t{i:04d}: v\n" for i in range(count))


# (id, YAML text, line, column, path, message fragment)
CASES: list[tuple[str, str, int | None, int | None, str, str]] = [
    # --- YAML structure -------------------------------------------------------------------------
    ("top-level-list", "- name: demo\n- backend: pcs\n", 1, 1, "", "not a list"),
    ("top-level-scalar", "just some words\n", 1, 1, "", "not a single value"),
    ("yaml-syntax", "name: demo\nregion: us-east-1: x\n", 2, 18, "", "mapping values are not allowed here"),
    ("yaml-unclosed-flow", "name: demo\nqueues:\n  - nodes: [1, 2\n", 4, 1, "", "expected ',' or ']'"),
    ("yaml-tab", "name: demo\n\tbackend: pcs\n", 2, 1, "", "found character '\\t'"),
    ("duplicate-key", "name: a\nbackend: pcs\nname: b\nqueues:\n" + QUEUE, 3, 1, "name", "duplicate key"),
    ("duplicate-nested-key", PCS.replace("    nodes: 2\n", "    nodes: 2\n    nodes: 3\n"), 7, 5,
     "queues[0].nodes", "duplicate key"),
    ("merge-key", "base: &b {nodes: 2}\nname: demo\nqueues:\n  - <<: *b\n    name: x\n", 4, 5, "queues[0]",
     "merge keys"),
    ("missing-queues", "name: demo\nbackend: pcs\n", 1, 1, "", "required key 'queues' is missing"),
    ("missing-queue-instance-type", "name: demo\nqueues:\n  - name: train\n    nodes: 2\n", 3, 5, "queues[0]",
     "required key 'instance_type' is missing"),
    # --- unknown keys and wrong types -----------------------------------------------------------
    ("unknown-top-key", PC + "tag: {team: x}\n", 7, 1, "tag", "unknown key 'tag' (did you mean 'tags'?)"),
    ("unknown-head-node-key", "name: demo\nhead_node: {instance_typ: m7i.large}\nqueues:\n" + QUEUE, 2, 13,
     "head_node.instance_typ", "unknown key 'instance_typ' (did you mean 'instance_type'?)"),
    ("unknown-queue-key", "name: demo\nqueues:\n  - name: train\n    instance_typ: p5.48xlarge\n    nodes: 2\n",
     4, 5, "queues[0].instance_typ", "(did you mean 'instance_type'?)"),
    ("unknown-key-no-match", PC + "zzz: 1\n", 7, 1, "zzz", "allowed here: name, region, backend"),
    ("nodes-word", PC.replace("nodes: 2", "nodes: sixteen"), 6, 12, "queues[0].nodes",
     "expected a node count (a whole number) or a range {min: N, max: M}, got 'sixteen'"),
    ("nodes-list", PC.replace("nodes: 2", "nodes: [1, 2]"), 6, 12, "queues[0].nodes", "got a list"),
    ("root-volume-word", PC + "head_node: {root_volume_gib: big}\n", 7, 30, "head_node.root_volume_gib",
     "unable to parse string as an integer, got 'big'"),
    ("root-volume-small", PC + "head_node:\n  root_volume_gib: 10\n", 8, 20, "head_node.root_volume_gib",
     "greater than or equal to 35"),
    ("backend-typo", "name: demo\nbackend: pcluster\nqueues:\n" + QUEUE, 2, 10, "backend",
     "(did you mean 'parallelcluster'?)"),
    ("os-typo", PC + "os: ubuntu22\n", 7, 5, "os", "(did you mean 'ubuntu2204'?)"),
    ("capacity-type-typo", PC + "    capacity: {type: capacity_block}\n", 7, 22, "queues[0].capacity.type",
     "(did you mean 'capacity-block'?)"),
    ("region-bad", PC + "region: us-east\n", 7, 9, "region",
     "unknown region 'us-east' (did you mean 'us-east-2' or 'us-east-1'"),
    ("region-shape", PC + "region: US East 1\n", 7, 9, "region", "an AWS region name like us-east-1"),
    ("workload-negative", PC + "workload: {model_params_b: -1}\n", 7, 28, "workload.model_params_b",
     "greater than 0"),
    # --- instance types and EFA -----------------------------------------------------------------
    ("instance-typo", PC.replace("p5.48xlarge", "p5.48xlarg"), 5, 20, "queues[0].instance_type",
     "unknown instance type 'p5.48xlarg' (did you mean 'p5.48xlarge'?)"),
    ("head-instance-typo", PC + "head_node: {instance_type: m7i.xlarg}\n", 7, 28, "head_node.instance_type",
     "unknown instance type 'm7i.xlarg'"),
    # a well-formed name that EC2 does not list (the shipped list, nothing read from an endpoint)
    ("instance-not-sold", PC.replace("p5.48xlarge", "m7i.3xlarge"), 5, 20, "queues[0].instance_type",
     "unknown instance type 'm7i.3xlarge' (did you mean 'm7i."),
    # --- storage --------------------------------------------------------------------------------
    ("lustre-3000", PC + "storage:\n  lustre: {capacity_gib: 3000}\n", 8, 26, "storage.lustre.capacity_gib",
     "3000 GiB is not a size FSx for Lustre offers: 1200, 2400, then steps of 2400 (nearest: 2400 or 4800)"),
    ("lustre-1300", PC + "storage:\n  lustre:\n    capacity_gib: 1300\n", 9, 19, "storage.lustre.capacity_gib",
     "(nearest: 1200 or 2400)"),
    ("lustre-small", PC + "storage:\n  lustre: {capacity_gib: 100}\n", 8, 26, "storage.lustre.capacity_gib",
     "greater than or equal to 1200"),
    ("metadata-iops-5000", PCS + "storage:\n  lustre:\n    capacity_gib: 2400\n    metadata_iops: 5000\n", 10, 20,
     "storage.lustre.metadata_iops", "5000 is not a metadata IOPS level FSx offers"),
    ("metadata-iops-word", PCS + "storage:\n  lustre: {metadata_iops: lots}\n", 8, 27,
     "storage.lustre.metadata_iops", "expected auto or a number of IOPS"),
    ("metadata-iops-parallelcluster", PC + "storage:\n  lustre: {metadata_iops: 6000}\n", 8, 27,
     "storage.lustre.metadata_iops", "ParallelCluster cannot set Lustre metadata IOPS"),
    ("home-on-lustre-mount", PC + "storage:\n  lustre: {mount: /fsx}\n  home: {mount: /fsx}\n", 9, 17,
     "storage.home.mount", "already the Lustre mount point"),
    # --- capacity -------------------------------------------------------------------------------
    ("capacity-block-scales",
     PC.replace("nodes: 2", "nodes: {min: 0, max: 4}")
     + "    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}\n",
     6, 12, "queues[0].nodes", "a Capacity Block queue cannot scale: min (0) must equal max (4)"),
    ("capacity-block-no-id", PC + "    capacity: {type: capacity-block}\n", 7, 15, "queues[0].capacity",
     "capacity type 'capacity-block' needs reservation_id"),
    ("reservation-no-id", PC + "    capacity:\n      type: reservation\n", 8, 7, "queues[0].capacity",
     "capacity type 'reservation' needs reservation_id"),
    ("on-demand-with-id", PC + "    capacity: {type: on-demand, reservation_id: cr-0123456789abcdef0}\n", 7, 49,
     "queues[0].capacity.reservation_id", "reservation_id is only used with capacity type"),
    ("capacity-block-placement-group",
     PC + "    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}\n    placement_group: true\n",
     8, 22, "queues[0].placement_group", "Capacity Blocks are already placed by AWS"),
    ("reservation-id-bad", PC + "    capacity: {type: reservation, reservation_id: cr-12}\n", 7, 51,
     "queues[0].capacity.reservation_id", "a capacity reservation id like cr-0123456789abcdef0"),
    ("min-above-max", PC.replace("nodes: 2", "nodes: {min: 4, max: 2}"), 6, 18, "queues[0].nodes.min",
     "min (4) is larger than max (2)"),
    # --- PCS limits -----------------------------------------------------------------------------
    ("pcs-11-queues", _many_queues(11), 13, 5, "queues[9]",
     "11 queues make 12 compute node groups (one per queue plus the login group); PCS allows 10"),
    ("pcs-small-exceeded", PCS.replace("nodes: 2", "nodes: 40") + "pcs: {size: SMALL}\n", 7, 13, "pcs.size",
     "SMALL manages at most 32 nodes, and the queues at their maximum with the login node add up to 41; "
     "use pcs.size MEDIUM"),
    ("pcs-large-exceeded",
     "name: demo\nbackend: pcs\nqueues:\n  - {name: a, instance_type: p5.48xlarge, nodes: 2000}\n"
     "  - {name: b, instance_type: p5.48xlarge, nodes: 1000}\n",
     4, 3, "queues", "3001 nodes in all (the queues at their maximum and the login node); a PCS cluster manages at "
     "most 2048 (size LARGE)"),
    ("queue-nodes-above-2048", PC.replace("nodes: 2", "nodes: 3000"), 6, 12, "queues[0].nodes",
     "less than or equal to 2048, got 3000"),
    ("queue-nodes-zero", PC.replace("nodes: 2", "nodes: 0"), 6, 12, "queues[0].nodes",
     "greater than or equal to 1, got 0"),
    ("queue-nodes-quoted", PC.replace("nodes: 2", "nodes: '4'"), 6, 12, "queues[0].nodes",
     "expected a node count (a whole number) or a range {min: N, max: M}, got '4'"),
    ("queue-nodes-bool", PC.replace("nodes: 2", "nodes: true"), 6, 12, "queues[0].nodes", "got True"),
    # YAML 1.1 integers (PyYAML) that YAML 1.2 reads as text or not at all: refused, never a silent 8 or 90
    ("nodes-octal", PC.replace("nodes: 2", "nodes: 010"), 6, 12, "queues[0].nodes",
     "'010' is not a decimal integer: YAML 1.1 reads it as octal 8; write 10, or 8 if you meant octal"),
    ("nodes-hex", PC.replace("nodes: 2", "nodes: 0x2"), 6, 12, "queues[0].nodes",
     "YAML 1.1 reads it as hexadecimal 2; write 2 (YAML 1.2 integers are decimal"),
    ("nodes-underscore", PC.replace("nodes: 2", "nodes: 1_0"), 6, 12, "queues[0].nodes",
     "'1_0' is not a decimal integer: write 10 without the '_'"),
    ("nodes-sexagesimal", PC.replace("nodes: 2", "nodes: 1:30"), 6, 12, "queues[0].nodes",
     "YAML 1.1 reads it as base 60, 90; write 90"),
    ("range-max-binary", PC.replace("nodes: 2", "nodes: {min: 0, max: 0b100}"), 6, 26, "queues[0].nodes.max",
     "YAML 1.1 reads it as binary 4; write 4"),
    ("root-volume-leading-zero", PC + "head_node:\n  root_volume_gib: 0100\n", 8, 20, "head_node.root_volume_gib",
     "YAML 1.1 reads it as octal 64; write 100, or 64 if you meant octal"),
    ("params-float-sexagesimal", PC + "workload: {model_params_b: 1:10.5}\n", 7, 28, "workload.model_params_b",
     "'1:10.5' is read by YAML 1.1 as base 60, 70.5: write 70.5"),
    ("range-max-above-2048", PC.replace("nodes: 2", "nodes: {min: 0, max: 4096}"), 6, 26, "queues[0].nodes.max",
     "less than or equal to 2048"),
    ("pcs-size-on-parallelcluster", PC + "pcs: {size: LARGE}\n", 7, 13, "pcs.size",
     "pcs.size is for the pcs backend"),
    # --- names ----------------------------------------------------------------------------------
    ("pc-name-digit", PC.replace("name: demo", "name: 1demo"), 1, 7, "name",
     "ParallelCluster cluster names start with a letter"),
    ("pc-name-61", PC.replace("name: demo", "name: " + "a" * 61), 1, 7, "name",
     "is 61 characters; ParallelCluster allows 60"),
    ("pc-name-41-with-accounting",
     PC.replace("name: demo", "name: " + "a" * 41)
     + "slurm:\n  accounting: true\n  database: {uri: 'db:3306', user: slurm,"
     " password_secret_arn: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:x'}\n",
     1, 7, "name", "ParallelCluster allows 40 with Slurm accounting"),
    ("pcs-name-2", PCS.replace("name: demo", "name: ab"), 1, 7, "name", "'ab' is 2 characters; PCS allows 3 to 40"),
    ("pcs-name-pcs_", PCS.replace("name: demo", "name: pcs_demo"), 1, 7, "name", "do not start with 'pcs_'"),
    ("pc-queue-uppercase", PC.replace("name: train", "name: Train"), 4, 11, "queues[0].name",
     "'Train': ParallelCluster queue names start with a lowercase letter"),
    ("pc-queue-26", PC.replace("name: train", "name: " + "q" * 26), 4, 11, "queues[0].name",
     "is 26 characters; ParallelCluster allows 25"),
    ("pcs-node-group-underscore", PCS + "    compute_resource: train_nodes\n", 7, 23, "queues[0].compute_resource",
     "'train_nodes': PCS compute resource names start with a letter"),
    ("duplicate-queue", PC + QUEUE, 7, 11, "queues[1].name", "queue 'train' is already defined at queues[0]"),
    ("pcs-queue-login", PCS.replace("name: train", "name: login"), 4, 11, "queues[0].name",
     "'login' is the login node group's name"),
    # --- Slurm ----------------------------------------------------------------------------------
    ("pcs-slurm-24.11", PCS + "slurm: {version: '24.11'}\n", 7, 18, "slurm.version",
     "Slurm 24.11 reached its end of life on AWS PCS"),
    ("pcs-slurm-unknown", PCS + "slurm: {version: '23.02'}\n", 7, 18, "slurm.version", "must be '24.11', '25.05'"),
    ("pcs-slurm-25.05", PCS + "slurm: {version: '25.05'}\n", 7, 18, "slurm.version",
     "reached its end of life on AWS PCS on 2026-11-30; PCS refuses new clusters on it. Use 26.05"),
    # AWS's PCS sample AMIs come only in Amazon Linux 2023 (PCS user guide, "Using sample AMIs").
    ("pcs-os-without-ami", PCS + "os: ubuntu2204\n", 7, 5, "os",
     "AWS's PCS sample AMIs come only in Amazon Linux 2023 (alinux2023), not ubuntu2204"),
    ("pc-slurm-version", PC + "slurm:\n  version: '25.11'\n", 8, 12, "slurm.version",
     "ParallelCluster ships its own Slurm"),
    ("pc-accounting-no-database", PC + "slurm: {accounting: true}\n", 7, 21, "slurm.accounting",
     "ParallelCluster needs a database for Slurm accounting"),
    # --- tags and network -----------------------------------------------------------------------
    ("tag-aws-prefix", PC + "tags:\n  team: research\n  aws:owner: me\n", 9, 14, "tags.aws:owner",
     "tag keys starting with 'aws:' are reserved by AWS"),
    # 50 tags per resource: the first one over the budget is named (tag i is on line 8 + i)
    ("tags-3000-parallelcluster", _with_tags(PC, 3000), 44, 10, "tags.t0036",
     "3000 tags are too many: ParallelCluster allows 40 configured tags (it keeps the rest of AWS's 50 per "
     "resource for its own) and fmcluster adds 4"),
    ("tags-37-parallelcluster", _with_tags(PC, 37), 44, 10, "tags.t0036", "at most 36; this is tag 37"),
    ("tags-46-pcs", _with_tags(PCS, 46), 53, 10, "tags.t0045",
     "46 tags are too many: AWS allows 50 tags per resource and fmcluster adds 5 of its own"),
    ("tag-parallelcluster-prefix", PC + "tags: {'parallelcluster:queue-name': x}\n", 7, 38,
     "tags.parallelcluster:queue-name", "tag keys starting with 'parallelcluster:' are reserved by ParallelCluster"),
    ("tag-fmcluster-prefix", PC + "tags: {'fmcluster:cluster': other}\n", 7, 29, "tags.fmcluster:cluster",
     "reserved: fmcluster uses them"),
    # "Tag restrictions": aws: is reserved as a prefix of values too, in any case
    ("tag-aws-value", PCS + "tags:\n  owner: AWS:me\n", 8, 10, "tags.owner",
     "tag values starting with 'aws:' are reserved by AWS"),
    # EKS "Subnet requirements": kubernetes.io/cluster/<name> claims the VPC's subnets for that cluster (any backend)
    ("tag-kubernetes-cluster", EKS + "tags: {'kubernetes.io/cluster/x': owned}\n", 7, 35,
     "tags.kubernetes.io/cluster/x", "reserved: EKS and Kubernetes mark with them what a cluster owns, and on "
     "fmcluster's VPC and subnets it would hand them to cluster 'x'"),
    ("tag-kubernetes-cluster-pc", PC + "tags: {'kubernetes.io/cluster/other': shared}\n", 7, 39,
     "tags.kubernetes.io/cluster/other", "tag keys starting with 'kubernetes.io/cluster/' are reserved"),
    # EKS managed node groups tag their nodes eks:cluster-name and eks:nodegroup-name
    ("tag-eks-prefix", EKS + "tags:\n  team: ml\n  eks:nodegroup-name: mine\n", 9, 23, "tags.eks:nodegroup-name",
     "tag keys starting with 'eks:' are reserved by EKS"),
    ("subnet-bad", PC + "network: {subnet_id: subnet-xyz}\n", 7, 22, "network.subnet_id",
     "expected a subnet id like subnet-0123456789abcdef0, got 'subnet-xyz'"),
    ("cidr-300", PC + "network:\n  ssh: {allowed_cidr: 300.1.1.1/24}\n", 8, 23, "network.ssh.allowed_cidr",
     "'300.1.1.1/24' is not a network address"),
    ("cidr-word", PC + "network:\n  ssh: {allowed_cidr: everywhere}\n", 8, 23, "network.ssh.allowed_cidr",
     "a CIDR like 203.0.113.0/24"),
    ("cidr-host-bits", PC + "network:\n  ssh: {allowed_cidr: 10.0.0.1/8}\n", 8, 23, "network.ssh.allowed_cidr",
     "'10.0.0.1/8' is not a network address: 10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)"),
    ("cidr-prefix-33", PC + "network:\n  ssh: {allowed_cidr: 10.0.0.0/33}\n", 8, 23, "network.ssh.allowed_cidr",
     "'10.0.0.0/33' is not a network address"),
    ("cidr-ipv6-host-bits", PCS + "network:\n  ssh: {allowed_cidr: '2001:db8::1/64'}\n", 8, 23,
     "network.ssh.allowed_cidr", "has host bits set (did you mean 2001:db8::/64?)"),
    ("cidr-ipv6-parallelcluster", PC + "network:\n  ssh: {allowed_cidr: '2001:db8::/48'}\n", 8, 23,
     "network.ssh.allowed_cidr", "ParallelCluster's HeadNode.Ssh.AllowedIps takes only IPv4 CIDRs"),
    ("cidr-ipv4-mapped", PCS + "network:\n  ssh: {allowed_cidr: '::ffff:10.0.0.0/104'}\n", 8, 23,
     "network.ssh.allowed_cidr", "'::ffff:10.0.0.0/104' is an IPv4-mapped IPv6 network; security groups would take "
     "it as an IPv6 range, not the IPv4 network meant: write the IPv4 form, 10.0.0.0/8"),
    ("cidr-ipv4-mapped-parallelcluster", PC + "network:\n  ssh: {allowed_cidr: '::ffff:203.0.113.0/120'}\n", 8,
     23, "network.ssh.allowed_cidr", "write the IPv4 form, 203.0.113.0/24"),
    ("cidr-ipv4-mapped-host-bits", PCS + "network:\n  ssh: {allowed_cidr: '::ffff:10.0.0.1/104'}\n", 8, 23,
     "network.ssh.allowed_cidr", "has host bits set (did you mean 10.0.0.0/8?)"),
    ("region-unknown", PC + "region: moon-1\n", 7, 9, "region", "unknown region 'moon-1' (did you mean one of"),
    ("region-typo", PC + "region: us-esat-1\n", 7, 9, "region",
     "unknown region 'us-esat-1' (did you mean 'us-west-1' or 'us-east-1'"),
    # --- eks ----------------------------------------------------------------------------------------------
    ("eks-unknown-scheduler", EKS + "kubernetes: {scheduler: slurm}\n", 7, 25, "kubernetes.scheduler",
     "must be 'kueue', 'volcano' or 'kai', got 'slurm'"),
    ("eks-unknown-version", EKS + "kubernetes: {version: '1.20'}\n", 7, 23, "kubernetes.version",
     "EKS does not offer Kubernetes 1.20"),
    # eks_versions.AL2023_NODE_IMAGES (EKS User Guide, "Create nodes with optimized Amazon Linux AMIs"): 1.32 to 1.36
    ("eks-version-1.28", EKS + "kubernetes: {version: '1.28'}\n", 7, 23, "kubernetes.version",
     "EKS does not offer Kubernetes 1.28 with the EKS-optimized AL2023 node images fmcluster's nodes boot: it offers "
     "1.32, 1.33, 1.34, 1.35, 1.36"),
    ("eks-version-1.40", EKS + "kubernetes: {version: '1.40'}\n", 7, 23, "kubernetes.version",
     "EKS does not offer Kubernetes 1.40 with the EKS-optimized AL2023 node images"),
    ("eks-gb200-x86-image", EKS.replace("p5.48xlarge", "p6e-gb200.36xlarge").replace("nodes: 2", "nodes: 18")
     + GB200_BLOCK + "image: {ami: ami-0123456789abcdef0}\n", 8, 14, "image.ami",
     "queue train (p6e-gb200.36xlarge, arm64) boots the EKS-optimized AL2023 arm64 nvidia image"),
    # AWS sells p6e-gb200 only as UltraServer Capacity Blocks ("Use P6e-GB200 UltraServers with Amazon EKS"), and
    # the DRA driver v0.4.1 that gives IMEX channels needs resource.k8s.io/v1 (Kubernetes 1.34)
    ("eks-gb200-spot", EKS.replace("p5.48xlarge", "p6e-gb200.36xlarge").replace("nodes: 2", "nodes: 18")
     + "    capacity: {type: spot}\n", 7, 22, "queues[0].capacity.type",
     "EC2 sells p6e-gb200.36xlarge only inside UltraServers, bought as Capacity Blocks"),
    ("eks-gb200-on-demand", EKS.replace("p5.48xlarge", "p6e-gb200.36xlarge").replace("nodes: 2", "nodes: 18")
     + "    capacity: {type: on-demand}\n", 7, 22, "queues[0].capacity.type", "not as on-demand"),
    ("eks-gb200-k8s-1.33", EKS.replace("p5.48xlarge", "p6e-gb200.36xlarge").replace("nodes: 2", "nodes: 18")
     + GB200_BLOCK + "kubernetes: {version: '1.33'}\n", 8, 23, "kubernetes.version",
     "needs the resource.k8s.io/v1 API, served from Kubernetes 1.34"),
    ("eks-gb200-k8s-1.32", EKS.replace("p5.48xlarge", "p6e-gb200.36xlarge").replace("nodes: 2", "nodes: 18")
     + GB200_BLOCK + "kubernetes: {version: '1.32'}\n", 8, 23, "kubernetes.version",
     "1.32 has no Dynamic Resource Allocation"),
    ("eks-unknown-type", EKS.replace("p5.48xlarge", "x9z.48xlarge"), 5, 20, "queues[0].instance_type",
     "unknown instance type 'x9z.48xlarge'"),
    # the system node group (kubernetes.system_nodes / system_instance_type)
    ("eks-system-nodes-0", EKS + "kubernetes: {system_nodes: 0}\n", 7, 28, "kubernetes.system_nodes",
     "greater than or equal to 1"),
    ("eks-system-gpu-type", EKS + "kubernetes: {system_instance_type: g6.xlarge}\n", 7, 36,
     "kubernetes.system_instance_type", "g6.xlarge carries 1 x NVIDIA L4: the system node group runs controllers"),
    ("eks-system-neuron-type", EKS + "kubernetes: {system_instance_type: inf2.xlarge}\n", 7, 36,
     "kubernetes.system_instance_type", "inf2.xlarge carries 1 x Inferentia2"),
    ("eks-system-unknown-type", EKS + "kubernetes: {system_instance_type: m7i.xlarg}\n", 7, 36,
     "kubernetes.system_instance_type", "unknown instance type 'm7i.xlarg' (did you mean 'm7i.xlarge'?)"),
    ("eks-queue-named-system", EKS.replace("name: train", "name: system"), 4, 11, "queues[0].name",
     "'system' is the node group where cluster software runs"),
    ("pcs-system-nodes", PCS + "kubernetes: {system_nodes: 3}\n", 7, 28, "kubernetes.system_nodes",
     "kubernetes.system_nodes is for the eks backend"),
    ("pc-system-instance-type", PC + "kubernetes: {system_instance_type: m7i.xlarge}\n", 7, 36,
     "kubernetes.system_instance_type", "kubernetes.system_instance_type is for the eks backend"),
    ("eks-neuron-on-kai", EKS.replace("p5.48xlarge", "trn2.48xlarge") + "kubernetes: {scheduler: kai}\n", 5, 20,
     "queues[0].instance_type", "a KAI Queue's quota covers only cpu, gpu and memory"),
    ("eks-slurm", EKS + "slurm: {accounting: true}\n", 7, 8, "slurm", "not supported on eks"),
    ("eks-head-node", EKS + "head_node: {instance_type: m7i.large}\n", 7, 12, "head_node", "no head or login node"),
    ("eks-queue-name", EKS.replace("name: train", "name: Train_1"), 4, 11, "queues[0].name",
     "must be a Kubernetes name"),
    # EKS User Guide "Amazon EKS service quotas": 30 managed node groups per cluster (the system group is one),
    # 450 nodes per managed node group; queue i is on line 4 + i
    ("eks-31-queues", _many_queues(31).replace("backend: pcs", "backend: eks"), 33, 5, "queues[29]",
     "31 queues make 32 managed node groups (one per queue plus the system group); EKS's default quota is 30 per "
     "cluster (Amazon EKS User Guide, \"Amazon EKS service quotas\"), so at most 29 queues"),
    ("eks-30-queues", _many_queues(30).replace("backend: pcs", "backend: eks"), 33, 5, "queues[29]",
     "30 queues make 31 managed node groups"),
    ("eks-500-nodes", EKS.replace("nodes: 2", "nodes: 500"), 6, 12, "queues[0].nodes",
     "500 nodes in one managed node group: EKS's default quota is 450 nodes per managed node group"),
    ("eks-range-to-451", EKS.replace("nodes: 2", "nodes: {min: 1, max: 451}"), 6, 26, "queues[0].nodes.max",
     "451 nodes in one managed node group"),
    # An elastic queue gets the Cluster Autoscaler, shipped for Kubernetes 1.34-1.36 only (chart 9.59.0 renders;
    # the autoscaler's README: use the release of the cluster's Kubernetes minor)
    ("eks-elastic-on-1.33", EKS.replace("nodes: 2", "nodes: {min: 0, max: 4}") + "kubernetes: {version: '1.33'}\n",
     6, 12, "queues[0].nodes", "needs the Cluster Autoscaler release of the cluster's Kubernetes minor, and "
     "fmcluster ships it for Kubernetes 1.34, 1.35, 1.36, not 1.33"),
    # a queue of several types was a traceback (AttributeError in instance_mix); AWS's P5 and P4 pages:
    # p5.48xlarge 192 vCPUs, p4d.24xlarge 96
    ("pcs-mixed-p5-p4d", PCS.replace("instance_type: p5.48xlarge", "instance_type: [p5.48xlarge, p4d.24xlarge]"), 5,
     20, "queues[0].instance_type",
     "the types of one queue must have the same vCPUs (p5.48xlarge: 192, p4d.24xlarge: 96)"),
    ("pcs-kubernetes", PCS + "kubernetes: {scheduler: volcano}\n", 7, 25, "kubernetes.scheduler",
     "kubernetes.scheduler is for the eks backend"),
]

# Cases run through the CLI as well (exit code 2, position on stderr, no traceback).
CLI_CASES = {
    "top-level-list", "yaml-syntax", "duplicate-key", "unknown-queue-key", "nodes-word", "backend-typo",
    "instance-typo", "lustre-3000", "capacity-block-scales", "pcs-11-queues", "pcs-large-exceeded",
    "pc-queue-uppercase", "pcs-slurm-24.11", "tag-aws-prefix", "cidr-300", "cidr-ipv4-mapped", "nodes-octal",
    "tags-3000-parallelcluster", "eks-unknown-scheduler", "eks-gb200-x86-image", "eks-unknown-type",
    "eks-system-nodes-0", "eks-system-gpu-type", "pcs-system-nodes", "tag-kubernetes-cluster",
    "eks-31-queues", "eks-500-nodes", "pcs-mixed-p5-p4d",
}


def _write(tmp_path: Path, content: str | bytes, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def _offline_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"), "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"), "NO_COLOR": "1", "COLUMNS": "250"})
    return env


def run_cli(tmp_path: Path, *args: str, installed: bool = False) -> subprocess.CompletedProcess[str]:
    if not installed:  # the same entry point, in this process: fixtures/in_process.py
        return run_in_process(args, _offline_env(tmp_path), cwd=tmp_path)
    return subprocess.run([FMCLUSTER, *args], capture_output=True, text=True, env=_offline_env(tmp_path),
                          cwd=tmp_path, timeout=120)


def _flat(text: str) -> str:
    """Undo line wrapping, so a message can be matched whatever the terminal width."""
    return " ".join(text.split())


def _problem(error: SpecError, path: str):
    matches = [p for p in error.problems if p.path == path]
    assert matches, f"no problem at {path!r}; got {[str(p) for p in error.problems]}"
    return matches[0]


def test_cases_have_unique_ids() -> None:
    ids = [case[0] for case in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 30
    assert CLI_CASES <= set(ids)


@pytest.mark.parametrize(("text", "line", "column", "path", "fragment"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_spec_is_located(tmp_path: Path, text: str, line: int, column: int, path: str, fragment: str) -> None:
    spec = _write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    problem = _problem(caught.value, path)
    assert problem.file == str(spec)
    assert (problem.line, problem.column) == (line, column), str(problem)
    assert fragment in problem.message, str(problem)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in CLI_CASES], ids=lambda c: c[0])
@pytest.mark.parametrize("command", ["render", "validate"])
def test_bad_spec_through_cli(tmp_path: Path, command: str, case: tuple) -> None:
    _, text, line, column, _path, fragment = case
    spec = _write(tmp_path, text)
    installed = (case[0], command) in {("yaml-syntax", "render"), ("pcs-11-queues", "validate")}  # a parse, a rule
    result = run_cli(tmp_path, command, str(spec), installed=installed)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{spec}:{line}:{column}:" in result.stderr
    assert fragment in _flat(result.stderr)
    assert result.stdout == "" or command == "validate"


# --- files that are not specs at all: no position, still one message and exit 2 --------------------

def _random_text_bytes() -> bytes:
    return bytes(b for b in random.Random(1).randbytes(512) if b)  # no NUL: exercises the UTF-8 check


# (id, content, message fragment, (line, column) of the problem: None where the file has no position)
UNREADABLE: list[tuple[str, bytes | None, str, tuple[int, int] | None]] = [
    ("missing-file", None, "no such file", None),
    ("empty-file", b"", "is empty", None),
    ("blank-file", b"   \n\n", "is empty", None),
    ("comment-only", b"# nothing here yet\n", "is empty", None),
    ("binary-bytes", b"\x7fELF\x02\x01\x01\x00\x00\x00", "is a binary file", None),
    ("random-bytes", random.Random(1).randbytes(512), "is a binary file", None),
    ("random-bytes-no-nul", _random_text_bytes(), "is not UTF-8 text", (1, 1)),
    ("latin-1", "name: café\n".encode("latin-1"), "is not UTF-8 text (bad byte at offset 9)", (1, 10)),
    ("latin-1-line-3", "name: x\nregion: us-east-1\ntags: {a: é}\n".encode("latin-1"), "is not UTF-8 text",
     (3, 11)),
    ("control-character", b"name: a\x07b\n", "YAML does not allow the control character U+0007", (1, 8)),
    ("too-big", b"# " + b"x" * 1_100_000 + b"\n", "a spec is a short YAML file", None),
]


@pytest.mark.parametrize(("content", "fragment", "where"), [c[1:] for c in UNREADABLE],
                         ids=[c[0] for c in UNREADABLE])
def test_unreadable_file(tmp_path: Path, content: bytes | None, fragment: str,
                         where: tuple[int, int] | None) -> None:
    spec = tmp_path / "spec.yaml"
    if content is not None:
        spec.write_bytes(content)
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    problem = caught.value.problems[0]
    assert (problem.file, problem.line, problem.column) == (str(spec), *(where or (None, None)))
    assert fragment in problem.message


@pytest.mark.parametrize("case", ["missing-file", "empty-file", "binary-bytes", "random-bytes-no-nul", "latin-1",
                                  "control-character"])
def test_unreadable_file_through_cli(tmp_path: Path, case: str) -> None:
    _, content, fragment, where = next(c for c in UNREADABLE if c[0] == case)
    spec = tmp_path / "spec.yaml"
    if content is not None:
        spec.write_bytes(content)
    result = run_cli(tmp_path, "render", str(spec), installed=case == "latin-1")  # undecodable bytes, end to end
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    position = f":{where[0]}:{where[1]}" if where else ""
    assert f"{spec}{position}: {fragment}" in _flat(result.stderr)


def test_directory_is_not_a_spec(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "validate", str(tmp_path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "is a directory" in result.stderr


def test_every_problem_is_reported(tmp_path: Path) -> None:
    """Several mistakes in one file are all listed, each with its own position."""
    spec = _write(tmp_path, PCS.replace("name: demo", "name: ab") + "slurm: {version: '24.11'}\n"
                  "tags: {'aws:x': y}\n")
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    where = {p.path: (p.line, p.column) for p in caught.value.problems}
    assert where == {"name": (1, 7), "slurm.version": (7, 18), "tags.aws:x": (8, 17)}


# --- warnings: not errors, but still located ---------------------------------------------------------

def test_efa_on_a_type_without_it_is_refused(tmp_path: Path) -> None:
    """Every catalog instance type supports EFA; a general-purpose type's facts come from EC2's shipped list, which
    says m7i.large has none (AWS's General purpose specifications: no EFA below m7i.48xlarge), so AWS would refuse
    the launch: refused at the efa key."""
    from fmcluster import catalog

    assert all(catalog.instance(name).efa_supported for name in catalog.instance_names())
    spec = _write(tmp_path, PC.replace("p5.48xlarge", "m7i.large") + "    efa: true\n")
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    problem = _problem(caught.value, "queues[0].efa")
    assert (problem.line, problem.column) == (7, 10)
    assert "m7i.large does not support EFA" in problem.message


def test_open_ssh_warns(tmp_path: Path) -> None:
    spec = _write(tmp_path, PC + "network:\n  ssh: {allowed_cidr: 0.0.0.0/0}\n")
    loaded = load_spec(spec)
    assert [(w.path, w.line, w.column) for w in loaded.warnings] == [("network.ssh.allowed_cidr", 8, 23)]
    assert "whole IPv4 internet" in loaded.warnings[0].message


@pytest.mark.parametrize(("backend", "cidr", "fragment"), [
    (PC, "0.0.0.0/1", "SSH is open to 2,147,483,648 addresses (0.0.0.0/1 is wider than a /16)"),
    (PC, "10.0.0.0/8", "16,777,216 addresses"),
    (PC, "172.16.0.0/15", "131,072 addresses"),
    (PC, "10.1.0.0/16", None),
    (PC, "203.0.113.7/32", None),
    (PCS, "::/0", "whole IPv6 internet"),
    (PCS, "2001:db8::/32", "SSH is open to a /32 (2001:db8::/32 is wider than a /48)"),
    (PCS, "2001:db8::/48", None),
])
def test_wide_ssh_networks_warn(tmp_path: Path, backend: str, cidr: str, fragment: str | None) -> None:
    spec = _write(tmp_path, backend + f"network:\n  ssh: {{allowed_cidr: '{cidr}'}}\n")
    loaded = load_spec(spec)
    ssh = [w for w in loaded.warnings if w.path == "network.ssh.allowed_cidr"]
    if fragment is None:
        assert ssh == []
    else:
        assert len(ssh) == 1 and fragment in ssh[0].message, ssh
        assert (ssh[0].line, ssh[0].column) == (8, 23)


def test_wide_ssh_warning_is_printed_even_with_yes(tmp_path: Path) -> None:
    """create prints the warning before anything else, --yes or not (no AWS is reached here: the endpoint is
    unreachable, and the warning comes first)."""
    spec = _write(tmp_path, PC + "network:\n  ssh: {allowed_cidr: 0.0.0.0/1}\n")
    env = _offline_env(tmp_path)
    env["FMCLUSTER_HOME"] = str(tmp_path / "state")
    result = subprocess.run([FMCLUSTER, "--endpoint-url", "http://127.0.0.1:9", "create", str(spec), "--yes"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert "Traceback" not in result.stderr
    assert f"warning: {spec}:8:23: network.ssh.allowed_cidr: SSH is open to 2,147,483,648" in _flat(result.stderr)


def test_warning_printed_by_render(tmp_path: Path) -> None:
    spec = _write(tmp_path, PC + "network:\n  ssh: {allowed_cidr: 0.0.0.0/0}\n")
    result = run_cli(tmp_path, "render", str(spec))
    assert result.returncode == 0, result.stderr
    assert f"warning: {spec}:8:23:" in result.stderr


@pytest.mark.parametrize(("cidr", "ranges", "key"), [("2001:db8::/48", "Ipv6Ranges", "CidrIpv6"),
                                                     ("203.0.113.0/24", "IpRanges", "CidrIp")])
def test_pcs_ssh_rule_matches_the_address_family(tmp_path: Path, cidr: str, ranges: str, key: str) -> None:
    """EC2 takes IPv6 sources in Ipv6Ranges/CidrIpv6 and IPv4 in IpRanges/CidrIp; botocore's EC2 model checks the
    rendered request."""
    from fmcluster.backends.registry import render
    from fmcluster.validate.requests import check_document

    spec = _write(tmp_path, PCS + f"network:\n  ssh: {{allowed_cidr: '{cidr}'}}\n")
    documents = render(load_spec(spec).spec).documents
    groups = {d.key: d for d in documents if d.kind == "security_group"}
    ssh = [p for p in groups["login"].body["ingress"]["IpPermissions"] if p.get("FromPort") == 22]
    assert ssh == [{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                    ranges: [{key: cidr, "Description": "SSH to the login node"}]}]
    assert all(check_document(d) == [] for d in groups.values())
    # SSH only on the login node: the group every compute node carries has no port-22 rule, and only the
    # login launch template names the SSH group
    assert not [p for p in groups["cluster"].body["ingress"]["IpPermissions"] if p.get("FromPort") == 22]
    templates = {d.key: d.text for d in documents if d.kind == "launch_template"}
    assert [key for key, text in templates.items() if "${security_group.login.id}" in text] == ["login"]


@pytest.mark.parametrize(("base", "count"), [(PC, 36), (PCS, 45)], ids=["parallelcluster", "pcs"])
def test_tags_up_to_the_budget_load(tmp_path: Path, base: str, count: int) -> None:
    """The budget is exact: one tag fewer than the refused cases loads; aws: keys are refused on their own
    rule, never counted."""
    assert len(load_spec(_write(tmp_path, _with_tags(base, count))).spec.tags) == count


def test_tag_budget_counts_what_render_adds(tmp_path: Path) -> None:
    """The tags the budget reserves are the ones fmcluster's rendering really adds to a resource."""
    from fmcluster.render.common import resource_tags
    from fmcluster.spec.tag_rules import OWNERSHIP_TAGS

    spec = load_spec(_write(tmp_path, _with_tags(PC, 3))).spec
    assert set(resource_tags(spec, "kind:key")) - set(spec.tags) == set(OWNERSHIP_TAGS)


def test_eks_quotas_hold_up_to_their_defaults(tmp_path: Path) -> None:
    """29 queues (30 node groups with the system group) and 450 nodes in one group are EKS's defaults exactly."""
    assert len(load_spec(_write(tmp_path, _many_queues(29).replace("backend: pcs", "backend: eks"))).spec.queues) == 29
    spec = load_spec(_write(tmp_path, EKS.replace("nodes: 2", "nodes: {min: 1, max: 450}"), "range.yaml")).spec
    assert spec.queues[0].nodes.max == 450
