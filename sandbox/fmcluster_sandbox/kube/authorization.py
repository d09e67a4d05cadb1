"""What an EKS access policy lets a principal do ("Associate access policies with access entries", "Review access
policy permissions" in the EKS user guide).

The policies of a principal's access entry come from the EKS emulator in ListAssociatedAccessPolicies form
(``policyArn`` and ``accessScope`` ``{"type": "cluster" | "namespace", "namespaces": [...]}``). Each policy is
modelled on the Kubernetes role it corresponds to ("User-facing roles" in "Using RBAC Authorization"):

* ``AmazonEKSClusterAdminPolicy``: cluster-admin, every verb on every resource.
* ``AmazonEKSAdminViewPolicy``: get, list, watch on every resource, Secrets included.
* ``AmazonEKSAdminPolicy``: admin, every verb on namespaced built-in resources.
* ``AmazonEKSEditPolicy``: edit, as admin without Roles and RoleBindings.
* ``AmazonEKSViewPolicy``: view, get/list/watch on namespaced built-in resources except Secrets, Roles and
  RoleBindings.

A namespace-scoped association applies only inside its namespaces (a trailing ``*`` matches a prefix) and never to
cluster-scoped resources or lists across all namespaces. The admin/edit/view models grant nothing on cluster-scoped
resources or custom resources (no aggregated ClusterRoles are emulated). Discovery and ``/version`` are open to every
authenticated user (``system:discovery``, ``system:public-info-viewer``).
"""

from __future__ import annotations

from typing import Any

from fmcluster_sandbox.kube.resources import ResourceType
from fmcluster_sandbox.kube.status import KubeError, forbidden

READ = {"get", "list", "watch"}
POLICY_PREFIX = "arn:aws:eks::aws:cluster-access-policy/"
RBAC = {"roles", "rolebindings"}


def _allows(policy: str, verb: str, rtype: ResourceType) -> bool:
    builtin_namespaced = rtype.namespaced and rtype.crd is None
    if policy == "AmazonEKSClusterAdminPolicy":
        return True
    if policy == "AmazonEKSAdminViewPolicy":
        return verb in READ
    if policy == "AmazonEKSAdminPolicy":
        return builtin_namespaced
    if policy == "AmazonEKSEditPolicy":
        return builtin_namespaced and rtype.plural not in RBAC
    if policy == "AmazonEKSViewPolicy":
        return builtin_namespaced and verb in READ and rtype.plural not in RBAC | {"secrets"}
    return False


def _in_scope(scope: dict[str, Any], namespace: str | None) -> bool:
    if (scope or {}).get("type", "cluster") == "cluster":
        return True
    if namespace is None:
        return False
    return any(namespace == pattern or (pattern.endswith("*") and namespace.startswith(pattern[:-1]))
               for pattern in scope.get("namespaces") or [])


def check(policies: list[dict[str, Any]], username: str, verb: str, rtype: ResourceType, namespace: str | None,
          name: str | None) -> None:
    """Raise 403 Forbidden unless one associated policy allows ``verb`` on the resource in that namespace."""
    for association in policies:
        policy = str(association.get("policyArn", "")).removeprefix(POLICY_PREFIX)
        if _allows(policy, verb, rtype) and _in_scope(association.get("accessScope") or {}, namespace):
            return
    raise denial(username, verb, rtype, namespace, name)


def denial(username: str, verb: str, rtype: ResourceType, namespace: str | None, name: str | None) -> KubeError:
    """The RBAC authorizer's message: ``<resource> "<name>" is forbidden: User "<u>" cannot <verb> resource …``."""
    qualified = f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural
    subject = f'{qualified} "{name}"' if name else qualified
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return forbidden(f'{subject} is forbidden: User "{username}" cannot {verb} resource "{rtype.plural}" in API '
                     f'group "{rtype.group}" {where}', verb, rtype.plural, name or "", rtype.group)
