"""Check rendered request documents against botocore's service models (PCS, EKS, EC2, IAM, FSx)."""

from __future__ import annotations

import functools
from typing import Any

import botocore.session
from botocore.model import ServiceModel

from fmcluster.checks import CheckResult
from fmcluster.engine.references import references, resolve
from fmcluster.render.documents import Document, RenderedDocuments
from fmcluster.validate.shapes import check_shape

# Well-formed values for ids AWS issues at create time, so documents can be checked before they exist.
_STAND_INS = {
    "network.vpc_id": "vpc-0123456789abcdef0",
    "network.vpc_ip_ranges": [{"CidrIp": "172.31.0.0/16", "Description": "the VPC"}],
    "fmcluster.cluster_id": "0123456789abcdef0123456789abcdef",
    "network.availability_zone": "us-east-1a",
    "network.second_availability_zone": "us-east-1b",
    "network.head_availability_zone": "us-east-1a",
    "network.control_subnet_id": "subnet-0123456789abcdef2",
}
# By (kind, attribute): references name a resource by kind and key, ``${kind.key.attribute}``.
_STAND_IN_BY_KIND = {
    ("security_group", "id"): "sg-0123456789abcdef0",
    ("cluster", "id"): "pcs_abcdef1234",
    ("instance_profile", "arn"): "arn:aws:iam::123456789012:instance-profile/aws-pcs/AWSPCS-example",
    ("fsx_lustre", "id"): "fs-0123456789abcdef0",
    ("fsx_lustre", "dns_name"): "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    ("fsx_lustre", "mount_name"): "abcdefgh",
    ("fsx_openzfs", "id"): "fs-0123456789abcdef1",
    ("fsx_openzfs", "root_volume_id"): "fsvol-0123456789abcdef0",
    ("fsx_openzfs", "dns_name"): "fs-0123456789abcdef1.fsx.us-east-1.amazonaws.com",
    ("launch_template", "id"): "lt-0123456789abcdef0",
    ("launch_template", "version"): "1",
    ("compute_node_group", "id"): "pcs_ngabcdef12",
    ("placement_group", "name"): "example-placement-group",
    ("vpc", "id"): "vpc-0123456789abcdef1",
    ("subnet", "id"): "subnet-0123456789abcdef1",
    ("internet_gateway", "id"): "igw-0123456789abcdef0",
    ("elastic_ip", "allocation_id"): "eipalloc-0123456789abcdef0",
    ("nat_gateway", "id"): "nat-0123456789abcdef0",
    ("route_table", "id"): "rtb-0123456789abcdef0",
    ("efs", "id"): "fs-0123456789abcdef2",
    ("efs", "dns_name"): "fs-0123456789abcdef2.efs.us-east-1.amazonaws.com",
    ("existing_efs", "dns_name"): "fs-0123456789abcdef3.efs.us-east-1.amazonaws.com",
    ("existing_fsx_lustre", "dns_name"): "fs-0123456789abcdef4.fsx.us-east-1.amazonaws.com",
    ("existing_fsx_lustre", "mount_name"): "abcdefgh",
    ("existing_fsx_volume", "dns_name"): "fs-0123456789abcdef5.fsx.us-east-1.amazonaws.com",
    ("existing_fsx_volume", "volume_path"): "/fsx/home",
    ("bucket", "name"): "fmcluster-0123456789abcdef0123456789abcdef",
    ("iam_role", "arn"): "arn:aws:iam::123456789012:role/example-us-east-1-eks-nodes",
    ("eks_cluster", "name"): "example",
    ("eks_cluster", "security_group"): "sg-0123456789abcdef1",
}


def stand_in(reference: str) -> Any:
    if reference in _STAND_INS:
        return _STAND_INS[reference]
    parts = reference.split(".")
    key = (parts[0], parts[-1])
    if key in _STAND_IN_BY_KIND:
        return _STAND_IN_BY_KIND[key]
    raise KeyError(f"no stand-in for reference ${{{reference}}}")


@functools.cache
def _service_model(service: str) -> ServiceModel:
    return botocore.session.get_session().get_service_model(service)


def with_stand_ins(body: Any) -> Any:
    """``body`` with every reference filled by its stand-in."""
    return resolve(body, {ref: stand_in(ref) for ref in references(body)})


def check_document(document: Document) -> list[str]:
    """Problems with one document, as ``Operation: message`` lines; [] when botocore accepts it."""
    body = with_stand_ins(document.body)
    model = _service_model(document.service)
    problems: list[str] = []
    for section, operation in document.operations.items():
        params = body if section == "" else body.get(section)
        if params is None:
            continue
        for item in params if isinstance(params, list) else [params]:
            problems.extend(f"{operation}: {p}" for p in check_request(model, operation, item))
    return problems


def check_request(model: ServiceModel, operation: str, params: dict[str, Any]) -> list[str]:
    """Every constraint of the operation's input shape: what botocore checks (types, required, unknown
    members) and what it leaves to the service (enums, patterns, lengths, ranges)."""
    input_shape = model.operation_model(operation).input_shape
    return [f"{path}: {message}" for path, message in check_shape(input_shape, params)]


def botocore_checks(rendered: RenderedDocuments, documents: list[Document] | None = None) -> CheckResult:
    """Every document (or ``documents``) against botocore's model of the service that takes it."""
    documents = rendered.documents if documents is None else documents
    problems = [f"{d.filename}: {p}" for d in documents for p in check_document(d)]
    services = sorted({d.service for d in documents})
    return CheckResult("botocore shapes", "failed" if problems else "passed",
                       f"{len(documents)} documents against the {', '.join(services)} models", problems)
