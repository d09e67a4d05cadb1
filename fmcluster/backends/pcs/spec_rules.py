"""What the spec must satisfy for AWS PCS: its name patterns and limits, its Slurm versions and settings,
its sample AMIs, and what a PCS cluster cannot honour (each refused with the reason)."""

from __future__ import annotations

import re

from fmcluster.backends.pcs import decisions as pcs_decisions
from fmcluster.backends.pcs import slurm_settings, topology
from fmcluster.backends.slurm import health_checks
from fmcluster.catalog.hardware import hardware
from fmcluster.pricing.parts import CostPart
from fmcluster.spec import decisions, ultraserver_capacity
from fmcluster.spec.backend_rules import BackendSpecRules, Report, TagBudget, refuse_section
from fmcluster.spec.backend_settings import Slurm
from fmcluster.spec.models import Queue, Spec
from fmcluster.spec.positions import Path_
from fmcluster.spec.rules_fields import nvidia_gpus
from fmcluster.spec.tag_rules import AWS_TAGS_PER_RESOURCE, FMCLUSTER_TAGS

# botocore pcs model: ClusterName/ComputeNodeGroupName/QueueName pattern '(?!pcs_)^[A-Za-z][A-Za-z0-9-]+'.
PCS_NAME = re.compile(r"^(?!pcs_)[A-Za-z][A-Za-z0-9-]+$")
PCS_CLUSTER_NAME_LENGTH = (3, 40)
PCS_RESOURCE_NAME_LENGTH = (3, 25)
PCS_MAX_NODE_GROUPS = 10
PCS_MAX_QUEUES = 10
LOGIN_GROUP = "login"
PCS_END_OF_LIFE = {"24.11": "2026-05-31", "25.05": "2026-11-30"}
# PCS instanceHealthChecks need Slurm 26.05 or later (botocore's PCS model, CreateComputeNodeGroup).
PCS_HEALTH_CHECKS_MIN_VERSION = (26, 5)
PCS_ULTRASERVER_PAGE = ("PCS user guide, 'Configure UltraServer instances': a compute node group using UltraServer "
                        "instances with a Capacity Block")


def pcs_health_checks_supported(spec: Spec) -> bool:
    return tuple(int(part) for part in spec.slurm.version.split(".")) >= PCS_HEALTH_CHECKS_MIN_VERSION


class PcsSpecRules(BackendSpecRules):
    default_os = pcs_decisions.PCS_SAMPLE_AMI_OS
    stock_images = "AWS's PCS sample AMIs"

    def controller(self, spec: Spec | None) -> CostPart | None:
        size = f" ({pcs_decisions.pcs_size(spec)})" if spec is not None else ""
        return CostPart(f"PCS controller{size}", None,
                        "AWS PCS bills each cluster's controller by the hour, by its size (SMALL, MEDIUM, LARGE), "
                        "while the cluster exists; no bundled rate: the AWS PCS pricing page "
                        "(aws.amazon.com/pcs/pricing) is not among the AWS pages fmcluster's prices come from")

    def compute_resource_name(self, queue: Queue) -> str:
        return queue.compute_resource or queue.name

    def check(self, spec: Spec, error: Report, warn: Report) -> None:
        self._names(spec, error)
        self._limits(spec, error)
        self._slurm(spec, error)
        self._access(spec, error)
        self._architectures(spec, error)
        self._imex(spec, error, warn)
        topology.check(spec, warn)
        self._ultraserver_capacity(spec, error)
        self._health_checks(spec, error, warn)
        self._slurm_settings(spec, error)

    def tag_budget(self) -> TagBudget:
        own = FMCLUSTER_TAGS
        return TagBudget(own, AWS_TAGS_PER_RESOURCE - len(own),
                         f"AWS allows {AWS_TAGS_PER_RESOURCE} tags per resource and fmcluster adds {len(own)} of "
                         "its own")

    def build_advice(self, family: str, source: str) -> str:
        return (f"PCS nodes need the PCS agent and Slurm installed (PCS user guide, 'Custom Amazon Machine Images "
                f"for AWS PCS'): build an AMI from the {family} image{source} with them, then set image.ami to it")

    def nodes_without_internet(self, path: Path_, message: str, remedy: str, error: Report, warn: Report) -> None:
        error(path, f"{message} or the PCS API to register: {remedy}")

    # -- the rules only PCS has --------------------------------------------------------------------------
    def _names(self, spec: Spec, error: Report) -> None:
        low, high = PCS_CLUSTER_NAME_LENGTH
        if not PCS_NAME.match(spec.name):
            error(("name",), f"'{spec.name}': PCS cluster names start with a letter, hold only letters, digits "
                             "and hyphens, and do not start with 'pcs_'")
        elif not low <= len(spec.name) <= high:
            error(("name",), f"'{spec.name}' is {len(spec.name)} characters; PCS allows {low} to {high}")
        seen_groups: dict[str, int] = {}
        for index, queue in enumerate(spec.queues):
            self._resource_name(queue.name, ("queues", index, "name"), "queue", error)
            group = self.compute_resource_name(queue)
            path = ("queues", index, "compute_resource") if queue.compute_resource else ("queues", index, "name")
            if queue.compute_resource:
                self._resource_name(group, path, "compute resource", error)
            # Node groups are named per cluster, not per queue.
            if group in seen_groups:
                error(path, f"compute node group '{group}' is already used by queues[{seen_groups[group]}]")
            seen_groups.setdefault(group, index)

    @staticmethod
    def _resource_name(name: str, path: Path_, what: str, error: Report) -> None:
        low, high = PCS_RESOURCE_NAME_LENGTH
        if not PCS_NAME.match(name):
            error(path, f"'{name}': PCS {what} names start with a letter, hold only letters, digits and "
                        "hyphens, and do not start with 'pcs_'")
        elif not low <= len(name) <= high:
            error(path, f"'{name}' is {len(name)} characters; PCS allows {low} to {high}")

    def _limits(self, spec: Spec, error: Report) -> None:
        # Every queue gets its own node group, and the login node is one more group.
        groups = len(spec.queues) + 1
        if len(spec.queues) > PCS_MAX_QUEUES or groups > PCS_MAX_NODE_GROUPS:
            first_extra = min(len(spec.queues) - 1, PCS_MAX_NODE_GROUPS - 1)
            error(("queues", first_extra), f"{len(spec.queues)} queues make {groups} compute node groups (one per "
                                           f"queue plus the login group); PCS allows {PCS_MAX_NODE_GROUPS} node "
                                           f"groups and {PCS_MAX_QUEUES} queues per cluster, so at most "
                                           f"{PCS_MAX_NODE_GROUPS - 1} queues")
        for index, queue in enumerate(spec.queues):
            if self.compute_resource_name(queue) == LOGIN_GROUP:
                error(("queues", index, "name"), f"'{LOGIN_GROUP}' is the login node group's name; pick another")
            try:
                decisions.efa_network_interfaces(queue)
            except LookupError as exc:
                error(("queues", index, "efa"), f"{exc}; set efa: false, or use the parallelcluster backend, "
                                                "which lays out EFA itself")
        total = pcs_decisions.pcs_nodes(spec)
        size = spec.pcs.size
        if size == "auto":
            if total > pcs_decisions.PCS_SIZE_LIMITS["LARGE"]:
                error(("queues",), f"{total} nodes in all (the queues at their maximum and the login node); a PCS "
                                   f"cluster manages at most {pcs_decisions.PCS_SIZE_LIMITS['LARGE']} (size LARGE)")
            return
        limit = pcs_decisions.PCS_SIZE_LIMITS[size]
        if total > limit:
            needed = pcs_decisions.pcs_size_for(total)
            hint = f"; use pcs.size {needed}" if needed else ""
            error(("pcs", "size"), f"{size} manages at most {limit} nodes, and the queues at their maximum with "
                                   f"the login node add up to {total}{hint}")

    def _slurm(self, spec: Spec, error: Report) -> None:
        slurm = spec.slurm
        if slurm.version in PCS_END_OF_LIFE:
            error(("slurm", "version"), f"Slurm {slurm.version} reached its end of life on AWS PCS on "
                                        f"{PCS_END_OF_LIFE[slurm.version]}; PCS refuses new clusters on it. Use "
                                        f"{Slurm.model_fields['version'].default}")
        sample = spec.image is None or spec.image.family == "pcs-sample"
        if sample and spec.os is not None and spec.os != pcs_decisions.PCS_SAMPLE_AMI_OS:
            error(("os",), f"AWS's PCS sample AMIs come only in Amazon Linux 2023 ({pcs_decisions.PCS_SAMPLE_AMI_OS}), "
                           f"not {spec.os}: remove os, or set image.ami to a PCS-ready {spec.os} AMI")
        if slurm.database is not None:
            error(("slurm", "database"), "PCS keeps Slurm accounting itself; database is for ParallelCluster")
        refuse_section(spec, "kubernetes", "eks", error)

    def _access(self, spec: Spec, error: Report) -> None:
        if spec.network.security_groups:
            error(("network", "security_groups"), "not supported on pcs: the PCS controller and every node share "
                  "fmcluster's self-referencing cluster group, which Slurm and EFA need; put your groups in "
                  "network.additional_security_groups instead")
        for index, queue in enumerate(spec.queues):
            if queue.iam is not None and "iam" in queue.model_fields_set:
                error(("queues", index, "iam"), "not supported on pcs: every node group uses fmcluster's one node "
                      "role; put the policies in iam.additional_policies (they then reach every node)")

    def _architectures(self, spec: Spec, error: Report) -> None:
        """PCS gives every node group its own AMI (CreateComputeNodeGroup amiId), so x86_64 and arm64 node groups
        live in one cluster; one image.ami for all of them cannot, because an AMI has one architecture
        (DescribeImages Architecture)."""
        if spec.image is None or spec.image.ami is None:
            return
        head = hardware(spec.head_node.instance_type)
        for index, queue in enumerate(spec.queues):
            compute = hardware(queue.instance_type)
            if None in (head.architecture, compute.architecture) or compute.architecture == head.architecture:
                continue
            error(("queues", index, "instance_type"),
                  f"{queue.instance_type} is {compute.architecture} but the login node "
                  f"({spec.head_node.instance_type}) is {head.architecture}, and image.ami is one AMI for every node "
                  "group (an AMI has one architecture): use an image.family that AWS publishes for both, or a login "
                  "type of the same architecture")

    def _imex(self, spec: Spec, error: Report, warn: Report) -> None:
        """GB200 UltraServer queues get fmcluster's IMEX prolog (fmcluster/scripts/imex_prolog.sh) as the cluster's
        one Slurm Prolog, which then cannot be the user's too."""
        queues = [(index, queue) for index, queue in enumerate(spec.queues) if decisions.needs_imex(queue)]
        if not queues:
            return
        names = ", ".join(queue.name for _, queue in queues)
        if "Prolog" in spec.slurm.custom_settings:
            error(("slurm", "custom_settings", "Prolog"),
                  f"not supported on pcs with queue {names}: PCS takes one cluster Prolog, and NVLink across the "
                  f"UltraServer's instances needs fmcluster's IMEX prolog there ({pcs_decisions.PCS_IMEX_PROLOG}); run "
                  "your prolog's work from a bootstrap script, or use the parallelcluster backend (its prolog.d runs "
                  "several)")
        if spec.slurm.version < "25.05":
            error(("slurm", "version"), f"queue {names} needs IMEX configured per job, which AWS PCS supports from "
                                        "Slurm 25.05 (PCS user guide, 'Configure UltraServer instances'): use 25.05 "
                                        "or later")
        index, _ = queues[0]
        warn(("queues", index, "instance_type"),
             "fmcluster makes its IMEX prolog the cluster's Slurm Prolog; the image must carry the NVIDIA driver, "
             "CUDA and an enabled nvidia-imex service (PCS user guide, 'Configure UltraServer instances'). A node "
             "without them runs jobs without NVLink across instances and says so in "
             "/var/log/fmcluster-imex-prolog.log")

    def _ultraserver_capacity(self, spec: Spec, error: Report) -> None:
        """PCS's "Configure UltraServer instances" asks for a compute node group using UltraServer instances with a
        Capacity Block; as on EKS and ParallelCluster, anything else is refused before plan prices it."""
        for index, queue in enumerate(spec.queues):
            ultraserver_capacity.refuse_unless_capacity_block(index, queue, PCS_ULTRASERVER_PAGE, error)

    def _health_checks(self, spec: Spec, error: Report, warn: Report) -> None:
        unsupported = []
        for index, queue in enumerate(spec.queues):
            # auto_repair, where written, is the same switch (fmcluster.backends.slurm.health_checks).
            field = health_checks.health_checks_field(queue)
            explicit = field in queue.model_fields_set
            if not health_checks.slurm_health_checks(queue):
                continue
            if not nvidia_gpus(queue):
                if explicit:
                    error(("queues", index, field),
                          f"not supported on pcs: PCS's deep health checks run NVIDIA DCGM and need NVIDIA GPUs; "
                          f"{queue.instance_type} has none. Remove {field}")
                continue
            if pcs_health_checks_supported(spec):
                continue
            if explicit:
                error(("queues", index, field),
                      f"not supported on pcs with Slurm {spec.slurm.version}: PCS instance health checks need Slurm "
                      f"26.05 or later. Set slurm.version to 26.05, or {field}: false")
            else:
                unsupported.append(queue.name)
        if unsupported:
            # The default must not make every 25.11 spec fail: it is off, and said so.
            warn(("slurm", "version"), f"PCS instance health checks need Slurm 26.05; on {spec.slurm.version} the "
                                       f"GPU queues {', '.join(unsupported)} run without them (use 26.05 to get "
                                       "them, or write gpu_health_checks: false to silence this)")

    def _slurm_settings(self, spec: Spec, error: Report) -> None:
        for name in spec.slurm.custom_settings:
            problem = topology.setting_problem(name) or slurm_settings.pcs_problem(name, "cluster", spec.slurm.version)
            if problem:
                error(("slurm", "custom_settings", name), problem)
        for index, queue in enumerate(spec.queues):
            for name in queue.slurm_settings:
                problem = topology.setting_problem(name) or slurm_settings.pcs_problem(name, "queue",
                                                                                        spec.slurm.version)
                if problem:
                    error(("queues", index, "slurm_settings", name), problem)
            if "OverSubscribe" in queue.slurm_settings and "job_exclusive" in queue.model_fields_set:
                error(("queues", index, "slurm_settings", "OverSubscribe"),
                      "job_exclusive already sets OverSubscribe: keep one of them")


RULES = PcsSpecRules()
