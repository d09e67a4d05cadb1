"""Checks that span fields, or mirror what AWS would refuse, run on a spec that has the right shape.

Each rule reports against the exact field it is about, so the user sees ``file:line:col``. Patterns
and limits are ParallelCluster's and PCS's own (see the comments next to each constant).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator

from fmcluster import catalog
from fmcluster.catalog.hardware import hardware, missing_facts
from fmcluster.errors import SpecProblem
from fmcluster.regions import region_problem
from fmcluster.spec import decisions, rules_fields
from fmcluster.spec.hardware_rules import HARDWARE_RULES
from fmcluster.spec.instance_mix import check_instance_mix
from fmcluster.spec.models import Slurm, Spec, max_nodes, min_nodes
from fmcluster.spec.networking import check_access, check_network
from fmcluster.spec.positions import Path_, PositionedDocument
from fmcluster.spec.tag_rules import check_tag_count

# pcluster/constants.py PCLUSTER_NAME_REGEX and PCLUSTER_NAME_MAX_LENGTH(_SLURM_ACCOUNTING).
PCLUSTER_CLUSTER_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]*$")
PCLUSTER_CLUSTER_NAME_MAX = 60
PCLUSTER_CLUSTER_NAME_MAX_WITH_ACCOUNTING = 40
# pcluster/validators/cluster_validators.py NAME_REGEX / NAME_MAX_LENGTH (queues, compute resources).
PCLUSTER_RESOURCE_NAME = re.compile(r"^[a-z][a-z0-9\-]*$")
PCLUSTER_RESOURCE_NAME_MAX = 25
PCLUSTER_MAX_QUEUES = 50
# botocore pcs model: ClusterName/ComputeNodeGroupName/QueueName pattern '(?!pcs_)^[A-Za-z][A-Za-z0-9-]+'.
PCS_NAME = re.compile(r"^(?!pcs_)[A-Za-z][A-Za-z0-9-]+$")
PCS_CLUSTER_NAME_LENGTH = (3, 40)
PCS_RESOURCE_NAME_LENGTH = (3, 25)
PCS_MAX_NODE_GROUPS = 10
PCS_MAX_QUEUES = 10
LOGIN_GROUP = "login"
PCS_END_OF_LIFE = {"24.11": "2026-05-31", "25.05": "2026-11-30"}
# FSx for Lustre SSD: 1,200 GiB, 2,400 GiB, then increments of 2,400 GiB.
LUSTRE_FIRST_STEPS = (1200, 2400)
LUSTRE_STEP = 2400
LUSTRE_METADATA_IOPS_SMALL = (1500, 3000, 6000, 12000)
LUSTRE_METADATA_IOPS_STEP = 12000
LUSTRE_METADATA_IOPS_MAX = 192000

Report = Callable[[Path_, str], None]


def check_rules(spec: Spec, document: PositionedDocument) -> tuple[list[SpecProblem], list[SpecProblem]]:
    """Return (errors, warnings) for a spec that already parsed."""
    errors: list[SpecProblem] = []
    warnings: list[SpecProblem] = []

    def error(path: Path_, message: str) -> None:
        errors.append(document.problem(path, message))

    def warn(path: Path_, message: str) -> None:
        warnings.append(document.problem(path, message))

    for rule in (_names, _region, _instance_types, _capacity, _pcs_limits, _storage, _slurm, _network, _tags,
                 check_tag_count, check_network, check_access, check_instance_mix):
        rule(spec, error, warn)

    for rule in HARDWARE_RULES:
        rule(spec, error, warn)

    rules_fields.check(spec, error, warn, document.file)
    return errors, warnings


def _names(spec: Spec, error: Report, warn: Report) -> None:
    if spec.backend == "parallelcluster":
        limit = PCLUSTER_CLUSTER_NAME_MAX_WITH_ACCOUNTING if spec.slurm.accounting else PCLUSTER_CLUSTER_NAME_MAX
        if not PCLUSTER_CLUSTER_NAME.match(spec.name):
            error(("name",), f"'{spec.name}': ParallelCluster cluster names start with a letter and hold only "
                             "letters, digits and hyphens")
        elif len(spec.name) > limit:
            why = " with Slurm accounting" if spec.slurm.accounting else ""
            error(("name",), f"'{spec.name}' is {len(spec.name)} characters; ParallelCluster allows {limit}{why}")
    else:
        low, high = PCS_CLUSTER_NAME_LENGTH
        if not PCS_NAME.match(spec.name):
            error(("name",), f"'{spec.name}': PCS cluster names start with a letter, hold only letters, digits "
                             "and hyphens, and do not start with 'pcs_'")
        elif not low <= len(spec.name) <= high:
            error(("name",), f"'{spec.name}' is {len(spec.name)} characters; PCS allows {low} to {high}")

    seen_queues: dict[str, int] = {}
    seen_groups: dict[str, int] = {}
    for index, queue in enumerate(spec.queues):
        _check_resource_name(spec, queue.name, ("queues", index, "name"), "queue", error)
        if queue.name in seen_queues:
            first = seen_queues[queue.name]
            error(("queues", index, "name"), f"queue '{queue.name}' is already defined at queues[{first}]")
        seen_queues.setdefault(queue.name, index)
        group = decisions.compute_resource_name(queue, spec.backend)
        path = ("queues", index, "compute_resource") if queue.compute_resource else ("queues", index, "name")
        if queue.compute_resource:
            _check_resource_name(spec, group, path, "compute resource", error)
        if spec.backend == "pcs":
            if group in seen_groups:
                error(path, f"compute node group '{group}' is already used by queues[{seen_groups[group]}]")
            seen_groups.setdefault(group, index)


def _check_resource_name(spec: Spec, name: str, path: Path_, what: str, error: Report) -> None:
    if spec.backend == "parallelcluster":
        if not PCLUSTER_RESOURCE_NAME.match(name):
            error(path, f"'{name}': ParallelCluster {what} names start with a lowercase letter and hold only "
                        "lowercase letters, digits and hyphens")
        elif len(name) > PCLUSTER_RESOURCE_NAME_MAX:
            error(path, f"'{name}' is {len(name)} characters; ParallelCluster allows {PCLUSTER_RESOURCE_NAME_MAX}")
    else:
        low, high = PCS_RESOURCE_NAME_LENGTH
        if not PCS_NAME.match(name):
            error(path, f"'{name}': PCS {what} names start with a letter, hold only letters, digits and "
                        "hyphens, and do not start with 'pcs_'")
        elif not low <= len(name) <= high:
            error(path, f"'{name}' is {len(name)} characters; PCS allows {low} to {high}")


def _instance_types(spec: Spec, error: Report, warn: Report) -> None:
    problem = catalog.instance_type_problem(spec.head_node.instance_type)
    if problem:
        error(("head_node", "instance_type"), problem)
    for index, queue in enumerate(spec.queues):
        path = ("queues", index)
        problem = catalog.instance_type_problem(queue.instance_type)
        if problem:
            error((*path, "instance_type"), problem)
            continue
        facts = hardware(queue.instance_type)
        missing = missing_facts(facts)
        if missing:
            warn((*path, "instance_type"), f"'{queue.instance_type}' is not in fmcluster's catalog and EC2 has not "
                                           f"been asked yet: its {', '.join(missing)} are unknown, so it is treated "
                                           "as a node without accelerators or EFA; run with an AWS endpoint "
                                           "(credentials, --endpoint-url or --sandbox) to read DescribeInstanceTypes")
            if queue.efa:
                warn((*path, "efa"), f"EFA support of '{queue.instance_type}' is unknown to fmcluster; AWS "
                                     "will refuse the launch if it has none")
        elif queue.efa and not facts.efa_supported:
            error((*path, "efa"), f"{queue.instance_type} does not support EFA; remove 'efa: true'")


def _capacity(spec: Spec, error: Report, warn: Report) -> None:
    for index, queue in enumerate(spec.queues):
        path = ("queues", index)
        low, high = min_nodes(queue), max_nodes(queue)
        if low > high:
            error((*path, "nodes", "min"), f"min ({low}) is larger than max ({high})")
        kind = queue.capacity.type
        has_id = queue.capacity.reservation_id is not None
        group = queue.capacity.resource_group_arn is not None
        if kind == "reservation" and has_id and group:
            error((*path, "capacity", "resource_group_arn"), "give reservation_id or resource_group_arn, not both "
                                                             "(a launch targets one of them)")
        elif kind == "reservation" and not has_id and not group:
            error((*path, "capacity"), "capacity type 'reservation' needs reservation_id (cr-…) or "
                                       "resource_group_arn (a group of reservations)")
        elif kind == "capacity-block" and not has_id:
            error((*path, "capacity"), f"capacity type '{kind}' needs reservation_id (cr-…)")
        if group and kind != "reservation":
            error((*path, "capacity", "resource_group_arn"), "resource_group_arn is for capacity type 'reservation' "
                                                             f"(On-Demand Capacity Reservations), not '{kind}'")
        if kind in ("on-demand", "spot") and has_id:
            error((*path, "capacity", "reservation_id"),
                  f"reservation_id is only used with capacity type 'reservation' or 'capacity-block', not '{kind}'")
        if kind == "capacity-block":
            if low != high:
                error((*path, "nodes"), f"a Capacity Block queue cannot scale: min ({low}) must equal max "
                                        f"({high}); write nodes: {high}")
            elif high == 0:
                error((*path, "nodes"), "a Capacity Block queue needs at least one node")
            if queue.placement_group is True:
                error((*path, "placement_group"), "Capacity Blocks are already placed by AWS; a placement group "
                                                  "makes launches fail. Use auto or false")


def _pcs_limits(spec: Spec, error: Report, warn: Report) -> None:
    if spec.backend != "pcs":
        lustre = spec.storage.lustre
        if lustre is not None and lustre.metadata_iops != "auto":
            error(("storage", "lustre", "metadata_iops"), "ParallelCluster cannot set Lustre metadata IOPS; use "
                                                          "auto, or the pcs backend")
        if len(spec.queues) > PCLUSTER_MAX_QUEUES:
            error(("queues",), f"{len(spec.queues)} queues; ParallelCluster's Slurm scheduler allows "
                               f"{PCLUSTER_MAX_QUEUES}")
        return
    # Every queue gets its own node group, and the login node is one more group.
    groups = len(spec.queues) + 1
    if len(spec.queues) > PCS_MAX_QUEUES or groups > PCS_MAX_NODE_GROUPS:
        first_extra = min(len(spec.queues) - 1, PCS_MAX_NODE_GROUPS - 1)
        error(("queues", first_extra), f"{len(spec.queues)} queues make {groups} compute node groups (one per "
                                       f"queue plus the login group); PCS allows {PCS_MAX_NODE_GROUPS} node groups "
                                       f"and {PCS_MAX_QUEUES} queues per cluster, so at most "
                                       f"{PCS_MAX_NODE_GROUPS - 1} queues")
    for index, queue in enumerate(spec.queues):
        if decisions.compute_resource_name(queue, "pcs") == LOGIN_GROUP:
            error(("queues", index, "name"), f"'{LOGIN_GROUP}' is the login node group's name; pick another")
        try:
            decisions.efa_network_interfaces(queue)
        except LookupError as exc:
            error(("queues", index, "efa"), f"{exc}; set efa: false, or use the parallelcluster backend, "
                                            "which lays out EFA itself")
    total = decisions.pcs_nodes(spec)
    size = spec.pcs.size
    if size == "auto":
        if total > decisions.PCS_SIZE_LIMITS["LARGE"]:
            error(("queues",), f"{total} nodes in all (the queues at their maximum and the login node); a PCS "
                               f"cluster manages at most {decisions.PCS_SIZE_LIMITS['LARGE']} (size LARGE)")
        return
    limit = decisions.PCS_SIZE_LIMITS[size]
    if total > limit:
        needed = decisions.pcs_size_for(total)
        hint = f"; use pcs.size {needed}" if needed else ""
        error(("pcs", "size"), f"{size} manages at most {limit} nodes, and the queues at their maximum with the "
                               f"login node add up to {total}{hint}")


def _storage(spec: Spec, error: Report, warn: Report) -> None:
    lustre = spec.storage.lustre
    if lustre is not None and lustre.existing_id is None:
        gib = lustre.capacity_gib
        if gib not in LUSTRE_FIRST_STEPS and gib % LUSTRE_STEP != 0:
            below = max([s for s in _lustre_steps_around(gib) if s < gib], default=LUSTRE_FIRST_STEPS[0])
            above = min(s for s in _lustre_steps_around(gib) if s > gib)
            error(("storage", "lustre", "capacity_gib"),
                  f"{gib} GiB is not a size FSx for Lustre offers: 1200, 2400, then steps of 2400 "
                  f"(nearest: {below} or {above})")
        iops = lustre.metadata_iops
        if iops != "auto" and not _valid_metadata_iops(int(iops)):
            error(("storage", "lustre", "metadata_iops"),
                  f"{iops} is not a metadata IOPS level FSx offers: 1500, 3000, 6000, 12000, then steps of "
                  f"12000 up to {LUSTRE_METADATA_IOPS_MAX}")
    for field_name in ("s3_import", "s3_export"):
        if lustre is not None and lustre.existing_id and getattr(lustre, field_name):
            error(("storage", "lustre", field_name), "data repository links are set on the existing file system, "
                                                     "not here")
    home = spec.storage.home
    if home is not None and lustre is not None and home.mount == lustre.mount:
        error(("storage", "home", "mount"), f"{home.mount} is already the Lustre mount point")


def _lustre_steps_around(gib: int) -> Iterator[int]:
    yield from LUSTRE_FIRST_STEPS
    step = (gib // LUSTRE_STEP) * LUSTRE_STEP
    yield from (s for s in (step, step + LUSTRE_STEP) if s >= LUSTRE_STEP)


def _valid_metadata_iops(iops: int) -> bool:
    if iops in LUSTRE_METADATA_IOPS_SMALL:
        return True
    return iops % LUSTRE_METADATA_IOPS_STEP == 0 and 0 < iops <= LUSTRE_METADATA_IOPS_MAX


def _slurm(spec: Spec, error: Report, warn: Report) -> None:
    slurm = spec.slurm
    if spec.backend == "pcs":
        if slurm.version in PCS_END_OF_LIFE:
            error(("slurm", "version"), f"Slurm {slurm.version} reached its end of life on AWS PCS on "
                                        f"{PCS_END_OF_LIFE[slurm.version]}; PCS refuses new clusters on it. Use "
                                        f"{Slurm.model_fields['version'].default}")
        sample = spec.image is None or spec.image.family == "pcs-sample"
        if sample and spec.os is not None and spec.os != decisions.PCS_SAMPLE_AMI_OS:
            error(("os",), f"AWS's PCS sample AMIs come only in Amazon Linux 2023 ({decisions.PCS_SAMPLE_AMI_OS}), "
                           f"not {spec.os}: remove os, or set image.ami to a PCS-ready {spec.os} AMI")
        if slurm.database is not None:
            error(("slurm", "database"), "PCS keeps Slurm accounting itself; database is for ParallelCluster")
    else:
        if "version" in slurm.model_fields_set:
            error(("slurm", "version"), "ParallelCluster ships its own Slurm; version is for the pcs backend")
        if slurm.database is not None and not slurm.accounting:
            error(("slurm", "database"), "ParallelCluster turns Slurm accounting on whenever it has a database: set "
                                         "accounting: true, or remove database")
        if slurm.accounting and slurm.database is None:
            error(("slurm", "accounting"), "ParallelCluster needs a database for Slurm accounting: add "
                                           "slurm.database {uri, user, password_secret_arn}")
        if "size" in spec.pcs.model_fields_set:
            error(("pcs", "size"), "pcs.size is for the pcs backend")


def _region(spec: Spec, error: Report, warn: Report) -> None:
    problem = region_problem(spec.region)
    if problem:
        error(("region",), problem)


def _network(spec: Spec, error: Report, warn: Report) -> None:
    cidr = spec.network.ssh.allowed_cidr
    if cidr is None:
        return
    path = ("network", "ssh", "allowed_cidr")
    try:
        network = ipaddress.ip_network(cidr, strict=True)
    except ValueError as exc:
        message = f"'{cidr}' is not a network address: {exc}"
        try:  # host bits set (10.0.0.1/8): the network the user most likely meant
            loose = ipaddress.ip_network(cidr, strict=False)
            message += f" (did you mean {_ipv4_mapped(loose) or loose}?)"
        except ValueError:
            pass
        error(path, message)
        return
    mapped = _ipv4_mapped(network)
    if mapped is not None:
        # EC2 reads ::ffff:a.b.c.d as an IPv6 source (Ipv6Ranges), which IPv4 clients never come from
        error(path, f"'{cidr}' is an IPv4-mapped IPv6 network; security groups would take it as an IPv6 range, "
                    f"not the IPv4 network meant: write the IPv4 form, {mapped}")
        return
    if network.version == 6 and spec.backend == "parallelcluster":
        # pcluster/schemas/common_schema.py ALLOWED_VALUES["cidr"]: HeadNode/Ssh/AllowedIps is IPv4 (or a prefix list)
        error(path, f"'{cidr}' is IPv6; ParallelCluster's HeadNode.Ssh.AllowedIps takes only IPv4 CIDRs")
        return
    for message in ssh_exposure(network):
        warn(path, message)


def _ipv4_mapped(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> ipaddress.IPv4Network | None:
    """The IPv4 network an IPv4-mapped IPv6 one (::ffff:0:0/96 and inside it) stands for, else None."""
    if network.version != 6 or network.prefixlen < 96 or network.network_address.ipv4_mapped is None:
        return None
    return ipaddress.ip_network(f"{network.network_address.ipv4_mapped}/{network.prefixlen - 96}")


# Wider than this is "a lot of the internet": a /16 is 65,536 IPv4 addresses; a /48 is one IPv6 site.
SSH_WIDEST_QUIET = {4: 16, 6: 48}


def ssh_exposure(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> list[str]:
    """Warnings for an SSH source network that reaches far: always for 0.0.0.0/0 and ::/0, and for anything
    wider than /16 (IPv4) or /48 (IPv6)."""
    if network.prefixlen == 0:
        return [f"SSH is open to the whole {'IPv4' if network.version == 4 else 'IPv6'} internet ({network}), "
                "as written"]
    if network.prefixlen < SSH_WIDEST_QUIET[network.version]:
        size = f"{network.num_addresses:,} addresses" if network.version == 4 else f"a /{network.prefixlen}"
        return [f"SSH is open to {size} ({network} is wider than a /{SSH_WIDEST_QUIET[network.version]}); "
                "narrow it to the networks you connect from"]
    return []


def _tags(spec: Spec, error: Report, warn: Report) -> None:
    for key, value in spec.tags.items():
        path = ("tags", key)
        if key.lower().startswith("aws:"):
            error(path, "tag keys starting with 'aws:' are reserved by AWS")
        elif key.startswith("fmcluster:"):
            error(path, "tag keys starting with 'fmcluster:' are reserved: fmcluster uses them to find its resources")
        elif not 1 <= len(key) <= 128:
            error(path, "tag keys are 1 to 128 characters")
        if len(value) > 256:
            error(path, "tag values are at most 256 characters")
