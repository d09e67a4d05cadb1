"""Checks that span fields, or mirror what AWS would refuse, run on a spec that has the right shape.

Each rule reports against the exact field it is about, so the user sees ``file:line:col``. What differs by
backend (name patterns, limits, what it cannot honour) each backend answers itself: see
:mod:`fmcluster.spec.backend_rules`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator

from fmcluster.catalog import names
from fmcluster.catalog.hardware import hardware
from fmcluster.connection.regions import region_problem
from fmcluster.errors import SpecProblem
from fmcluster.spec import rules_fields
from fmcluster.spec.backend_rules import backend_rules
from fmcluster.spec.budget import check_budget
from fmcluster.spec.burn_in import check_burn_in
from fmcluster.spec.hardware_rules import HARDWARE_RULES
from fmcluster.spec.instance_mix import check_instance_mix
from fmcluster.spec.models import Spec, max_nodes, min_nodes
from fmcluster.spec.networking import check_access, check_network
from fmcluster.spec.positions import Path_, PositionedDocument
from fmcluster.spec.tag_rules import check_tag_count

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

    for rule in (_names, _region, _instance_types, _capacity, _storage, _network, _tags,
                 check_tag_count, check_network, check_access, check_instance_mix, check_budget, check_burn_in):
        rule(spec, error, warn)
    backend_rules(spec.backend).check(spec, error, warn)

    for rule in HARDWARE_RULES:
        rule(spec, error, warn)

    rules_fields.check(spec, error, warn, document.file)
    return errors, warnings


def _names(spec: Spec, error: Report, warn: Report) -> None:
    seen_queues: dict[str, int] = {}
    for index, queue in enumerate(spec.queues):
        if queue.name in seen_queues:
            first = seen_queues[queue.name]
            error(("queues", index, "name"), f"queue '{queue.name}' is already defined at queues[{first}]")
        seen_queues.setdefault(queue.name, index)


def _instance_types(spec: Spec, error: Report, warn: Report) -> None:
    problem = names.instance_type_problem(spec.head_node.instance_type)
    if problem:
        error(("head_node", "instance_type"), problem)
    for index, queue in enumerate(spec.queues):
        path = ("queues", index)
        problem = names.instance_type_problem(queue.instance_type)
        if problem:
            error((*path, "instance_type"), problem)
            continue
        facts = hardware(queue.instance_type)
        if queue.efa and not facts.efa_supported:
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
    refused = backend_rules(spec.backend).ssh_cidr_problem(cidr, network)
    if refused:
        error(path, refused)
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


# "Tag restrictions" (EC2, EKS, CloudFormation's Tag types): "Do not use aws:, AWS:, or any upper or lowercase
# combination of such as a prefix for either keys or values as it is reserved for AWS use".
AWS_PREFIX = "aws:"
# EKS "Subnet requirements" / the Kubernetes cloud provider: kubernetes.io/cluster/<name> marks what a cluster owns or
# shares (subnets, security groups, load balancers); on fmcluster's VPC and subnets it would hand them to that cluster.
KUBERNETES_CLUSTER_PREFIX = "kubernetes.io/cluster/"


def _tags(spec: Spec, error: Report, warn: Report) -> None:
    for key, value in spec.tags.items():
        path = ("tags", key)
        if key.lower().startswith(AWS_PREFIX):
            error(path, "tag keys starting with 'aws:' are reserved by AWS")
        elif value.lower().startswith(AWS_PREFIX):
            error(path, "tag values starting with 'aws:' are reserved by AWS (\"Tag restrictions\")")
        elif key.startswith("fmcluster:"):
            error(path, "tag keys starting with 'fmcluster:' are reserved: fmcluster uses them to find its resources")
        elif key.startswith(KUBERNETES_CLUSTER_PREFIX):
            error(path, f"tag keys starting with '{KUBERNETES_CLUSTER_PREFIX}' are reserved: EKS and Kubernetes mark "
                        "with them what a cluster owns, and on fmcluster's VPC and subnets it would hand them to "
                        f"cluster '{key[len(KUBERNETES_CLUSTER_PREFIX):]}'")
        elif not 1 <= len(key) <= 128:
            error(path, "tag keys are 1 to 128 characters")
        if len(value) > 256:
            error(path, "tag values are at most 256 characters")
