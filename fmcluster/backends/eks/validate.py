"""``validate`` for EKS: every AWS request (EC2, IAM, EKS, FSx) against botocore's models, and every Kubernetes
manifest against the Kubernetes OpenAPI schemas of the cluster's version and the scheduler's CRDs."""

from __future__ import annotations

import importlib.util

from fmcluster.checks import CheckResult
from fmcluster.extras import install_hint
from fmcluster.render.documents import Document, RenderedDocuments
from fmcluster.spec import LoadedSpec
from fmcluster.validate.requests import botocore_checks, with_stand_ins

# What kube_validate imports. The manifest check needs these, not the Kubernetes API client (lightkube): the
# sandbox distribution brings them too, so the README's quick-start install checks manifests; an install with
# neither skips the check and names the extra, as ParallelCluster's schema check does without its extra.
MANIFEST_MODULES = ("kubernetes_validate", "jsonschema", "referencing")


def checks(loaded: LoadedSpec, rendered: RenderedDocuments, region: str, online: bool,
           zone: str | None) -> list[CheckResult]:
    aws = [d for d in rendered.documents if d.kind != "kube_object"]
    objects = [d for d in rendered.documents if d.kind == "kube_object"]
    return [botocore_checks(rendered, aws), _manifest_check(loaded, objects)]


def _manifest_check(loaded: LoadedSpec, objects: list[Document]) -> CheckResult:
    version = loaded.spec.kubernetes.version
    if not all(importlib.util.find_spec(module) is not None for module in MANIFEST_MODULES):
        return CheckResult("kubernetes schemas", "skipped",
                           f"{len(objects)} manifests not checked: needs the kubernetes extra: "
                           f"{install_hint('kubernetes')}")
    from fmcluster.backends.eks.software.validate import manifest_problems

    problems = [f"{d.filename}: {p}" for d in objects for p in manifest_problems([with_stand_ins(d.body)], version)]
    return CheckResult("kubernetes schemas", "failed" if problems else "passed",
                       f"{len(objects)} manifests against Kubernetes {version}'s OpenAPI schemas and the "
                       f"{loaded.spec.kubernetes.scheduler} CRDs (unknown fields refused)", problems)
