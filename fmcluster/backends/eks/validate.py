"""``validate`` for EKS: every AWS request (EC2, IAM, EKS, FSx) against botocore's models, and every Kubernetes
manifest against the Kubernetes OpenAPI schemas of the cluster's version and the scheduler's CRDs."""

from __future__ import annotations

from fmcluster.checks import CheckResult
from fmcluster.extras import require
from fmcluster.render.documents import RenderedDocuments
from fmcluster.spec import LoadedSpec
from fmcluster.validate.requests import botocore_checks, with_stand_ins


def checks(loaded: LoadedSpec, rendered: RenderedDocuments, region: str, online: bool,
           zone: str | None) -> list[CheckResult]:
    aws = [d for d in rendered.documents if d.kind != "kube_object"]
    objects = [d for d in rendered.documents if d.kind == "kube_object"]
    require("kubernetes", "checking Kubernetes manifests")
    from fmcluster.backends.eks.kube_validate import manifest_problems

    version = loaded.spec.kubernetes.version
    problems = [f"{d.filename}: {p}" for d in objects for p in manifest_problems([with_stand_ins(d.body)], version)]
    manifests = CheckResult("kubernetes schemas", "failed" if problems else "passed",
                            f"{len(objects)} manifests against Kubernetes {version}'s OpenAPI schemas and the "
                            f"{loaded.spec.kubernetes.scheduler} CRDs (unknown fields refused)", problems)
    return [botocore_checks(rendered, aws), manifests]
