"""What the spec must satisfy for AWS ParallelCluster 3: its name patterns and limits (ParallelCluster's own
constants, cited at each), the Slurm it ships, its one-image-per-cluster rule, and what it cannot honour."""

from __future__ import annotations

import ipaddress
import re

from fmcluster.backends.parallelcluster import slurm_settings
from fmcluster.backends.slurm import health_checks
from fmcluster.catalog.hardware import hardware
from fmcluster.spec import decisions, ultraserver_capacity
from fmcluster.spec.backend_rules import BackendSpecRules, Report, TagBudget, refuse_section
from fmcluster.spec.models import Queue, Spec
from fmcluster.spec.positions import Path_
from fmcluster.spec.rules_fields import gpu_instance
from fmcluster.spec.tag_rules import AWS_TAGS_PER_RESOURCE, OWNERSHIP_TAGS

# pcluster/constants.py PCLUSTER_NAME_REGEX and PCLUSTER_NAME_MAX_LENGTH(_SLURM_ACCOUNTING).
PCLUSTER_CLUSTER_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]*$")
PCLUSTER_CLUSTER_NAME_MAX = 60
PCLUSTER_CLUSTER_NAME_MAX_WITH_ACCOUNTING = 40
# pcluster/validators/cluster_validators.py NAME_REGEX / NAME_MAX_LENGTH (queues, compute resources).
PCLUSTER_RESOURCE_NAME = re.compile(r"^[a-z][a-z0-9\-]*$")
PCLUSTER_RESOURCE_NAME_MAX = 25
PCLUSTER_MAX_QUEUES = 50
# ParallelCluster 3.16 refuses a configuration whose Tags (the user's plus fmcluster's four, which
# fmcluster puts in the cluster configuration) exceed MAX_TAGS_COUNT = 40 (pcluster/constants.py, checked by
# pcluster/validators/tags_validators.py ComputeResourceTagsValidator), keeping the other 10 of AWS's 50 for
# what it adds to every compute instance: "Name" and 8 parallelcluster:* tags (cluster-name and version from
# models/cluster.py _add_tags; node-type, attributes, networking, filesystem from
# templates/cdk_builder_utils.py get_default_instance_tags; queue-name, compute-resource-name from
# templates/queues_stack.py).
PCLUSTER_CONFIG_TAGS_MAX = 40
PCLUSTER_PREFIX = "parallelcluster:"
# The guide's tutorial for the type: p6e-gb200.36xlarge instances are available only through P6e-GB200 UltraServers,
# which are bought as EC2 Capacity Blocks for ML (ParallelCluster 3.14.0 and later).
PCLUSTER_ULTRASERVER_PAGE = "ParallelCluster user guide, 'Support NVIDIA-IMEX with p6e-gb200 instance'"


def _counterpart(instance_type: str, architecture: str) -> str | None:
    """The same family and size on the other architecture (m7i.2xlarge <-> m7g.2xlarge), as a hint only."""
    match = re.match(r"^(?P<letters>[a-z]+)(?P<generation>\d+)[a-z-]*\.(?P<size>.+)$", instance_type)
    if not match or match["letters"] not in ("m", "c", "r"):
        return None
    suffix = "g" if architecture == "arm64" else "i"
    return f"{match['letters']}{match['generation']}{suffix}.{match['size']}"


class ParallelClusterSpecRules(BackendSpecRules):
    default_os = "ubuntu2204"
    stock_images = "ParallelCluster's official AMIs"

    def on_limit_problem(self, on_limit: str) -> str | None:
        if on_limit == "destroy-compute":
            # The queues are resources of ParallelCluster's CloudFormation stack: a call from outside that deletes
            # them would leave the stack describing queues that do not exist. Its fleet stop is the call it has.
            return ("budget.on_limit destroy-compute is not available on the parallelcluster backend: its queues "
                    "live in ParallelCluster's stack, which only UpdateCluster may change; use stop (the compute "
                    "fleet is stopped, as `pcluster update-compute-fleet --status STOP_REQUESTED` does)")
        return None

    def compute_resource_name(self, queue: Queue) -> str:
        if queue.compute_resource:
            return queue.compute_resource
        # p5en.48xlarge -> p5en-48xlarge: valid under ParallelCluster's ^[a-z][a-z0-9-]*$ and short enough.
        return queue.instance_type.replace(".", "-")[:25]

    def check(self, spec: Spec, error: Report, warn: Report) -> None:
        self._names(spec, error)
        self._limits(spec, error)
        self._slurm(spec, error)
        self._access(spec, error)
        self._reserved_tags(spec, error)
        self._architectures(spec, error)
        self._ultraserver_capacity(spec, error)
        self._health_checks(spec, error)
        self._slurm_settings(spec, error)

    def tag_budget(self) -> TagBudget:
        own = OWNERSHIP_TAGS
        return TagBudget(own, PCLUSTER_CONFIG_TAGS_MAX - len(own),
                         f"ParallelCluster allows {PCLUSTER_CONFIG_TAGS_MAX} configured tags (it keeps the rest of "
                         f"AWS's {AWS_TAGS_PER_RESOURCE} per resource for its own) and fmcluster adds {len(own)}")

    def ssh_cidr_problem(self, cidr: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str | None:
        if network.version == 6:
            # pcluster/schemas/common_schema.py ALLOWED_VALUES["cidr"]: HeadNode/Ssh/AllowedIps is IPv4 (or a
            # prefix list)
            return f"'{cidr}' is IPv6; ParallelCluster's HeadNode.Ssh.AllowedIps takes only IPv4 CIDRs"
        return None

    def family_problem(self, family: str) -> str | None:
        if family == "pcs-sample":
            return ("AWS's PCS sample AMIs carry the PCS agent, not ParallelCluster's cookbook; ParallelCluster "
                    "boots its own official AMIs for `os` (remove image)")
        return None

    def build_advice(self, family: str, source: str) -> str:
        return (f"ParallelCluster boots only images that carry its cookbook: build one with `pcluster build-image` "
                f"whose Build.ParentImage is the {family} image{source}, then set image.ami to it")

    def nodes_without_internet(self, path: Path_, message: str, remedy: str, error: Report, warn: Report) -> None:
        warn(path, f"{message} (ParallelCluster warns too): {remedy}")

    # -- the rules only ParallelCluster has --------------------------------------------------------------
    def _names(self, spec: Spec, error: Report) -> None:
        limit = PCLUSTER_CLUSTER_NAME_MAX_WITH_ACCOUNTING if spec.slurm.accounting else PCLUSTER_CLUSTER_NAME_MAX
        if not PCLUSTER_CLUSTER_NAME.match(spec.name):
            error(("name",), f"'{spec.name}': ParallelCluster cluster names start with a letter and hold only "
                             "letters, digits and hyphens")
        elif len(spec.name) > limit:
            why = " with Slurm accounting" if spec.slurm.accounting else ""
            error(("name",), f"'{spec.name}' is {len(spec.name)} characters; ParallelCluster allows {limit}{why}")
        for index, queue in enumerate(spec.queues):
            self._resource_name(queue.name, ("queues", index, "name"), "queue", error)
            if queue.compute_resource:
                self._resource_name(queue.compute_resource, ("queues", index, "compute_resource"),
                                    "compute resource", error)

    @staticmethod
    def _resource_name(name: str, path: Path_, what: str, error: Report) -> None:
        if not PCLUSTER_RESOURCE_NAME.match(name):
            error(path, f"'{name}': ParallelCluster {what} names start with a lowercase letter and hold only "
                        "lowercase letters, digits and hyphens")
        elif len(name) > PCLUSTER_RESOURCE_NAME_MAX:
            error(path, f"'{name}' is {len(name)} characters; ParallelCluster allows {PCLUSTER_RESOURCE_NAME_MAX}")

    def _limits(self, spec: Spec, error: Report) -> None:
        lustre = spec.storage.lustre
        if lustre is not None and lustre.metadata_iops != "auto":
            error(("storage", "lustre", "metadata_iops"), "ParallelCluster cannot set Lustre metadata IOPS; use "
                                                          "auto, or the pcs backend")
        if len(spec.queues) > PCLUSTER_MAX_QUEUES:
            error(("queues",), f"{len(spec.queues)} queues; ParallelCluster's Slurm scheduler allows "
                               f"{PCLUSTER_MAX_QUEUES}")

    def _slurm(self, spec: Spec, error: Report) -> None:
        slurm = spec.slurm
        if "version" in slurm.model_fields_set:
            error(("slurm", "version"), "ParallelCluster ships its own Slurm; version is for the pcs backend")
        if slurm.database is not None and not slurm.accounting:
            error(("slurm", "database"), "ParallelCluster turns Slurm accounting on whenever it has a database: set "
                                         "accounting: true, or remove database")
        if slurm.accounting and slurm.database is None:
            error(("slurm", "accounting"), "ParallelCluster needs a database for Slurm accounting: add "
                                           "slurm.database {uri, user, password_secret_arn}")
        refuse_section(spec, "pcs", "pcs", error)
        refuse_section(spec, "kubernetes", "eks", error)

    def _access(self, spec: Spec, error: Report) -> None:
        network = spec.network
        if network.security_groups and network.additional_security_groups:
            # pcluster/schemas/cluster_schema.py: "SecurityGroups and AdditionalSecurityGroups can not be
            # configured together."
            error(("network", "additional_security_groups"), "ParallelCluster takes security_groups or "
                  "additional_security_groups, not both: with your own groups, list them all in security_groups")

    def _reserved_tags(self, spec: Spec, error: Report) -> None:
        for key in spec.tags:
            if key.startswith(PCLUSTER_PREFIX):
                error(("tags", key), f"tag keys starting with '{PCLUSTER_PREFIX}' are reserved by ParallelCluster")

    def _architectures(self, spec: Spec, error: Report) -> None:
        """ParallelCluster runs one OS image on the head node and every compute node: its
        InstanceArchitectureCompatibilityValidator (pcluster/validators/cluster_validators.py) fails a cluster
        whose compute types do not support the head node's architecture."""
        head = hardware(spec.head_node.instance_type)
        for index, queue in enumerate(spec.queues):
            compute = hardware(queue.instance_type)
            if None in (head.architecture, compute.architecture) or compute.architecture == head.architecture:
                continue
            hint = _counterpart(spec.head_node.instance_type, compute.architecture or "")
            fix = f"set head_node.instance_type to an {compute.architecture} type" + (
                f" such as {hint}" if hint else "")
            error(("queues", index, "instance_type"),
                  f"{queue.instance_type} is {compute.architecture} but the head node ({spec.head_node.instance_type}) "
                  f"is {head.architecture}: ParallelCluster boots one image on every node and refuses compute types "
                  f"of another architecture than the head node's; {fix}, or use the pcs backend")

    def _ultraserver_capacity(self, spec: Spec, error: Report) -> None:
        """A p6e-gb200 queue (an NVLink domain across instances) runs only on its UltraServer Capacity Block: its
        guide page names no other way to buy it, and EC2 sells the type no other way. As on PCS and EKS, anything
        else is refused before plan prices it."""
        for index, queue in enumerate(spec.queues):
            if decisions.needs_imex(queue):
                ultraserver_capacity.refuse_unless_capacity_block(index, queue, PCLUSTER_ULTRASERVER_PAGE, error)

    def _health_checks(self, spec: Spec, error: Report) -> None:
        for index, queue in enumerate(spec.queues):
            # auto_repair, where written, is the same switch (fmcluster.backends.slurm.health_checks).
            field = health_checks.health_checks_field(queue)
            if health_checks.slurm_health_checks(queue) and field in queue.model_fields_set \
                    and gpu_instance(queue) is False:
                error(("queues", index, field),
                      f"not supported on parallelcluster: its only health check (HealthChecks.Gpu) runs on GPU "
                      f"instances, and {queue.instance_type} has none. Remove {field}")

    def _slurm_settings(self, spec: Spec, error: Report) -> None:
        for name in spec.slurm.custom_settings:
            problem = slurm_settings.parallelcluster_problem(name, "cluster")
            if problem:
                error(("slurm", "custom_settings", name), problem)
        for index, queue in enumerate(spec.queues):
            for name in queue.slurm_settings:
                problem = slurm_settings.parallelcluster_problem(name, "queue")
                if problem:
                    error(("queues", index, "slurm_settings", name), problem)


RULES = ParallelClusterSpecRules()
