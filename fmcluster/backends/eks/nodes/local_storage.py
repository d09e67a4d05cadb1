"""``queues[].scratch_mount`` on EKS: the instance-store NVMe as one RAID 0 array, made by ``nodeadm`` at boot.

Facts, hand-typed from awslabs/amazon-eks-ami (nodeadm's API ``nodeadm/api/v1alpha1/nodeconfig_types.go`` and
``nodeadm/doc/api.md``; the script nodeadm runs, ``templates/shared/runtime/bin/setup-local-disks``):

* ``spec.instance.localStorage.strategy`` is one of ``RAID0 | RAID10 | Mount``; ``mountPath`` "is the path where
  the filesystem will be mounted", default ``/mnt/k8s-disks/``; ``disabledMounts`` may hold ``Containerd`` and
  ``PodLogs``.
* nodeadm runs ``setup-local-disks raid0 --dir <mountPath>``, which builds ``/dev/md/kubernetes`` from every
  ``NVMe_Instance_Storage`` disk, formats it XFS and mounts it at ``<mountPath>/0``; then it bind-mounts
  ``/var/lib/kubelet``, ``/var/lib/containerd`` and ``/var/log/pods`` onto the array. So a pod's ``emptyDir`` and
  its image layers are on the NVMe, and a ``hostPath`` of ``<mountPath>/0`` reaches the array itself.
* The NodeConfig goes in the launch template's user data as a ``application/node.eks.aws`` part of a MIME
  multi-part document (EKS User Guide, "Customize managed nodes with launch templates": for AL2023 without a
  custom AMI, EKS merges its own NodeConfig with the user's, which must be MIME multi-part).
"""

from __future__ import annotations

from fmcluster.render.templates import render_text
from fmcluster.spec import decisions
from fmcluster.spec.models import Queue

ARRAY_DIRECTORY = "0"  # setup-local-disks: array_mount_point="${MNT_DIR}/0"


def scratch_path(queue: Queue) -> str | None:
    """Where pods find the RAID 0 array of the queue's instance store (a hostPath), or None without NVMe."""
    mount = decisions.scratch_mount(queue)
    return None if mount is None else f"{mount.rstrip('/')}/{ARRAY_DIRECTORY}"


def node_config(queue: Queue) -> str | None:
    """The MIME multi-part user data holding nodeadm's NodeConfig, or None for a type without instance store."""
    mount = decisions.scratch_mount(queue)
    if mount is None:
        return None
    return render_text("eks/node_config.mime.j2", mount_path=mount)


def note(queue: Queue) -> str | None:
    """What ``render`` says about reaching the scratch array from a pod."""
    path = scratch_path(queue)
    if path is None:
        return None
    return (f"queue {queue.name}: nodeadm makes a RAID 0 of the instance-store NVMe at {path} (scratch_mount "
            f"{decisions.scratch_mount(queue)}, nodeadm's mountPath, plus /0); pods reach it with a hostPath volume "
            f"(path: {path}, type: Directory), and their emptyDir volumes and image layers are on it already "
            "(nodeadm moves /var/lib/kubelet and /var/lib/containerd there). It is blank after a stop or a "
            "replacement")
