"""EKS access entries: CreateAccessEntry, DescribeAccessEntry, ListAccessEntries, DeleteAccessEntry,
AssociateAccessPolicy, ListAssociatedAccessPolicies.

Rules ("Grant IAM users access to Kubernetes with EKS access entries", "Create access entries",
"Associate access policies with access entries", EKS API reference): the cluster's authentication mode
must be ``API`` or ``API_AND_CONFIG_MAP``; the principal is an IAM role or user that exists in the account
(or the caller itself); one entry per principal; ``STANDARD`` is the default type; access policies are
the ones EKS publishes (``arn:aws:eks::aws:cluster-access-policy/...``), scoped to the cluster or to named
namespaces.

Types, principals and user names (:func:`entry_problem`): ``type`` is one of the seven the CreateAccessEntry
reference lists; the node types (``EC2``, ``EC2_LINUX``, ``EC2_WINDOWS``, ``FARGATE_LINUX``, ``HYBRID_LINUX``)
take only IAM roles ("For nodes ..., the only valid ARN is IAM roles"), no ``kubernetesGroups`` and no
``username``; a custom user name "can't start with ``system:``, ``eks:``, ``aws:``, ``amazon:``, or ``iam:``"
(EKS guide "Set a custom username for EKS access entries").
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from fmcluster_sandbox.eks import catalog
from fmcluster_sandbox.eks.errors import EksError, in_use, invalid, invalid_request, not_found

_ASSUMED = re.compile(r"^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([^/]+)/.+$")
_STS_USER = re.compile(r"^arn:(aws[a-z-]*):sts::(\d{12}):user/(.+)$")
_ROLE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")
ENTRY_TYPES = ("STANDARD", "FARGATE_LINUX", "EC2_LINUX", "EC2_WINDOWS", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX")
NODE_TYPES = ("EC2", "EC2_LINUX", "EC2_WINDOWS", "FARGATE_LINUX", "HYBRID_LINUX")
RESERVED_USERNAME_PREFIXES = ("system:", "eks:", "aws:", "amazon:", "iam:")


def entry_problem(kind: str, principal: str, groups: list[str], username: str | None) -> str | None:
    """What EKS refuses in an access entry's type, principal, groups and user name (None when it takes it)."""
    if kind not in ENTRY_TYPES:
        return f"The access entry type {kind} is not valid: valid types are {', '.join(ENTRY_TYPES)}"
    if kind in NODE_TYPES and not _ROLE.match(principal):
        return f"The principalArn of an access entry of type {kind} must be an IAM role: {principal}"
    if kind != "STANDARD" and (groups or username):
        return f"kubernetesGroups and username cannot be set for an access entry of type {kind}"
    if username and username.startswith(RESERVED_USERNAME_PREFIXES):
        return (f"The username {username} is not valid: a username can't start with "
                f"{', '.join(RESERVED_USERNAME_PREFIXES)}")
    if any(g.startswith("system:") for g in groups):
        return "kubernetesGroups cannot start with system:"
    return None


def normalise_principal(arn: str) -> str:
    """The IAM principal EKS matches for an ARN: an STS assumed-role session is its role
    (``arn:aws:iam::<acct>:role/<name>``); moto's default caller ``arn:aws:sts::<acct>:user/moto`` is
    ``arn:aws:iam::<acct>:user/moto``. Role paths are not kept (EKS matches roles without their path)."""
    found = _ASSUMED.match(arn)
    if found:
        return f"arn:{found.group(1)}:iam::{found.group(2)}:role/{found.group(3)}"
    found = _STS_USER.match(arn)
    if found:
        return f"arn:{found.group(1)}:iam::{found.group(2)}:user/{found.group(3)}"
    role = re.match(r"^(arn:aws[a-z-]*:iam::\d{12}:role/)(?:.*/)?([^/]+)$", arn)
    return role.group(1) + role.group(2) if role else arn


class AccessOperations:
    def _entry_cluster(self, name: str, account: str, region: str) -> Any:
        cluster = self._cluster(name, account, region)
        mode = cluster.spec["accessConfig"]["authenticationMode"]
        if mode not in ("API", "API_AND_CONFIG_MAP"):
            raise invalid_request("The cluster's authentication mode must be set to one of [API, "
                                  "API_AND_CONFIG_MAP] to perform this operation.", clusterName=name)
        return cluster

    def _entry(self, cluster: Any, principal: str) -> Any:
        entry = self._get("access_entry", cluster.account, cluster.region, cluster.name, principal)
        if entry is None:
            raise not_found(f"The specified access entry resource is not found: {principal}",
                            clusterName=cluster.name)
        return entry

    def _principal_exists(self, arn: str, account: str, caller: str) -> bool:
        if normalise_principal(arn) == normalise_principal(caller):
            return True
        iam = self._iam(account)
        if any(r.arn == arn for r in iam.roles.values()):
            return True
        return any(u.arn == arn for u in iam.users.values())

    def _new_entry(self, cluster: Any, principal: str, kind: str, groups: list[str], username: str | None,
                   tags: dict[str, str] | None) -> Any:
        role = re.match(r"^arn:aws[a-z-]*:iam::(\d{12}):role/(?:.*/)?([^/]+)$", principal)
        if username is None:
            username = (f"arn:aws:sts::{role.group(1)}:assumed-role/{role.group(2)}/{{{{SessionName}}}}"
                        if role else principal)
        arn = (f"arn:aws:eks:{cluster.region}:{cluster.account}:access-entry/{cluster.name}/"
               f"{'role' if role else 'user'}/{cluster.account}/{principal.rsplit('/', 1)[-1]}/{uuid.uuid4().hex[:20]}")
        spec = {"kubernetesGroups": list(groups), "username": username, "type": kind}
        return self._new("access_entry", principal, arn, cluster.account, cluster.region, cluster.name, spec, tags,
                         status="ACTIVE")

    def _op_create_access_entry(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._entry_cluster(p["clusterName"], account, region)
        principal = p["principalArn"]
        if not self._principal_exists(principal, account, caller):
            raise invalid(f"The specified principalArn is invalid: invalid principal {principal}",
                          clusterName=cluster.name)
        if self._get("access_entry", account, region, cluster.name, principal) is not None:
            raise in_use(f"The specified access entry resource is already in use on this cluster: {principal}",
                         clusterName=cluster.name)
        kind = p.get("type") or "STANDARD"
        groups = p.get("kubernetesGroups") or []
        problem = entry_problem(kind, principal, groups, p.get("username"))
        if problem:
            raise invalid(problem, clusterName=cluster.name)
        self._check_tags(p.get("tags"))
        entry = self._new_entry(cluster, principal, kind, groups, p.get("username"), p.get("tags"))
        return {"accessEntry": self._entry_view(entry)}

    def _op_describe_access_entry(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        return {"accessEntry": self._entry_view(self._entry(cluster, p["principalArn"]))}

    def _op_list_access_entries(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._entry_cluster(p["clusterName"], account, region)
        entries = self._all("access_entry", account, region, cluster.name)
        if p.get("associatedPolicyArn"):
            entries = [e for e in entries if p["associatedPolicyArn"] in e.policies]
        return self._page([e.name for e in entries], p, "accessEntries")

    def _op_delete_access_entry(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        entry = self._entry(cluster, p["principalArn"])
        self._resources.pop(self._key(entry), None)
        return {}

    def _op_associate_access_policy(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._entry_cluster(p["clusterName"], account, region)
        entry = self._entry(cluster, p["principalArn"])
        policy = p["policyArn"]
        if not policy.startswith(catalog.ACCESS_POLICY_PREFIX) or \
                policy[len(catalog.ACCESS_POLICY_PREFIX):] not in catalog.ACCESS_POLICIES:
            raise not_found(f"The specified policy is not found: {policy}", clusterName=cluster.name)
        if entry.spec["type"] != "STANDARD":
            raise invalid(f"Access policies can only be associated with STANDARD access entries, not "
                          f"{entry.spec['type']}", clusterName=cluster.name)
        scope = dict(p["accessScope"])
        kind = scope.get("type")
        names = list(scope.get("namespaces") or [])
        if kind == "namespace" and not names:
            raise invalid("accessScope of type namespace needs at least one namespace", clusterName=cluster.name)
        if kind == "cluster" and names:
            raise invalid("accessScope of type cluster cannot list namespaces", clusterName=cluster.name)
        if not kind:
            raise invalid("accessScope.type is required", clusterName=cluster.name)
        now = self.wall()
        previous = entry.policies.get(policy)
        entry.policies[policy] = {"policyArn": policy, "accessScope": {"type": kind, "namespaces": names},
                                  "associatedAt": previous["associatedAt"] if previous else now, "modifiedAt": now}
        entry.modified_at = now
        return {"clusterName": cluster.name, "principalArn": entry.name,
                "associatedAccessPolicy": dict(entry.policies[policy])}

    def _op_disassociate_access_policy(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._entry_cluster(p["clusterName"], account, region)
        entry = self._entry(cluster, p["principalArn"])
        if entry.policies.pop(p["policyArn"], None) is None:
            raise not_found(f"The specified policy is not associated: {p['policyArn']}", clusterName=cluster.name)
        return {}

    def _op_list_associated_access_policies(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._entry_cluster(p["clusterName"], account, region)
        entry = self._entry(cluster, p["principalArn"])
        out = self._page([dict(v) for v in entry.policies.values()], p, "associatedAccessPolicies")
        out.update(clusterName=cluster.name, principalArn=entry.name)
        return out

    @staticmethod
    def _entry_view(entry: Any) -> dict[str, Any]:
        return {"clusterName": entry.cluster, "principalArn": entry.name,
                "kubernetesGroups": list(entry.spec["kubernetesGroups"]), "accessEntryArn": entry.arn,
                "createdAt": entry.created_at, "modifiedAt": entry.modified_at, "tags": dict(entry.tags),
                "username": entry.spec["username"], "type": entry.spec["type"]}


__all__ = ["AccessOperations", "EksError", "normalise_principal"]
