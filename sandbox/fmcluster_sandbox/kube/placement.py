"""Whether a pod template could be placed on a Node: the one rule behind device-plugin resources (:mod:`.nodes`) and
workload readiness (:mod:`.workloads`).

A pod fits a node when ("Assigning Pods to Nodes", "Taints and Tolerations", "Resource Management for Pods and
Containers"):

* every ``nodeSelector`` label has the node's value;
* ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``: one of its ``nodeSelectorTerms``
  matches (a term: all its ``matchExpressions`` — In, NotIn, Exists, DoesNotExist, Gt, Lt — and ``matchFields``
  on ``metadata.name``; an empty term matches nothing);
* every taint with effect ``NoSchedule`` or ``NoExecute`` is tolerated (``PreferNoSchedule`` never keeps a pod
  off); DaemonSet pods tolerate the node-condition taints the DaemonSet controller adds tolerations for;
* the pod's requests fit the node's allocatable: per resource, the larger of the sum over ``containers`` and the
  largest ``initContainers`` request (a container's limit stands for its request when the request is absent);
  an extended resource (``nvidia.com/gpu`` …) the node does not advertise does not fit.

A pod that claims devices through Dynamic Resource Allocation (``resourceClaims``, an UltraServer job's IMEX channel)
fits nowhere: the sandbox runs no DRA driver and allocates no ResourceClaim, and the scheduler places such a pod only
once its claims are allocated ("Dynamic Resource Allocation"), so it stays Pending here.

Not emulated: other pods' usage of the node (each workload is placed alone), pod (anti-)affinity, topology spread
constraints, ``nodeName``, preferred affinity (a preference never keeps a pod off), pod overhead.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

# Taints the DaemonSet controller tolerates on its own ("DaemonSet", "Taints and tolerations").
DAEMONSET_TOLERATED = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                       "node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure",
                       "node.kubernetes.io/pid-pressure", "node.kubernetes.io/unschedulable",
                       "node.kubernetes.io/network-unavailable"}
_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_DECIMAL = {"n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000), "": 1, "k": 10 ** 3,
            "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}


def quantity(value: Any) -> Fraction:
    """A resource quantity ("Resource Management for Pods and Containers": ``500m``, ``512Mi``, ``1e3``, ``2``)."""
    text = str(value).strip()
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return Fraction(text[:-2]) * factor
    if text[-1:] in _DECIMAL and text[-1:] and not text[-1:].isdigit():
        return Fraction(text[:-1]) * _DECIMAL[text[-1]]
    if "e" in text.lower():
        mantissa, _, exponent = text.lower().partition("e")
        return Fraction(mantissa) * Fraction(10) ** int(exponent)
    return Fraction(text)


def pod_requests(pod: dict[str, Any]) -> dict[str, Fraction]:
    def of(container: dict[str, Any]) -> dict[str, Fraction]:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {name: quantity(v) for name, v in merged.items()}

    total: dict[str, Fraction] = {}
    for container in pod.get("containers") or []:
        for name, amount in of(container).items():
            total[name] = total.get(name, Fraction(0)) + amount
    for container in pod.get("initContainers") or []:
        for name, amount in of(container).items():
            total[name] = max(total.get(name, Fraction(0)), amount)
    return total


def fits(pod: dict[str, Any], node: dict[str, Any], daemon: bool = False) -> bool:
    """``pod``: a pod template's spec; ``node``: ``{"name", "labels", "taints"}`` and, to check requests,
    ``allocatable`` (a Node's ``status.allocatable``)."""
    if pod.get("resourceClaims"):
        return False  # no DRA allocation here (module docstring)
    labels = node.get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod.get("nodeSelector") or {}).items()):
        return False
    required = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if terms is not None and not any(_term_matches(t, labels, node.get("name", "")) for t in terms):
        return False
    tolerations = pod.get("tolerations") or []
    for taint in node.get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if daemon and taint.get("key") in DAEMONSET_TOLERATED:
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return False
    allocatable = node.get("allocatable")
    if allocatable is not None:
        for name, amount in pod_requests(pod).items():
            if amount > 0 and (name not in allocatable or quantity(allocatable[name]) < amount):
                return False
    return True


def _term_matches(term: dict[str, Any], labels: dict[str, str], name: str) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no objects
    return all(_expression(e, labels) for e in expressions) and all(
        e.get("key") == "metadata.name" and _expression(e, {"metadata.name": name}) for e in fields)


def _expression(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", "")
