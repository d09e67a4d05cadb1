"""Defaults the API server fills into built-in kinds on every write (kubernetes/kubernetes
``pkg/apis/<group>/v1/defaults.go`` ``SetDefaults_*``, as each kind's API reference documents them), so that what a
client reads back carries the same server-set fields as on a real cluster:

* Pod templates (Deployment, StatefulSet, DaemonSet, Job): ``restartPolicy: Always``, ``dnsPolicy: ClusterFirst``,
  ``schedulerName: default-scheduler``, ``terminationGracePeriodSeconds: 30``, ``securityContext: {}``; each
  container ``terminationMessagePath: /dev/termination-log``, ``terminationMessagePolicy: File``,
  ``imagePullPolicy`` (``Always`` for a ``:latest`` or untagged image, else ``IfNotPresent``), port ``protocol: TCP``.
* StatefulSet: ``replicas: 1``, ``podManagementPolicy: OrderedReady``, ``updateStrategy`` RollingUpdate
  ``partition: 0``, ``revisionHistoryLimit: 10``, from 1.27 ``persistentVolumeClaimRetentionPolicy`` Retain/Retain.
* Validating/MutatingWebhookConfiguration webhooks (admissionregistration/v1): ``failurePolicy: Fail``,
  ``matchPolicy: Equivalent``, ``namespaceSelector``/``objectSelector`` ``{}``, ``timeoutSeconds: 10``, rules
  ``scope: "*"``, service ``port: 443``; mutating ``reinvocationPolicy: Never``.
* Deployment: ``replicas: 1``, ``strategy`` RollingUpdate 25 % / 25 %, ``revisionHistoryLimit: 10``,
  ``progressDeadlineSeconds: 600``. DaemonSet: ``updateStrategy`` RollingUpdate ``maxUnavailable: 1``,
  ``maxSurge: 0``, ``revisionHistoryLimit: 10``.
* Job: ``parallelism``/``completions`` 1 when neither is set, ``backoffLimit: 6``, ``completionMode: NonIndexed``,
  ``suspend: false``, and (from Kubernetes 1.29) ``podReplacementPolicy: TerminatingOrFailed``; on creation the
  generated selector ``batch.kubernetes.io/controller-uid: <uid>`` and the template labels ``controller-uid``,
  ``job-name`` and their ``batch.kubernetes.io/`` forms ("Jobs": "Specifying your own Pod selector").
* StorageClass: ``reclaimPolicy: Delete``, ``volumeBindingMode: Immediate``. PersistentVolume:
  ``persistentVolumeReclaimPolicy: Retain``, ``volumeMode: Filesystem``. PersistentVolumeClaim: ``volumeMode:
  Filesystem``. CSIDriver: ``attachRequired: true``, ``podInfoOnMount: false``, ``requiresRepublish: false``,
  ``storageCapacity: false``, ``fsGroupPolicy: ReadWriteOnceWithFSType``, ``volumeLifecycleModes: [Persistent]``.
  Secret: ``type: Opaque``.

Other defaults (Services, Pods, feature-gated fields) are not filled in.
"""

from __future__ import annotations

from typing import Any

from packaging.version import Version


def _set(obj: dict[str, Any], key: str, value: Any) -> None:
    if obj.get(key) is None:
        obj[key] = value


def _image_pull_policy(image: str) -> str:
    name = image.rsplit("/", 1)[-1]
    if "@" in name:
        return "IfNotPresent"
    tag = name.split(":", 1)[1] if ":" in name else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def pod_template(template: dict[str, Any]) -> None:
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return
    for key, value in (("restartPolicy", "Always"), ("dnsPolicy", "ClusterFirst"),
                       ("schedulerName", "default-scheduler"), ("terminationGracePeriodSeconds", 30),
                       ("securityContext", {})):
        _set(spec, key, value)
    for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        if not isinstance(container, dict):
            continue
        _set(container, "terminationMessagePath", "/dev/termination-log")
        _set(container, "terminationMessagePolicy", "File")
        if isinstance(container.get("image"), str):
            _set(container, "imagePullPolicy", _image_pull_policy(container["image"]))
        _set(container, "resources", {})
        for port in container.get("ports") or []:
            if isinstance(port, dict):
                _set(port, "protocol", "TCP")


def apply(obj: dict[str, Any], kubernetes_version: str, created: bool) -> None:
    """Fill ``obj``'s defaults in place (``created``: the object is being created, so generated fields are set)."""
    kind = obj.get("kind")
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
    workload = kind in ("Deployment", "DaemonSet", "StatefulSet", "Job")
    if workload and spec is not None and isinstance(spec.get("template"), dict):
        pod_template(spec["template"])
    if kind == "Deployment" and spec is not None:
        _set(spec, "replicas", 1)
        _set(spec, "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        _set(spec, "revisionHistoryLimit", 10)
        _set(spec, "progressDeadlineSeconds", 600)
    elif kind == "StatefulSet" and spec is not None:
        _set(spec, "replicas", 1)
        _set(spec, "podManagementPolicy", "OrderedReady")
        _set(spec, "updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        _set(spec, "revisionHistoryLimit", 10)
        if Version(kubernetes_version) >= Version("1.27"):
            _set(spec, "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
    elif kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for webhook in obj.get("webhooks") or []:
            if isinstance(webhook, dict):
                _webhook(webhook, mutating=kind == "MutatingWebhookConfiguration")
    elif kind == "DaemonSet" and spec is not None:
        _set(spec, "updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        _set(spec, "revisionHistoryLimit", 10)
    elif kind == "Job" and spec is not None:
        if spec.get("parallelism") is None and spec.get("completions") is None:
            spec["completions"] = 1
        _set(spec, "parallelism", 1)
        _set(spec, "backoffLimit", 6)
        _set(spec, "completionMode", "NonIndexed")
        _set(spec, "suspend", False)
        version = Version(kubernetes_version)
        if version >= Version("1.29") and spec.get("podFailurePolicy") is None:
            _set(spec, "podReplacementPolicy", "TerminatingOrFailed")
        if created and not spec.get("manualSelector") and not spec.get("selector"):
            _job_selector(obj, spec)
    elif kind == "StorageClass":
        _set(obj, "reclaimPolicy", "Delete")
        _set(obj, "volumeBindingMode", "Immediate")
    elif kind == "PersistentVolume" and spec is not None:
        _set(spec, "persistentVolumeReclaimPolicy", "Retain")
        _set(spec, "volumeMode", "Filesystem")
    elif kind == "PersistentVolumeClaim" and spec is not None:
        _set(spec, "volumeMode", "Filesystem")
    elif kind == "CSIDriver" and spec is not None:
        for key, value in (("attachRequired", True), ("podInfoOnMount", False), ("requiresRepublish", False),
                           ("storageCapacity", False), ("fsGroupPolicy", "ReadWriteOnceWithFSType"),
                           ("volumeLifecycleModes", ["Persistent"])):
            _set(spec, key, value)
    elif kind == "Secret":
        _set(obj, "type", "Opaque")


def _webhook(webhook: dict[str, Any], mutating: bool) -> None:
    _set(webhook, "failurePolicy", "Fail")
    _set(webhook, "matchPolicy", "Equivalent")
    _set(webhook, "namespaceSelector", {})
    _set(webhook, "objectSelector", {})
    _set(webhook, "timeoutSeconds", 10)
    if mutating:
        _set(webhook, "reinvocationPolicy", "Never")
    for rule in webhook.get("rules") or []:
        if isinstance(rule, dict):
            _set(rule, "scope", "*")
    service = (webhook.get("clientConfig") or {}).get("service")
    if isinstance(service, dict):
        _set(service, "port", 443)


def _job_selector(job: dict[str, Any], spec: dict[str, Any]) -> None:
    uid, name = job["metadata"]["uid"], job["metadata"]["name"]
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = spec.setdefault("template", {})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels.update({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                   "controller-uid": uid, "job-name": name})
