"""Dynamic admission: which Validating/MutatingWebhookConfiguration webhooks a write goes to, and what happens
when a webhook's Service cannot answer ("Dynamic Admission Control"; admissionregistration.k8s.io/v1 API
reference).

A webhook is called for a request when:

* one of its ``rules`` matches: ``operations`` (CREATE, UPDATE, DELETE; ``*``), ``apiGroups``, ``apiVersions``
  (``*`` matches any), ``resources`` (``plural``, ``plural/status``, ``*`` = every resource but no subresource,
  ``*/*`` and ``*/status`` forms) and ``scope`` (``*`` default, ``Cluster``, ``Namespaced``). With ``matchPolicy:
  Equivalent`` (the default) a request to another served version of the same group and resource matches too;
* its ``namespaceSelector`` matches the labels of the object's Namespace (for a Namespace: its own labels; other
  cluster-scoped objects are never skipped by it);
* its ``objectSelector`` matches the labels of the object or of the old object;
* its ``matchConditions`` (CEL over ``object``, ``oldObject`` and ``request``) are not false. A condition that
  fails to evaluate (an unsupported function, ``authorizer`` …) does not skip the webhook: the API server then
  applies the failure policy, and the sandbox treats it as matching;
* the object is not itself a webhook configuration or admission policy (the API server never sends those to
  webhooks, so a broken webhook can always be removed).

Calling it: the sandbox runs no webhook code. A webhook whose ``clientConfig.service`` names a Service with a
ready endpoint — a Ready pod behind the Service's selector, i.e. a Deployment, StatefulSet or DaemonSet of that
namespace whose pod template labels match the selector and which has ready replicas (:mod:`.workloads`) — is
taken to allow the request unchanged. Otherwise the call fails, as the API server's dispatcher reports it: with
``failurePolicy: Fail`` (the v1 default) the request is refused with 500 InternalError ``Internal error occurred:
failed calling webhook "<name>": failed to call webhook: Post "https://<svc>.<ns>.svc:<port><path>?timeout=<n>s":
no endpoints available for service "<svc>"`` (``service "<svc>" not found`` when there is no Service); with
``Ignore`` the webhook is skipped. A webhook with a ``clientConfig.url`` is not called (the sandbox reaches no
outside address) and allows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fmcluster_sandbox.kube.status import KubeError

CONFIG_KINDS = (("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
                ("admissionregistration.k8s.io", "validatingwebhookconfigurations"))
# Never sent to webhooks ("Dynamic Admission Control": webhooks are not called for these).
EXEMPT = {("admissionregistration.k8s.io", p) for p in (
    "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "validatingadmissionpolicies",
    "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings")}


class AdmissionRequest:
    def __init__(self, operation: str, group: str, version: str, plural: str, subresource: str | None,
                 namespaced: bool, namespace: str | None, name: str, obj: dict[str, Any] | None,
                 old: dict[str, Any] | None, kind: str, username: str, dry_run: bool):
        self.operation, self.group, self.version, self.plural = operation, group, version, plural
        self.subresource, self.namespaced, self.namespace, self.name = subresource, namespaced, namespace, name
        self.obj, self.old, self.kind, self.username, self.dry_run = obj, old, kind, username, dry_run


def _selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist); empty or
    absent matches everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _resource_matches(patterns: list[str], plural: str, sub: str | None) -> bool:
    for pattern in patterns:
        res, _, res_sub = pattern.partition("/")
        if sub is None and not res_sub and res in ("*", plural):
            return True
        if sub is not None and res_sub in ("*", sub) and res in ("*", plural):
            return True
    return False


def _rule_matches(rule: dict[str, Any], req: AdmissionRequest, equivalent_versions: set[str]) -> bool:
    if not set(rule.get("operations") or []) & {"*", req.operation}:
        return False
    if not set(rule.get("apiGroups") or []) & {"*", req.group}:
        return False
    versions = set(rule.get("apiVersions") or [])
    if "*" not in versions and req.version not in versions and not versions & equivalent_versions:
        return False
    if not _resource_matches(list(rule.get("resources") or []), req.plural, req.subresource):
        return False
    scope = rule.get("scope") or "*"
    return scope == "*" or scope == ("Namespaced" if req.namespaced else "Cluster")


def _match_conditions(webhook: dict[str, Any], req: AdmissionRequest) -> bool:
    conditions = webhook.get("matchConditions") or []
    if not conditions:
        return True
    import celpy

    request = {"operation": req.operation, "name": req.name, "namespace": req.namespace or "",
               "kind": {"group": req.group, "version": req.version, "kind": req.kind},
               "resource": {"group": req.group, "version": req.version, "resource": req.plural},
               "subResource": req.subresource or "", "userInfo": {"username": req.username},
               "dryRun": req.dry_run}
    activation = {"object": celpy.json_to_cel(req.obj), "oldObject": celpy.json_to_cel(req.old),
                  "request": celpy.json_to_cel(request)}
    for condition in conditions:
        try:
            env = celpy.Environment()
            result = env.program(env.compile(str(condition.get("expression", "")))).evaluate(activation)
            if isinstance(result, Exception):
                raise result
        except Exception:  # noqa: BLE001 - an evaluation error: the failure policy decides (see module doc)
            continue
        if isinstance(result, celpy.celtypes.BoolType) and not bool(result):
            return False
    return True


def matching(configs: list[dict[str, Any]], req: AdmissionRequest, namespace_labels: dict[str, str] | None,
             equivalent_versions: set[str]) -> list[dict[str, Any]]:
    """The webhooks of ``configs`` the request goes to, in order."""
    if (req.group, req.plural) in EXEMPT:
        return []
    out = []
    for config in configs:
        for webhook in config.get("webhooks") or []:
            versions = equivalent_versions if webhook.get("matchPolicy", "Equivalent") == "Equivalent" else set()
            if not any(_rule_matches(r, req, versions) for r in webhook.get("rules") or []):
                continue
            if req.kind == "Namespace" and req.group == "" and not req.namespaced:
                labels = ((req.obj or req.old or {}).get("metadata") or {}).get("labels") or {}
                if not _selector_matches(webhook.get("namespaceSelector"), labels):
                    continue
            elif req.namespaced and not _selector_matches(webhook.get("namespaceSelector"), namespace_labels or {}):
                continue
            selector = webhook.get("objectSelector")
            if selector and not any(_selector_matches(selector, ((o or {}).get("metadata") or {}).get("labels") or {})
                                    for o in (req.obj, req.old) if o is not None):
                continue
            if not _match_conditions(webhook, req):
                continue
            out.append(webhook)
    return out


def call(webhook: dict[str, Any], service_lookup: Callable[[str, str], dict[str, Any] | None],
         has_ready_endpoint: Callable[[str, dict[str, str]], bool]) -> None:
    """Raise the API server's 500 when a fail-closed webhook cannot be reached; return when it is taken to allow."""
    client = webhook.get("clientConfig") or {}
    service = client.get("service")
    if not service:
        return  # a URL webhook: not called by the sandbox (module doc)
    name, namespace = service.get("name", ""), service.get("namespace", "")
    port = service.get("port", 443)
    path = service.get("path") or "/"
    found = service_lookup(namespace, name)
    if found is None:
        problem = f'service "{name}" not found'
    else:
        selector = (found.get("spec") or {}).get("selector") or {}
        if selector and has_ready_endpoint(namespace, selector):
            return
        problem = f'no endpoints available for service "{name}"'
    if webhook.get("failurePolicy", "Fail") == "Ignore":
        return
    timeout = webhook.get("timeoutSeconds", 10)
    cause = (f'failed calling webhook "{webhook.get("name", "")}": failed to call webhook: Post '
             f'"https://{name}.{namespace}.svc:{port}{path}?timeout={timeout}s": {problem}')
    raise KubeError(500, "InternalError", f"Internal error occurred: {cause}", {"causes": [{"message": cause}]})
