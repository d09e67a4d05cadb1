"""``validate`` for PCS: every request fmcluster sends (EC2, IAM, PCS, FSx) against botocore's models."""

from __future__ import annotations

from fmcluster.checks import CheckResult
from fmcluster.render.documents import RenderedDocuments
from fmcluster.spec import LoadedSpec
from fmcluster.validate.requests import botocore_checks


def checks(loaded: LoadedSpec, rendered: RenderedDocuments, region: str, online: bool,
           zone: str | None) -> list[CheckResult]:
    return [botocore_checks(rendered)]
