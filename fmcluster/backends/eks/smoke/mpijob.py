"""The MPIJob that ``fmcluster smoke`` submits to an EKS cluster: decisions here, layout in
``templates/eks/smoke-mpijob.yaml.j2`` (the job) and ``templates/eks/smoke-launcher.sh.j2`` (what its launcher runs).

One worker per node of the queue, each asking for every GPU and EFA device of its node (so the scheduler must give
it a whole node), labelled or annotated as the cluster's scheduler wants its jobs:

- Kueue: the MPIJob carries ``kueue.x-k8s.io/queue-name`` naming the queue's LocalQueue (fmcluster makes one per
  spec queue, of the queue's name, in namespace ``default``: backends/eks/manifests.py); Kueue's MPIJob integration
  (``kubeflow.org/mpijob``, on by default) suspends and admits it.
- Volcano: pods with ``schedulerName: volcano`` and the pod annotation ``scheduling.volcano.sh/queue-name``
  (volcano-sh/volcano ``QueueNameAnnotationKey`` = ``scheduling.volcano.sh/queue-name``), plus
  ``runPolicy.schedulingPolicy.queue``, the MPI Operator's own field for the queue of the PodGroup it makes when
  its Volcano gang scheduling is on.
- KAI: pods with ``schedulerName: kai-scheduler`` and the label ``kai.scheduler/queue`` (the chart's
  ``podgrouper.queueLabelKey`` at v0.13.0), on the MPIJob too, where KAI's pod grouper reads it from the top owner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fmcluster.backends.eks.nodes import quotas
from fmcluster.backends.eks.software import device_plugins, dra_driver, manifests
from fmcluster.catalog.hardware import hardware
from fmcluster.errors import UsageError
from fmcluster.render.templates import render_text, render_yaml
from fmcluster.spec.models import Queue, Spec

API_VERSION = "kubeflow.org/v2beta1"
KIND = "MPIJob"
# The MPI Operator's labels on the pods it makes (kubeflow/common constants, used by mpi-operator v2).
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
SMOKE_LABEL = "fmcluster.io/smoke"
# AWS's public nccl-tests image: CUDA 12.8.1, EFA installer 1.43.2 (libfabric, Open MPI), the AWS OFI NCCL plugin
# 1.16.3, NCCL 2.27.7, nccl-tests 2.16.9; the tag aws-samples/awsome-distributed-training's test cases build on
# (docs/smoke-json.md says where). Binaries where its Dockerfile (micro-benchmarks/nccl-tests) puts them.
DEFAULT_IMAGE = ("public.ecr.aws/hpc-cloud/nccl-tests:"
                 "cuda12.8.1-efa1.43.2-ofiv1.16.3-ncclv2.27.7-1-testsv2.16.9")
MPIRUN = "/opt/amazon/openmpi/bin/mpirun"
ALL_REDUCE = "/opt/nccl-tests/build/all_reduce_perf"
# What AWS's EKS EFA guidance and its nccl-tests MPIJob (aws-samples/awsome-distributed-training
# micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml) give each worker besides its devices: libfabric's EFA
# provider wants 2 MiB huge pages for its buffers, and a memory request to match.
HUGEPAGES_2MI = "5120Mi"
WORKER_MEMORY = "32000Mi"
SCHEDULER_NAMES = {"volcano": "volcano", "kai": "kai-scheduler"}
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
# The kubelet's well-known label naming its Node ("Well-Known Labels, Annotations and Taints").
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True)
class SmokeJob:
    """What the smoke MPIJob is: where it runs and what each worker asks for."""

    name: str
    namespace: str
    queue: Queue
    nodes: int
    gpus: int
    efa: int
    image: str
    # On an UltraServer queue: the ComputeDomain the job's workers share (NVIDIA's DRA driver makes the
    # ResourceClaimTemplate it names, whose claim gives each worker an IMEX channel); None elsewhere.
    compute_domain: str | None = None

    @property
    def channel_claim_template(self) -> str:
        return f"{self.compute_domain}-channel"

    @property
    def launcher_selector(self) -> str:
        return f"{JOB_NAME_LABEL}={self.name},{JOB_ROLE_LABEL}=launcher"

    @property
    def worker_selector(self) -> str:
        return f"{JOB_NAME_LABEL}={self.name},{JOB_ROLE_LABEL}=worker"


def job_name(queue: Queue) -> str:
    """One smoke job per queue at a time, under a name a rerun finds (and replaces) after a crash."""
    return f"fmcluster-smoke-{queue.name}"


def default_queue(spec: Spec) -> str | None:
    """The queue ``smoke`` tests when none is named: the first with NVIDIA GPUs (nccl-tests needs them)."""
    return next((queue.name for queue in spec.queues if hardware(queue.instance_type).has_gpus), None)


def smoke_job(spec: Spec, queue: Queue, nodes: int, image: str | None) -> SmokeJob:
    """The job for ``nodes`` nodes of ``queue``; UsageError when nccl-tests cannot run there."""
    facts = hardware(queue.instance_type)
    if not facts.has_gpus:
        raise UsageError(f"queue {queue.name} ({queue.instance_type}) has no NVIDIA GPUs: the EKS smoke test runs "
                         "nccl-tests, which needs them; name a GPU queue with --queue")
    node = quotas.node_resources(queue)
    name = job_name(queue)
    return SmokeJob(name, manifests.WORKLOAD_NAMESPACE, queue, nodes, node.nvidia_gpus, node.efa,
                    image or DEFAULT_IMAGE, compute_domain=f"{name}-imex" if dra_driver.serves(queue) else None)


def launcher_script(job: SmokeJob) -> str:
    return render_text("eks/smoke-launcher.sh.j2", nodes=job.nodes, ranks=job.gpus, mpirun=MPIRUN,
                       all_reduce=ALL_REDUCE, efa=job.efa > 0)


def manifest(spec: Spec, job: SmokeJob, timeout_s: int, script: str | None = None,
             hosts: tuple[str, ...] | None = None, purpose_label: str = SMOKE_LABEL,
             clean_pod_policy: str = "Running", tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The MPIJob, labelled for ``spec``'s scheduler; ``timeout_s`` also bounds it on the cluster
    (``runPolicy.activeDeadlineSeconds``), so a job whose deletion never came still ends. ``script``: what the
    launcher runs (default: the smoke test's); ``hosts``: the nodes its workers must land on (a required node
    affinity on ``kubernetes.io/hostname``), for a job that checks given nodes; ``purpose_label``: the label that
    says which fmcluster command made it; ``clean_pod_policy``: ``None`` keeps the workers until the job is deleted,
    for a caller that reads which node each ran on after the job ended; ``tolerations``: on the launcher's and the
    workers' pods (burn-in's jobs run on nodes the gate still holds)."""
    scheduler = spec.kubernetes.scheduler
    # the queue too: a rerun finds its own queue's leftovers by it, never another queue's running job
    job_labels = {**manifests.ownership_labels(spec), purpose_label: "true", device_plugins.QUEUE_LABEL: job.queue.name}
    pod_labels = {purpose_label: "true"}
    pod_annotations: dict[str, str] = {}
    if scheduler == "kueue":
        job_labels[KUEUE_QUEUE_LABEL] = job.queue.name
    elif scheduler == "volcano":
        pod_annotations[VOLCANO_QUEUE_ANNOTATION] = job.queue.name
    elif scheduler == "kai":
        job_labels[KAI_QUEUE_LABEL] = job.queue.name
        pod_labels[KAI_QUEUE_LABEL] = job.queue.name
    worker_resources: dict[str, Any] = {quotas.NVIDIA_GPU: job.gpus, "memory": WORKER_MEMORY}
    if job.efa:
        worker_resources[quotas.EFA] = job.efa
    if job.efa and scheduler != "kueue":
        # The pages are libfabric's EFA provider's, reserved by the EFA installer on nodes with EFA attached: a node
        # without EFA has none, and a worker asking for them there would never be placed. Kueue admits a workload
        # only when its ClusterQueue covers every resource it requests, and fmcluster's ClusterQueues cover what the
        # nodes' device plugins count (quotas.covered_resources), not huge pages: there libfabric runs on ordinary
        # pages.
        worker_resources["hugepages-2Mi"] = HUGEPAGES_2MI
    _, document = render_yaml(
        "eks/smoke-mpijob.yaml.j2", api_version=API_VERSION, kind=KIND, name=job.name, namespace=job.namespace,
        labels=job_labels, pod_labels=pod_labels, pod_annotations=pod_annotations,
        scheduler_name=SCHEDULER_NAMES.get(scheduler), volcano_queue=job.queue.name if scheduler == "volcano"
        else None, deadline_s=max(1, int(timeout_s)), slots=job.gpus, workers=job.nodes, image=job.image,
        node_selector={device_plugins.QUEUE_LABEL: job.queue.name}, resources=worker_resources,
        script=script if script is not None else launcher_script(job), hosts=list(hosts) if hosts else None,
        hostname_label=HOSTNAME_LABEL, clean_pod_policy=clean_pod_policy, tolerations=tolerations or [],
        channel_claim_template=job.channel_claim_template if job.compute_domain else None, channel_claim=CHANNEL_CLAIM)
    return document


CHANNEL_CLAIM = "imex-channel"
COMPUTE_DOMAIN_API_VERSION = "resource.nvidia.com/v1beta1"
COMPUTE_DOMAIN_KIND = "ComputeDomain"


def compute_domain(spec: Spec, job: SmokeJob) -> dict[str, Any]:
    """The job's own ComputeDomain ("a ComputeDomain per workload job", AWS's P6e-GB200 page), numNodes 0 (the
    driver's DNS-named IMEX daemons: no count to wait for), one channel per worker."""
    assert job.compute_domain is not None
    _, document = render_yaml("eks/smoke-computedomain.yaml.j2", api_version=COMPUTE_DOMAIN_API_VERSION,
                              kind=COMPUTE_DOMAIN_KIND, name=job.compute_domain, namespace=job.namespace,
                              labels={**manifests.ownership_labels(spec), SMOKE_LABEL: "true"},
                              claim_template=job.channel_claim_template)
    return document
