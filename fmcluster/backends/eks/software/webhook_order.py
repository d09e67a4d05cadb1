"""Which objects of a plan an admission webhook of the same plan intercepts, and what must exist while it does.

A webhook configuration's ``rules`` name the groups, versions and resources whose requests go to it, its
``namespaceSelector`` and ``objectSelector`` narrow them, and its ``clientConfig.service`` says where the API server
sends them. With ``failurePolicy: Fail`` (the default of admissionregistration.k8s.io/v1) a request the API server
cannot deliver, because the Service is gone or no ready pod is behind it, is refused ("Dynamic Admission Control",
https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/): Volcano's
``validatequeue.volcano.sh`` refuses the DELETE of a Queue once ``volcano-admission-service`` is deleted.

So an object a webhook intercepts is ordered after the webhook's configuration, its Service and the Deployments
behind that Service: ``create`` makes the server before what it guards, and ``destroy``, the reverse walk, deletes
what it guards before the server. Everything here is read from the release's own webhook configurations; nothing
is listed per scheduler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fmcluster.backends.eks.software.scheduler_install import WEBHOOK_KINDS, webhook_servers

if TYPE_CHECKING:
    from fmcluster.backends.eks.kubernetes.client import KubeObject

# The API server labels every Namespace with its own name (KEP-2161, "APIServer defaulted labels for all
# Namespaces", GA in Kubernetes 1.22): what the releases' namespaceSelectors match on.
NAME_LABEL = "kubernetes.io/metadata.name"
# Never sent to webhooks, so that a broken webhook can always be removed ("Dynamic Admission Control").
EXEMPT_KINDS = frozenset({*WEBHOOK_KINDS, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                          "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"})


def plural(kind: str) -> str:
    """A built-in kind's resource name, as Kubernetes derives it (apimachinery ``meta.UnsafeGuessKindToResource``:
    lower case; ``…s`` → ``…ses``, ``…y`` → ``…ies``, else ``…s``)."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


def _selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist); empty matches all."""
    selector = selector or {}
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if ((operator == "In" and labels.get(key) not in values) or (operator == "NotIn" and present
                                                                      and labels[key] in values)
                or (operator == "Exists" and not present) or (operator == "DoesNotExist" and present)):
            return False
    return True


def _rule_matches(rule: dict[str, Any], group: str, version: str, resource: str, namespaced: bool,
                  equivalent: bool) -> bool:
    """Whether a webhook rule names the object's resource, for any operation: the object is created, updated and
    deleted over its life, so a webhook that intercepts any of these must be there while it lives. With
    ``matchPolicy: Equivalent`` (the default) another version of the same group and resource matches too."""
    if not set(rule.get("apiGroups") or []) & {"*", group}:
        return False
    versions = set(rule.get("apiVersions") or [])
    if not (equivalent or versions & {"*", version}):
        return False
    if not any(name.partition("/")[0] in ("*", resource) and not name.partition("/")[2]
               for name in rule.get("resources") or []):
        return False
    scope = rule.get("scope") or "*"
    return scope == "*" or scope == ("Namespaced" if namespaced else "Cluster")


def intercepts(webhook: dict[str, Any], obj: KubeObject, resource: str,
               namespace_labels: dict[str, dict[str, str]]) -> bool:
    """Whether the API server sends requests about ``obj`` (whose resource name is ``resource``) to ``webhook``.
    ``matchConditions`` are not evaluated (they need the request): a webhook with them is taken to intercept, an
    order that costs nothing when it does not."""
    if obj.object_kind in EXEMPT_KINDS:
        return False
    namespaced = obj.namespace is not None
    equivalent = webhook.get("matchPolicy", "Equivalent") == "Equivalent"
    version = obj.api_version.rpartition("/")[2]
    if not any(_rule_matches(rule, obj.group, version, resource, namespaced, equivalent)
               for rule in webhook.get("rules") or []):
        return False
    labels = (obj.manifest.get("metadata") or {}).get("labels") or {}
    if obj.object_kind == "Namespace" and obj.group == "":
        own = {**labels, NAME_LABEL: obj.object_name}
        if not _selector_matches(webhook.get("namespaceSelector"), own):
            return False
    elif namespaced:  # a cluster-scoped object is never skipped by a namespaceSelector
        where = namespace_labels.get(obj.namespace or "", {NAME_LABEL: obj.namespace or ""})
        if not _selector_matches(webhook.get("namespaceSelector"), where):
            return False
    return _selector_matches(webhook.get("objectSelector"), labels)


def guard_edges(objects: list[KubeObject]) -> dict[str, list[str]]:
    """For each object a webhook of ``objects`` intercepts: the resource names of that webhook's configuration, its
    Service and the Deployments behind the Service (those that are in ``objects``). A webhook's own servers are not
    ordered after it (a server cannot wait for itself: the releases keep their own namespace out of their
    selectors for that reason)."""
    names = [(o.manifest["spec"]["group"], o.manifest["spec"]["names"]) for o in objects
             if o.object_kind == "CustomResourceDefinition"]
    resources = {(group, crd_names["kind"]): crd_names["plural"] for group, crd_names in names}
    namespace_labels = {o.object_name: {**((o.manifest.get("metadata") or {}).get("labels") or {}),
                                        NAME_LABEL: o.object_name}
                        for o in objects if o.object_kind == "Namespace" and o.group == ""}
    services = {(o.namespace, o.object_name): o for o in objects if o.object_kind == "Service" and o.group == ""}
    deployments = [o for o in objects if o.object_kind == "Deployment"]
    edges: dict[str, list[str]] = {}
    for config in (o for o in objects if o.object_kind in WEBHOOK_KINDS):
        for webhook in config.manifest.get("webhooks") or []:
            service_ref = (webhook.get("clientConfig") or {}).get("service") or {}
            service = services.get((service_ref.get("namespace"), service_ref.get("name")))
            if service is None:
                continue  # a URL webhook, or a Service fmcluster does not make: nothing of the plan to order
            serving = {id(m) for m in webhook_servers([{"kind": config.object_kind, "webhooks": [webhook]},
                                                       service.manifest, *(d.manifest for d in deployments)])}
            servers = [service] + [d for d in deployments if id(d.manifest) in serving]
            needs = [config.name] + [s.name for s in servers]
            for obj in objects:
                if obj is config or obj in servers:
                    continue
                resource = resources.get((obj.group, obj.object_kind)) or plural(obj.object_kind)
                if intercepts(webhook, obj, resource, namespace_labels):
                    edges.setdefault(obj.name, [])
                    edges[obj.name] += [n for n in needs if n not in edges[obj.name]]
    return edges
