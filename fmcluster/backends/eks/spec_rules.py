"""What the spec must satisfy for Amazon EKS: its name patterns (botocore's EKS model, Kubernetes object names),
the Kubernetes versions EKS offers, and every Slurm-cluster field an EKS cluster cannot honour, each refused with
the reason."""

from __future__ import annotations

import re

from fmcluster.backends.eks import ultraserver_rules
from fmcluster.backends.eks.nodes import burn_in_hold, limits, quotas, system_nodes
from fmcluster.backends.eks.nodes import repair as node_repair
from fmcluster.backends.eks.nodes.images import ACCELERATED_FAMILIES, GUIDE_PAGE, node_image
from fmcluster.backends.eks.render import role_name
from fmcluster.backends.eks.software import autoscaler_iam, autoscaler_install
from fmcluster.backends.eks.software.releases import CLUSTER_AUTOSCALER
from fmcluster.catalog import eks_versions, names
from fmcluster.catalog.hardware import hardware
from fmcluster.pricing.parts import CostPart
from fmcluster.spec.backend_rules import BackendSpecRules, Report, TagBudget
from fmcluster.spec.models import Queue, Spec
from fmcluster.spec.positions import Path_
from fmcluster.spec.tag_rules import AWS_TAGS_PER_RESOURCE, FMCLUSTER_TAGS

# botocore's EKS model: clusterName "^[0-9A-Za-z][A-Za-z0-9\-_]*", 1 to 100 characters.
EKS_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9\-_]*$")
EKS_CLUSTER_NAME_MAX = 100
# A queue names a node group, a Kueue ClusterQueue and LocalQueue, a Volcano or KAI Queue: Kubernetes object
# names and label values, so an RFC 1123 label ("Object Names and IDs").
KUBERNETES_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
KUBERNETES_NAME_MAX = 63
IAM_ROLE_NAME_MAX = 64
# EKS allows 50 tags per resource (EKS API TagResource); its node instances also carry the tags EC2 Auto Scaling
# and EKS add (eks:cluster-name, eks:nodegroup-name, kubernetes.io/cluster/<name>, aws:autoscaling:groupName).
EKS_INSTANCE_TAGS = 3
# ... and so a spec's own eks:* key would collide with them ("Tagging your Amazon EKS resources": managed node groups
# tag their Auto Scaling group and instances eks:cluster-name and eks:nodegroup-name).
EKS_PREFIX = "eks:"
# What a Slurm cluster has and an EKS cluster does not, and why; each field the spec sets is refused.
NOT_ON_EKS = {
    ("head_node",): "EKS runs the control plane itself: there is no head or login node (reach the cluster with "
                    "`fmcluster kubeconfig NAME`)",
    ("slurm",): "an EKS cluster schedules with kubernetes.scheduler, not Slurm",
    ("network", "head_subnet_id"): "EKS has no head or login node",
    ("network", "ssh", "allowed_cidr"): "EKS nodes take no SSH from outside: reach the cluster through its Kubernetes "
                                        "API (`fmcluster kubeconfig NAME`)",
    ("network", "security_groups"): "every node needs fmcluster's self-referencing group (EFA) and EKS's cluster "
                                    "group (the control plane); put your groups in additional_security_groups",
    ("os",): "EKS managed nodes boot the EKS-optimized Amazon Linux 2023 images (alinux2023) only",
    ("image", "family"): "EKS managed nodes boot the EKS-optimized AL2023 image of their hardware (NVIDIA, Neuron "
                         "or standard)",
    ("storage", "home"): "an EKS cluster shares files through volumes; use storage.lustre, mounted as the "
                         "PersistentVolumeClaim fmcluster makes",
    ("storage", "lustre", "mount"): "pods mount the file system's claim (fsx-lustre) where their own spec says; a "
                                    "mount point is for Slurm nodes",
    ("software",): "Enroot/Pyxis and the Slurm exporters are for Slurm nodes; on EKS, containers are the unit and "
                   "the device plugins fmcluster installs serve GPUs, EFA and Neuron",
    ("bootstrap",): "node scripts are for Slurm nodes; on EKS run the work as a DaemonSet or in the training image",
    ("pcs",): "pcs.size is for the pcs backend",
}
NOT_ON_EKS_QUEUE = {
    "slurm_settings": "an EKS node group has no Slurm partition",
    "job_exclusive": "Kubernetes places pods by their resource requests; a pod asking for every GPU has its node "
                     "alone",
    "compute_resource": "the node group is named after the queue",
    "iam": "every node group uses the cluster's one node role; put the policies in iam.additional_policies",
    "gpu_health_checks": "fmcluster's GPU health checks run as Slurm health checks or PCS deep health checks; EKS "
                         "has neither: write auto_repair (EKS node auto repair and its node monitoring agent)",
}


class EksSpecRules(BackendSpecRules):
    default_os = "alinux2023"
    stock_images = "the EKS-optimized Amazon Linux 2023 images"

    def controller(self, spec: Spec | None) -> CostPart | None:
        if spec is None:
            return None  # status reads the fee from the cluster's own version (eks_versions.control_plane_usd_per_hour)
        version = spec.kubernetes.version
        return CostPart("EKS control plane", eks_versions.control_plane_usd_per_hour(version),
                        f"Kubernetes {version} on {eks_versions.support(version) or 'standard'} support: "
                        f"{eks_versions.PRICING_NOTE}")

    def compute_resource_name(self, queue: Queue) -> str:
        return queue.name

    def repair_note(self, queue: Queue) -> str | None:
        return node_repair.plan_note(queue)

    def burn_in_gate_note(self, queue: Queue) -> str | None:
        if not burn_in_hold.gated(queue):
            return None
        return (f"create holds each new node (taint {burn_in_hold.TAINT_KEY}={burn_in_hold.TAINT_VALUE}) until it "
                "passes, then lets it take jobs; a failed node is repaired as auto_repair says and tested again")

    def system_nodes(self, spec: Spec) -> tuple[str, int] | None:
        return spec.kubernetes.system_instance_type, spec.kubernetes.system_nodes

    def check(self, spec: Spec, error: Report, warn: Report) -> None:
        self._names(spec, error)
        self._version(spec, error, warn)
        self._not_on_eks(spec, error)
        self._node_images(spec, error)
        ultraserver_rules.check(spec, error)
        self._quotas(spec, error)
        self._system_group(spec, error)
        self._scaling(spec, error)
        self._reserved_tags(spec, error)
        self._service_quotas(spec, error)

    def tag_budget(self) -> TagBudget:
        own = FMCLUSTER_TAGS
        return TagBudget(own, AWS_TAGS_PER_RESOURCE - len(own) - EKS_INSTANCE_TAGS - 1,
                         f"AWS allows {AWS_TAGS_PER_RESOURCE} tags per resource, fmcluster adds {len(own)} of its "
                         f"own and EKS {EKS_INSTANCE_TAGS + 1} more to every node")

    def build_advice(self, family: str, source: str) -> str:
        return "EKS managed nodes boot the EKS-optimized AL2023 images; remove image"

    def nodes_without_internet(self, path: Path_, message: str, remedy: str, error: Report, warn: Report) -> None:
        error(path, f"{message}, the EKS API or the container registries to join the cluster: {remedy}")

    # -- the rules only EKS has ---------------------------------------------------------------------------
    def _names(self, spec: Spec, error: Report) -> None:
        if not EKS_CLUSTER_NAME.match(spec.name):
            error(("name",), f"'{spec.name}': EKS cluster names start with a letter or digit and hold only letters, "
                             "digits, hyphens and underscores")
        purposes = ["cluster", "nodes"]
        if any(autoscaler_install.is_elastic(queue) for queue in spec.queues):
            purposes.append(autoscaler_iam.ROLE_PURPOSE)  # the Cluster Autoscaler's role
        longest_name = max((role_name(spec.name, spec.region, purpose) for purpose in purposes), key=len)
        longest = len(longest_name)
        if longest > IAM_ROLE_NAME_MAX:
            most = len(spec.name) - (longest - IAM_ROLE_NAME_MAX)
            error(("name",), f"'{spec.name}' is {len(spec.name)} characters; its IAM role names "
                             f"({longest_name}) pass IAM's {IAM_ROLE_NAME_MAX}: "
                             f"in {spec.region} use at most {most}")
        for index, queue in enumerate(spec.queues):
            if len(queue.name) > KUBERNETES_NAME_MAX or not KUBERNETES_NAME.match(queue.name):
                error(("queues", index, "name"), f"'{queue.name}': on eks a queue names its node group and the "
                      "scheduler's queue objects, so it must be a Kubernetes name: lowercase letters, digits and "
                      f"hyphens, starting and ending with a letter or digit, at most {KUBERNETES_NAME_MAX}")

    def _version(self, spec: Spec, error: Report, warn: Report) -> None:
        version = spec.kubernetes.version
        support = eks_versions.support(version)
        offered = ", ".join(v for v in eks_versions.offered() if eks_versions.usable(v))
        if not eks_versions.usable(version):
            error(("kubernetes", "version"), f"EKS does not offer Kubernetes {version} with the EKS-optimized AL2023 "
                  f"node images fmcluster's nodes boot: it offers {offered} (the newest, "
                  f"{eks_versions.DEFAULT_VERSION}, is the default)")
        elif support == "extended":
            warn(("kubernetes", "version"), f"Kubernetes {version} is on EKS extended support: the control plane "
                 f"costs ${eks_versions.CONTROL_PLANE_USD_PER_HOUR['extended']:.2f}/h instead of "
                 f"${eks_versions.CONTROL_PLANE_USD_PER_HOUR['standard']:.2f}/h, until EKS upgrades it itself "
                 f"at the end of extended support; {eks_versions.DEFAULT_VERSION} is on standard support")

    def _not_on_eks(self, spec: Spec, error: Report) -> None:
        for path, why in NOT_ON_EKS.items():
            if _set(spec, path):
                error(path, f"not supported on eks: {why}")
        for index, queue in enumerate(spec.queues):
            for name, why in NOT_ON_EKS_QUEUE.items():
                if name in queue.model_fields_set:
                    error(("queues", index, name), f"not supported on eks: {why}")

    def _node_images(self, spec: Spec, error: Report) -> None:
        """Every node boots the EKS-optimized AL2023 image of its hardware; an accelerated type needs the variant
        AWS lists it for, on its own architecture (p6e-gb200's Grace CPUs: the ARM NVIDIA image)."""
        for index, queue in enumerate(spec.queues):
            image = node_image(queue)
            if not image.serves(queue.instance_type):
                families = ", ".join(ACCELERATED_FAMILIES[(image.architecture, image.variant)])
                error(("queues", index, "instance_type"),
                      f"{queue.instance_type} needs {image.describe()}, and AWS publishes it only for {families} "
                      f"({GUIDE_PAGE}): use a type it lists, or the pcs or parallelcluster backend")
            if "image" in spec.model_fields_set and spec.image is not None and spec.image.ami is not None:
                error(("image", "ami"), f"not supported on eks: queue {queue.name} ({queue.instance_type}, "
                      f"{image.architecture}) boots {image.describe()}, which EKS picks by the node group's amiType; "
                      "a custom AMI needs its own node bootstrap, which fmcluster does not write. Remove image")
                return

    def _quotas(self, spec: Spec, error: Report) -> None:
        """Each queue's pods ask for what its nodes offer (cpu, memory, GPUs, EFA, Neuron devices); the scheduler's
        queue must cover all of it, or Kueue admits none of them (a workload asking for a resource its ClusterQueue
        does not cover stays pending, Kueue "Cluster Queue" concepts) and KAI lets them past every quota."""
        scheduler = spec.kubernetes.scheduler
        for index, queue in enumerate(spec.queues):
            if names.instance_type_problem(queue.instance_type):
                continue  # refused as an unknown type already
            try:
                node = quotas.largest_node(queue)  # every type's facts must be known
            except LookupError as exc:
                error(("queues", index, "instance_type"), f"{exc}: its {scheduler} queue cannot cover the resources "
                      "its pods ask for; use a type in fmcluster's catalog, or run with an AWS endpoint")
                continue
            if scheduler == "kai" and node.neuron_devices:
                error(("queues", index, "instance_type"),
                      f"{queue.instance_type}'s pods ask for {quotas.NEURON}, and a KAI Queue's quota covers only "
                      "cpu, gpu and memory (the KAI Scheduler's Queue CRD), so they would run outside every quota: "
                      "use kubernetes.scheduler kueue or volcano for Trainium")

    def _system_group(self, spec: Spec, error: Report) -> None:
        """The ``system`` node group: a type AWS sells On-Demand, without accelerators (cluster software needs none,
        and a GPU type there would cost a training node's price for a controller's work), and a name of its own."""
        name = spec.kubernetes.system_instance_type
        path = ("kubernetes", "system_instance_type")
        for index, queue in enumerate(spec.queues):
            if queue.name == system_nodes.NODEGROUP_NAME:
                error(("queues", index, "name"), f"'{queue.name}' is the node group where cluster software runs "
                      "(kubernetes.system_nodes): on eks a queue names its node group, so pick another name")
        problem = names.instance_type_problem(name)
        if problem:
            error(path, problem)
            return
        facts = hardware(name)
        if facts.accelerated:
            what = f"{facts.accelerators} x {facts.accelerator_model}" if facts.accelerators else \
                "accelerators (FPGAs, inference or media accelerators)"
            error(path, f"{name} carries {what}: the system node group runs controllers that use no accelerator, "
                  "and training pods never run there; use a general-purpose type such as m7i.xlarge (the default)")
        elif facts.usage_classes and "on-demand" not in facts.usage_classes:
            error(path, f"EC2 does not sell {name} On-Demand (it sells it as {', '.join(facts.usage_classes)}), and "
                  "the system node group must outlive any Capacity Block or Spot reclaim: use a type sold On-Demand "
                  "such as m7i.xlarge (the default)")

    def _scaling(self, spec: Spec, error: Report) -> None:
        """An elastic queue gets the Cluster Autoscaler, whose release must match the cluster's Kubernetes minor
        (its README: use the release "that corresponds to the minor version of Kubernetes" the cluster runs);
        fmcluster ships one per minor it has a render for."""
        elastic = [(index, q) for index, q in enumerate(spec.queues) if autoscaler_install.is_elastic(q)]
        version = spec.kubernetes.version
        if not elastic or autoscaler_install.release_for(version) is not None \
                or eks_versions.support(version) is None:  # an unknown version is refused already
            return
        index, queue = elastic[0]
        shipped = ", ".join(sorted(CLUSTER_AUTOSCALER))
        error(("queues", index, "nodes"), f"queue {queue.name} is elastic ({queue.nodes.min} to {queue.nodes.max} "
              f"nodes), which on eks needs the Cluster Autoscaler release of the cluster's Kubernetes minor, and "
              f"fmcluster ships it for Kubernetes {shipped}, not {version}: set kubernetes.version to one of them, "
              f"or give the queue a fixed node count")

    def _service_quotas(self, spec: Spec, error: Report) -> None:
        """EKS's default quotas: every queue is one managed node group and the system group one more; each group's
        maxSize is its queue's node count (or range max)."""
        groups = len(spec.queues) + 1
        if groups > limits.MANAGED_NODE_GROUPS_PER_CLUSTER:
            first_extra = limits.MANAGED_NODE_GROUPS_PER_CLUSTER - 1
            error(("queues", first_extra), f"{len(spec.queues)} queues make {groups} managed node groups (one per "
                  f"queue plus the system group); EKS's default quota is {limits.MANAGED_NODE_GROUPS_PER_CLUSTER} "
                  f"per cluster ({limits.GUIDE_PAGE}), so at most {limits.MANAGED_NODE_GROUPS_PER_CLUSTER - 1} queues")
        for index, queue in enumerate(spec.queues):
            most = limits.most_nodes(queue)
            if most > limits.NODES_PER_MANAGED_NODE_GROUP:
                path: Path_ = ("queues", index, "nodes") if isinstance(queue.nodes, int) else \
                    ("queues", index, "nodes", "max")
                error(path, f"{most} nodes in one managed node group: EKS's default quota is "
                      f"{limits.NODES_PER_MANAGED_NODE_GROUP} nodes per managed node group ({limits.GUIDE_PAGE}); "
                      f"split the queue into queues of at most {limits.NODES_PER_MANAGED_NODE_GROUP} (this offline "
                      "check holds a spec to the default; preflight reads the account's own value)")

    def _reserved_tags(self, spec: Spec, error: Report) -> None:
        for key in spec.tags:
            if key.startswith(EKS_PREFIX):
                error(("tags", key), f"tag keys starting with '{EKS_PREFIX}' are reserved by EKS: its managed node "
                      "groups put eks:cluster-name and eks:nodegroup-name on every node")


def _set(spec: Spec, path: tuple[str, ...]) -> bool:
    """Whether the spec's author wrote the field at ``path`` (a default does not count)."""
    model = spec
    for name in path[:-1]:
        if name not in model.model_fields_set:
            return False
        model = getattr(model, name)
    return path[-1] in model.model_fields_set


RULES = EksSpecRules()
