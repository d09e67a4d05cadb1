"""The verbs on resource paths: get, list, create, update, patch, delete and deletecollection, as the API server
answers them ("Kubernetes API Concepts"), on the cluster's store (:mod:`.store`), objects checked by
:mod:`.validation` and :mod:`.kind_rules`, Nodes built by :mod:`.nodes`. Writes go through the admission webhooks
that match them (:mod:`.admission`: mutating before validation, validating after) and record their field managers
(:mod:`.fields`); reads of Deployments, StatefulSets, DaemonSets and Jobs carry the status their controllers would
have written for the cluster's current Nodes (:mod:`.workloads`)."""

from __future__ import annotations

import base64
import copy
import datetime as _dt
import json
import random
import string
import uuid
from collections.abc import Callable
from typing import Any

from fmcluster_sandbox.kube import (
    admission,
    auth,
    authorization,
    cel_rules,
    claim_resize,
    defaults,
    discovery,
    fields,
    kind_rules,
    mpi_operator,
    node_writes,
    patches,
    validation,
)
from fmcluster_sandbox.kube import nodes as node_objects
from fmcluster_sandbox.kube.controller_status import ControllerStatus, timestamp
from fmcluster_sandbox.kube.resources import BUILTIN, ResourceType
from fmcluster_sandbox.kube.selectors import field_selector, label_selector
from fmcluster_sandbox.kube.status import (
    already_exists,
    bad_request,
    conflict,
    forbidden,
    invalid,
    method_not_allowed,
    no_route,
    not_found,
    unsupported_media_type,
)
from fmcluster_sandbox.kube.store import ClusterStore, Key

NodeSource = Callable[[str, str], list[dict[str, Any]]]  # (cluster name, region) -> running instances
# Kinds whose status is a subresource: writes to the main resource leave status alone ("Kubernetes API
# Concepts", subresources; each kind's API reference lists /status).
STATUS_SUBRESOURCE = {"Namespace", "PersistentVolume", "PersistentVolumeClaim", "DaemonSet", "Deployment", "Job",
                      "StatefulSet", "CustomResourceDefinition", "Service", "APIService"}
# NamespaceLifecycle admission: these namespaces cannot be deleted.
UNDELETABLE_NAMESPACES = {"default", "kube-system", "kube-public"}


class Request(ControllerStatus):
    """One request to a resource path: the cluster's store, and each verb's implementation."""

    def __init__(self, nodes: NodeSource, cluster: str, identity: auth.Identity, store: ClusterStore, version: str,
                 environ: dict[str, Any], method: str, query: dict[str, str],
                 policies: list[dict[str, Any]] | None = None):
        self.nodes, self.cluster, self.identity, self.store = nodes, cluster, identity, store
        self.policies = policies  # the principal's EKS access policies; None: not known, nothing is checked
        self.version, self.environ, self.method, self.query = version, environ, method, query
        self.warnings: list[str] = []
        self.applying = False  # a server-side apply (application/apply-patch+yaml) request
        self._applied_fields: list[dict[str, Any]] | None = None  # managedFields after the apply
        self._ready_nodes: list[dict[str, Any]] | None = None
        self.faults: Any = None  # the sandbox's faults (node health for the workloads it runs), when it has any

    # -- verbs ---------------------------------------------------------------------------------------
    def dispatch(self, rtype: ResourceType, namespace: str | None, name: str | None,
                 sub: str | None) -> tuple[int, dict, Any]:
        if self.query.get("watch") in ("true", "1"):
            raise method_not_allowed("watch is not emulated by the sandbox's Kubernetes API")
        verb = {("GET", False): "list", ("GET", True): "get", ("POST", False): "create", ("PUT", True): "update",
                ("PATCH", True): "patch", ("DELETE", True): "delete",
                ("DELETE", False): "deletecollection"}.get((self.method, name is not None))
        if verb is None or verb not in rtype.verbs:
            raise method_not_allowed("the server does not allow this method on the requested resource")
        if rtype.namespaced and namespace is None and verb not in ("list",):
            raise no_route(self.environ.get("PATH_INFO", ""))
        if sub == "status" and (rtype.kind == "Node" or not self._has_status(rtype)):
            raise no_route(self.environ.get("PATH_INFO", ""))  # no status subresource on this kind
        if self.policies is not None:
            authorization.check(self.policies, self.identity.username, verb, rtype, namespace, name)
        if rtype.kind == "Node":
            return self._nodes(verb, name)
        if rtype.kind == "Pod":  # the MPI Operator makes pods: bring them up to date first
            for job in self.store.items(mpi_operator.GROUP, mpi_operator.PLURAL, namespace):
                self._refresh(discovery.types(self.store, mpi_operator.GROUP, "v2beta1")[mpi_operator.PLURAL], job)
            if sub == "log":
                text = mpi_operator.log(self.store, namespace or "", name or "")
                if text is None:
                    raise not_found("pods", name or "")
                return 200, {"Content-Type": "text/plain"}, text
        result = getattr(self, "_" + verb)(rtype, namespace, name, sub)
        status, body = result
        # RFC 7234 warn-text is a quoted-string (the API server escapes quotes and backslashes in it)
        quoted = [w.replace("\\", "\\\\").replace('"', '\\"') for w in self.warnings]
        headers = {"Warning": ", ".join(f'299 - "{w}"' for w in quoted)} if quoted else {}
        return status, headers, body

    def _key(self, rtype: ResourceType, namespace: str | None, name: str) -> Key:
        return (rtype.group, rtype.plural, (namespace or "") if rtype.namespaced else "", name)

    def _present(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        obj["apiVersion"] = rtype.api_version  # CRD versions convert with strategy None: only apiVersion changes
        return obj

    def _get(self, rtype: ResourceType, namespace: str | None, name: str, sub: str | None) -> tuple[int, Any]:
        obj = self.store.get(self._key(rtype, namespace, name))
        if obj is None:
            raise not_found(rtype.plural, name, rtype.group)
        return 200, self._present(rtype, self._refresh(rtype, obj))

    def _matcher(self) -> Callable[[dict[str, Any]], bool]:
        labels = label_selector(self.query.get("labelSelector", ""))
        fields = field_selector(self.query.get("fieldSelector", ""))
        return lambda obj: labels(obj) and fields(obj)

    def _list_body(self, rtype: ResourceType, items: list[dict[str, Any]]) -> dict[str, Any]:
        for item in items:
            self._present(rtype, item)
            if rtype.crd is None:  # typed lists of built-in kinds carry no per-item kind/apiVersion
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return {"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": str(self.store.revision)}, "items": items}

    def _list(self, rtype: ResourceType, namespace: str | None, name: None, sub: None) -> tuple[int, Any]:
        match = self._matcher()
        items = [self._refresh(rtype, o)
                 for o in self.store.items(rtype.group, rtype.plural, namespace if rtype.namespaced else None)
                 if match(o)]
        return 200, self._paged(rtype, items)

    def _paged(self, rtype: ResourceType, items: list[dict[str, Any]]) -> dict[str, Any]:
        """``limit`` and ``continue`` (API concepts "Retrieving large results sets in chunks"): a chunk, the token
        for the next one and ``remainingItemCount``."""
        start = 0
        token = self.query.get("continue")
        if token:
            try:
                start = int(json.loads(base64.urlsafe_b64decode(token.encode()))["start"])
            except (ValueError, KeyError, TypeError):
                raise bad_request("continue key is not valid: the token was not returned by this server") from None
        try:
            limit = int(self.query.get("limit") or 0)
        except ValueError:
            raise bad_request(f"limit {self.query['limit']!r} is not an integer") from None
        chunk = items[start:start + limit] if limit > 0 else items[start:]
        body = self._list_body(rtype, chunk)
        rest = len(items) - start - len(chunk)
        if limit > 0 and rest > 0:
            body["metadata"]["continue"] = base64.urlsafe_b64encode(
                json.dumps({"start": start + len(chunk)}).encode()).decode()
            body["metadata"]["remainingItemCount"] = rest
        return body

    def _body(self) -> Any:
        from fmcluster_sandbox import protocols

        content_type = (self.environ.get("CONTENT_TYPE") or "application/json").split(";")[0].strip()
        raw = protocols.read_body(self.environ)
        if self.method == "PATCH":
            if content_type not in patches.SUPPORTED:
                raise unsupported_media_type(content_type)
            return content_type, patches.parse_body(raw, content_type)
        if content_type in ("application/yaml", "application/yml"):
            return content_type, patches.parse_body(raw, patches.APPLY)
        if content_type != "application/json":
            raise unsupported_media_type(content_type)
        return content_type, patches.parse_body(raw, content_type)

    def _field_validation(self) -> str:
        mode = self.query.get("fieldValidation", validation.DEFAULT_FIELD_VALIDATION)
        if mode not in validation.FIELD_VALIDATION:
            raise bad_request(f'fieldValidation {mode!r} is invalid: must be one of "Ignore", "Warn", "Strict"')
        # An applied configuration is converted to the kind's typed schema whatever the level: an unknown field in
        # it fails the request (validation.APPLY).
        return validation.APPLY if self.applying else mode

    def _check_identity(self, rtype: ResourceType, obj: Any, namespace: str | None) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise bad_request("the body of the request is not a Kubernetes object")
        # The API server decodes a body without apiVersion/kind as the kind its URL serves.
        obj.setdefault("apiVersion", rtype.api_version)
        obj.setdefault("kind", rtype.kind)
        if obj.get("apiVersion") != rtype.api_version or obj["kind"] != rtype.kind:
            raise bad_request(f"the API version in the data ({obj.get('apiVersion')}) or kind ({obj['kind']}) does "
                              f"not match the expected API version ({rtype.api_version}) and kind ({rtype.kind})")
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        meta.pop("managedFields", None)  # the server keeps them (:mod:`.fields`)
        if rtype.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise bad_request("the namespace of the provided object does not match the namespace sent on the "
                                  "request")
            meta["namespace"] = namespace
            if self.store.get(("", "namespaces", "", namespace or "")) is None:
                raise not_found("namespaces", namespace or "")
        else:
            meta.pop("namespace", None)
        return obj

    def _validate(self, rtype: ResourceType, obj: dict[str, Any], created: bool,
                  old: dict[str, Any] | None = None) -> None:
        """Decode, default and validate as the API server does: schema (unknown fields), defaults, kind rules."""
        mode = self._field_validation()
        validation.check_metadata(obj)
        if rtype.kind == "Secret":
            kind_rules.normalise_secret(obj)
        if rtype.crd is None:
            self.warnings += validation.check_builtin(obj, self.version, mode)
            spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
            own_selector = created and rtype.kind == "Job" and bool(spec.get("selector"))
            defaults.apply(obj, self.version, created)
            kind_rules.check_workload(obj, own_job_selector=own_selector)
        else:
            self.warnings += validation.check_custom(obj, rtype.schema, mode)
            causes = cel_rules.check(obj, rtype.schema, old)
            if causes:
                raise invalid(rtype.kind, obj["metadata"]["name"], causes, rtype.group)
        if rtype.kind == "CustomResourceDefinition":
            validation.check_crd_names(obj)

    def _has_status(self, rtype: ResourceType) -> bool:
        if rtype.crd is None:
            return rtype.kind in STATUS_SUBRESOURCE
        crd = self.store.get(("apiextensions.k8s.io", "customresourcedefinitions", "", rtype.crd)) or {}
        for v in crd.get("spec", {}).get("versions", []):
            if v.get("name") == rtype.version:
                return "status" in (v.get("subresources") or {})
        return False

    def _dry_run(self) -> bool:
        dry = self.query.get("dryRun", "")
        if dry not in ("", "All"):
            raise bad_request(f"dryRun {dry!r} is invalid: only All is supported")
        return dry == "All"

    def _create(self, rtype: ResourceType, namespace: str | None, name: None, sub: None,
                obj: Any = None) -> tuple[int, Any]:
        if obj is None:
            _, obj = self._body()
        obj = self._check_identity(rtype, obj, namespace)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        if self._has_status(rtype):
            obj.pop("status", None)
        for owned in ("uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp"):
            meta.pop(owned, None)
        meta["uid"] = str(uuid.uuid4())  # before defaulting: a Job's generated selector names it
        sent = set(fields.leaves(obj))
        applied = copy.deepcopy(obj) if self.applying else None
        self._admit("CREATE", rtype, namespace, meta["name"], obj, None, mutating=True)
        self._validate(rtype, obj, created=True)
        key = self._key(rtype, namespace, meta["name"])
        if self.store.get(key) is not None:
            raise already_exists(rtype.plural, meta["name"], rtype.group)
        self._admit("CREATE", rtype, namespace, meta["name"], obj, None, mutating=False)
        self._initial_status(rtype, obj)
        if applied is not None:
            fields.created_by_apply(obj, applied, self._manager(), rtype.api_version, timestamp())
        else:
            fields.record_update(None, obj, self._manager(), rtype.api_version, timestamp(), sent)
        if self._dry_run():
            return 201, obj
        stored = self.store.put(key, obj, new=True)
        if rtype.kind == "CustomResourceDefinition":
            self.store.install_crd(stored)
        return 201, self._present(rtype, stored)

    def _initial_status(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        if rtype.kind == "Namespace":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        elif rtype.kind == "CustomResourceDefinition":
            # Established at once: the sandbox has no naming controller delay ("Create a CustomResourceDefinition").
            now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            spec = obj["spec"]
            obj["status"] = {
                "acceptedNames": copy.deepcopy(spec["names"]),
                "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")],
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found", "lastTransitionTime": now},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "message": "the initial names have been accepted", "lastTransitionTime": now}]}

    def _write(self, rtype: ResourceType, namespace: str | None, name: str, sub: str | None, obj: Any,
               existing: dict[str, Any]) -> tuple[int, Any]:
        """Store ``obj`` as the new state of ``existing`` (PUT and PATCH)."""
        obj = self._check_identity(rtype, obj, namespace)
        meta = obj["metadata"]
        if meta.get("name") != name:
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                              f"({name})")
        wanted = meta.get("resourceVersion")
        if wanted and wanted != existing["metadata"]["resourceVersion"]:
            raise conflict(rtype.plural, name, rtype.group)
        if sub == "status":  # only status changes through /status
            obj = {**copy.deepcopy(existing), "status": obj.get("status")}
            if obj["status"] is None:
                obj.pop("status")
        elif self._has_status(rtype):
            obj.pop("status", None)
            if "status" in existing:
                obj["status"] = copy.deepcopy(existing["status"])
        self._admit("UPDATE", rtype, namespace, name, obj, existing, mutating=True, sub=sub)
        self._validate(rtype, obj, created=False, old=existing)
        kind_rules.check_update(existing, obj)
        claim_resize.check(existing, obj, lambda name: self.store.get(("storage.k8s.io", "storageclasses", "", name)))
        self._admit("UPDATE", rtype, namespace, name, obj, existing, mutating=False, sub=sub)
        meta = obj["metadata"]
        for owned in ("uid", "creationTimestamp", "generation"):
            if owned in existing["metadata"]:
                meta[owned] = existing["metadata"][owned]
        if self.applying or sub == "status":  # apply recorded its own ownership; /status writes record none
            meta["managedFields"] = (self._applied_fields if self.applying
                                     else existing["metadata"].get("managedFields"))
            if not meta["managedFields"]:
                meta.pop("managedFields")
        else:
            fields.record_update(existing, obj, self._manager(), rtype.api_version, timestamp())
        if _spec_changed(existing, obj):
            meta["generation"] = int(existing["metadata"].get("generation", 1)) + 1
        if rtype.kind == "Namespace":
            obj["status"] = existing.get("status", {"phase": "Active"})
        if self._dry_run():
            return 200, obj
        stored = self.store.put(self._key(rtype, namespace, name), obj, new=False)
        if rtype.kind == "CustomResourceDefinition":
            self.store.install_crd(stored)
        return 200, self._present(rtype, stored)

    def _update(self, rtype: ResourceType, namespace: str | None, name: str, sub: str | None) -> tuple[int, Any]:
        _, obj = self._body()
        existing = self.store.get(self._key(rtype, namespace, name))
        if existing is None:
            raise not_found(rtype.plural, name, rtype.group)
        return self._write(rtype, namespace, name, sub, obj, existing)

    def _patch(self, rtype: ResourceType, namespace: str | None, name: str, sub: str | None) -> tuple[int, Any]:
        content_type, patch = self._body()
        option_causes = patches.patch_options_causes(content_type, self.query)
        if option_causes:
            raise invalid("PatchOptions", "", option_causes, "meta.k8s.io")
        existing = self.store.get(self._key(rtype, namespace, name))
        if content_type == patches.APPLY:
            if self.query.get("force") not in (None, "", "true", "false"):
                raise bad_request(f"invalid force value {self.query['force']!r}")
            self.applying = True
            if existing is None:
                if isinstance(patch, dict) and (patch.get("metadata") or {}).get("name") not in (None, name):
                    raise bad_request(f"the name of the object does not match the name on the URL ({name})")
                if isinstance(patch, dict):
                    patch.setdefault("metadata", {})["name"] = name
                return self._create(rtype, namespace, None, None, obj=patch)
            if not isinstance(patch, dict):
                raise bad_request("the body of the request is not a Kubernetes object")
            merged = fields.apply(existing, patch, self._manager(), self.query.get("force") == "true",
                                  rtype.api_version, timestamp())
            self._applied_fields = merged["metadata"].get("managedFields")
        else:
            if existing is None:
                raise not_found(rtype.plural, name, rtype.group)
            if content_type == patches.JSON_PATCH:
                merged = patches.json_patch(existing, patch)
            elif content_type == patches.STRATEGIC:
                if rtype.crd is not None:  # the API server: strategic merge patch is not supported for CRs
                    raise unsupported_media_type(content_type)
                merged = patches.strategic_merge_patch(existing, patch)
            else:
                merged = patches.merge_patch(existing, patch)
        if isinstance(patch, dict) and not (patch.get("metadata") or {}).get("resourceVersion"):
            (merged.get("metadata") or {}).pop("resourceVersion", None)  # no precondition unless the patch sets one
        return self._write(rtype, namespace, name, sub, merged, existing)

    def _delete(self, rtype: ResourceType, namespace: str | None, name: str, sub: str | None) -> tuple[int, Any]:
        if sub is not None:
            raise method_not_allowed("the server does not allow this method on the requested resource")
        key = self._key(rtype, namespace, name)
        existing = self.store.get(key)
        if existing is None:
            raise not_found(rtype.plural, name, rtype.group)
        if rtype.kind == "Namespace" and name in UNDELETABLE_NAMESPACES:
            raise forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted', "delete",
                            "namespaces", name)
        for mutating in (True, False):  # a DELETE goes to both kinds of webhook (handlers/delete.go)
            self._admit("DELETE", rtype, namespace, name, None, existing, mutating=mutating)
        if self._dry_run():
            return 200, self._present(rtype, existing)
        self.store.delete(key)
        if rtype.kind == "Namespace":
            # The namespace controller removes its contents before the namespace goes; here both go at once.
            self.store.delete_namespace_contents(name)
            existing["status"] = {"phase": "Terminating"}
            existing["metadata"]["deletionTimestamp"] = _dt.datetime.now(_dt.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
            return 200, self._present(rtype, existing)
        if rtype.kind == "CustomResourceDefinition":
            self.store.remove_crd_types(name)
            self.store.delete_custom_resources(existing["spec"]["group"], existing["spec"]["names"]["plural"])
        if (rtype.group, rtype.plural) == (mpi_operator.GROUP, mpi_operator.PLURAL):
            mpi_operator.deleted(self.store, existing)
        details = {"name": name, "kind": rtype.plural, "uid": existing["metadata"].get("uid")}
        if rtype.group:
            details["group"] = rtype.group
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _deletecollection(self, rtype: ResourceType, namespace: str | None, name: None,
                          sub: None) -> tuple[int, Any]:
        match = self._matcher()
        gone = []
        for obj in self.store.items(rtype.group, rtype.plural, namespace if rtype.namespaced else None):
            if not match(obj):
                continue
            meta = obj["metadata"]
            if rtype.kind == "Namespace" and meta["name"] in UNDELETABLE_NAMESPACES:
                continue
            if not self._dry_run():
                self.store.delete(self._key(rtype, meta.get("namespace"), meta["name"]))
                if (rtype.group, rtype.plural) == (mpi_operator.GROUP, mpi_operator.PLURAL):
                    mpi_operator.deleted(self.store, obj)
                if rtype.kind == "Namespace":
                    self.store.delete_namespace_contents(meta["name"])
                if rtype.kind == "CustomResourceDefinition":
                    self.store.remove_crd_types(meta["name"])
                    self.store.delete_custom_resources(obj["spec"]["group"], obj["spec"]["names"]["plural"])
            gone.append(obj)
        return 200, self._list_body(rtype, gone)

    # -- nodes -----------------------------------------------------------------------------------------
    def _node_objects(self) -> list[dict[str, Any]]:
        daemonsets = self.store.items("apps", "daemonsets", None)
        region, account = self.identity.region, self.identity.account
        built = []
        for spec in self.nodes(self.cluster, region):
            efa = spec.get("efa_interfaces")
            if efa is None and spec.get("instance_id"):
                efa = node_objects.efa_interfaces(spec["instance_id"], account, region)
            built.append(node_writes.overlay((account, region, self.cluster),
                                             node_objects.node_object(spec, daemonsets, self.version, efa)))
        return built

    def _nodes(self, verb: str, name: str | None) -> tuple[int, dict, Any]:
        rtype = next(t for t in BUILTIN if t.kind == "Node")
        built = self._node_objects()
        for node in built:
            node["metadata"]["resourceVersion"] = str(self.store.revision)
        if verb in ("get", "patch"):
            found = [n for n in built if n["metadata"]["name"] == name]
            if not found:
                raise not_found("nodes", name or "")
            return (200, {}, found[0]) if verb == "get" else self._patch_node(found[0])
        match = self._matcher()
        return 200, {}, self._paged(rtype, [n for n in built if match(n)])

    def _patch_node(self, node: dict[str, Any]) -> tuple[int, dict, Any]:
        """A PATCH of a Node's labels, annotations or taints (:mod:`.node_writes`: the parts of a Node it keeps)."""
        return 200, {}, node_writes.patch((self.identity.account, self.identity.region, self.cluster), node,
                                          *self._body())

    # -- admission, field managers ------------------------------------------------------------------
    def _admit(self, operation: str, rtype: ResourceType, namespace: str | None, name: str,
               obj: dict[str, Any] | None, old: dict[str, Any] | None, mutating: bool, sub: str | None = None) -> None:
        """Send the request to the admission webhooks that match it (:mod:`.admission`)."""
        plural = "mutatingwebhookconfigurations" if mutating else "validatingwebhookconfigurations"
        configs = self.store.items("admissionregistration.k8s.io", plural, None)
        if not configs:
            return
        request = admission.AdmissionRequest(operation, rtype.group, rtype.version, rtype.plural, sub,
                                             rtype.namespaced, namespace, name, obj, old, rtype.kind,
                                             self.identity.username, self._dry_run())
        namespace_obj = self.store.get(("", "namespaces", "", namespace)) if namespace else None
        labels = ((namespace_obj or {}).get("metadata") or {}).get("labels") or {}
        versions = {t.version for t in discovery.all_types(self.store)
                    if t.group == rtype.group and t.plural == rtype.plural}
        for webhook in admission.matching(configs, request, labels, versions):
            admission.call(webhook, lambda ns, svc: self.store.get(("", "services", ns, svc)),
                           self._has_ready_endpoint)

    def _manager(self) -> str:
        """The field manager: ``fieldManager``, else the User-Agent up to its first ``/`` (the API server's
        default for non-apply requests)."""
        given = self.query.get("fieldManager")
        if given:
            return given
        agent = str(self.environ.get("HTTP_USER_AGENT") or "unknown")
        return agent.split("/", 1)[0][:128] or "unknown"



def _spec_changed(before: dict[str, Any], after: dict[str, Any]) -> bool:
    def body(obj: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obj.items() if k not in ("metadata", "status")}

    return body(before) != body(after)
