"""``fmcluster validate``: render a spec, then check it with each backend's own rules."""

from __future__ import annotations

from pathlib import Path

from fmcluster import aws, extras
from fmcluster.checks import CheckResult, Status
from fmcluster.network import instance_types, resolve_placement
from fmcluster.preflight.network import check_node_network
from fmcluster.references import references, resolve
from fmcluster.render import render
from fmcluster.render.common import CLUSTER_TAG
from fmcluster.render.node_software import BUCKET_REFERENCE, without_bucket
from fmcluster.render.parallelcluster import OPENZFS_ROOT_VOLUME
from fmcluster.spec import load_spec
from fmcluster.spec.trace import locate
from fmcluster.validate.network import network_stand_ins
from fmcluster.validate.parallelcluster import check_schema, check_with_validators


def run_checks(spec_path: Path) -> list[CheckResult]:
    """Every check, in order; those that need AWS are skipped (and say so) when none is reachable."""
    loaded = load_spec(spec_path)
    spec = loaded.spec
    results = [CheckResult("spec", "warning" if loaded.warnings else "passed",
                           f"{spec_path} loads ({len(spec.queues)} queues, backend {spec.backend})",
                           [str(w) for w in loaded.warnings])]
    region = aws.region_for(spec.region)
    online = bool(aws.target().endpoint_url) or aws.has_credentials(region)
    placement = None
    if online:
        try:
            placement = resolve_placement(spec, aws.client("ec2", region),
                                          lambda: aws.client("resource-groups", region))
            results.append(CheckResult("subnet", "passed", placement.describe()))
            results += _node_network(spec, region, placement)
        except Exception as exc:  # report it as a failed check; the rest can still run
            results.append(CheckResult("subnet", "failed", _message(exc)))
    rendered = render(spec, str(spec_path), subnet_id=placement.subnet_id if placement else None)
    results.append(CheckResult("render", "passed", f"{len(rendered.documents)} documents", rendered.notes))

    if spec.backend == "parallelcluster":
        results.extend(_parallelcluster_checks(loaded, rendered, region, online,
                                               placement.availability_zone if placement else None))
    else:
        results.append(_botocore_checks(rendered))
    results.append(_instance_type_check(spec, region, online))
    return results


def _parallelcluster_checks(loaded, rendered, region: str, online: bool, zone: str | None = None) -> list[CheckResult]:
    if not extras.available("parallelcluster"):
        hint = f"needs the parallelcluster extra: {extras.install_hint('parallelcluster')}"
        requests = [d for d in rendered.documents if d.kind != "pcluster_cluster"]
        return ([CheckResult("pcluster schema", "skipped", hint)]
                + ([_botocore_checks(rendered, requests)] if requests else [])
                + [CheckResult("pcluster validators", "skipped", hint)])
    from fmcluster.validate.requests import with_stand_ins

    name = loaded.spec.name
    document = rendered.one("pcluster_cluster")
    results = []
    # References (the OpenZFS root volume fmcluster creates first) take well-formed stand-ins for the schema.
    schema = check_schema(name, with_stand_ins(document.body), region)
    results.append(CheckResult("pcluster schema", "failed" if schema.errors else "passed",
                               "ParallelCluster 3.16 ClusterSchema" + (" rejects the config" if schema.errors else
                                                                       " accepts the config"), schema.errors))
    requests = [d for d in rendered.documents if d is not document]
    if requests:  # what fmcluster creates before the cluster (an OpenZFS /home), against botocore's models
        results.append(_botocore_checks(rendered, requests))
    if not online:
        results.append(CheckResult("pcluster validators", "skipped",
                                   "no AWS endpoint or credentials (use --sandbox, --endpoint-url or a profile)"))
        return results
    config, notes = _config_for_validators(name, document.body, region, zone)
    findings = check_with_validators(name, config, region)
    details = []
    for level, messages in findings.by_level.items():
        for message in messages:
            where = locate(loaded, message)
            details.append(f"{level}: {message}" + (f" ← {where}" if where else ""))
    details += notes
    status: Status = "failed" if findings.errors else ("warning" if findings.by_level else "passed")
    results.append(CheckResult("pcluster validators", status, "create_cluster(dryrun=True)", details))
    return results


def _config_for_validators(name: str, config: dict, region: str, zone: str | None = None) -> tuple[dict, list[str]]:
    """The config ParallelCluster's validators can judge: an OpenZFS /home that fmcluster already created
    for this cluster is filled in; one it has yet to create is left out (its validators read the live file
    system, which does not exist before ``create``), and the details say so."""
    from fmcluster.validate.requests import stand_in

    root_volume = OPENZFS_ROOT_VOLUME[2:-1]

    bucket_notes = []
    if BUCKET_REFERENCE[2:-1] in references(config):
        config = without_bucket(config)
        bucket_notes = ["not judged by ParallelCluster yet: the cluster's bucket (CustomS3Bucket) and the scripts run "
                        "from it, which fmcluster makes and uploads at create time"]
    # The cluster's own id (an ownership tag) is issued at create time; any well-formed value serves here.
    values: dict[str, str] = {ref: stand_in(ref) for ref in references(config) if ref.startswith("fmcluster.")}
    subnets, notes = network_stand_ins(config, name, region, zone)
    values.update(subnets)
    refs = references(config) - set(values)
    if not refs:
        return resolve(config, values), [*notes, *bucket_notes]
    if root_volume in refs:
        fsx = aws.client("fsx", region)
        for page in fsx.get_paginator("describe_file_systems").paginate():
            for fs in page["FileSystems"]:
                tags = {t["Key"]: t["Value"] for t in fs.get("Tags", [])}
                if tags.get(CLUSTER_TAG) == name and fs["FileSystemType"] == "OPENZFS" and \
                        fs.get("Lifecycle") not in ("DELETING", "FAILED"):
                    values[root_volume] = fs["OpenZFSConfiguration"]["RootVolumeId"]
    if refs <= set(values):
        return resolve(config, values), [*notes, f"OpenZFS /home: the existing root volume {values[root_volume]}",
                                         *bucket_notes]
    storage = [s for s in config.get("SharedStorage") or [] if not references(s)]
    trimmed = {k: v for k, v in resolve({k: v for k, v in config.items() if k != "SharedStorage"}, values).items()}
    if storage:
        trimmed["SharedStorage"] = storage
    return trimmed, [*notes, "not judged by ParallelCluster yet: SharedStorage that fmcluster creates at create time "
                     "(the OpenZFS /home; its CreateFileSystem request is checked against botocore's FSx model)",
                     *bucket_notes]


def _botocore_checks(rendered, documents=None) -> CheckResult:
    from fmcluster.validate.requests import check_document

    documents = rendered.documents if documents is None else documents
    problems = [f"{d.filename}: {p}" for d in documents for p in check_document(d)]
    services = sorted({d.service for d in documents})
    return CheckResult("botocore shapes", "failed" if problems else "passed",
                       f"{len(documents)} documents against the {', '.join(services)} models", problems)


def _instance_type_check(spec, region: str, online: bool) -> CheckResult:
    names = instance_types(spec)
    if not online:
        return CheckResult("instance types", "skipped", "DescribeInstanceTypes needs an AWS endpoint")
    from botocore.exceptions import ClientError

    ec2 = aws.client("ec2", region)
    missing = []
    for name in names:
        try:
            ec2.describe_instance_types(InstanceTypes=[name])
        except ClientError:
            missing.append(name)
    if missing:
        return CheckResult("instance types", "failed", f"unknown to EC2 in {region}: {', '.join(missing)}")
    return CheckResult("instance types", "passed", f"DescribeInstanceTypes knows {', '.join(names)}")


def _message(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _node_network(spec, region: str, placement) -> list[CheckResult]:
    """Whether multi-interface nodes can reach out of the spec's own subnet (see fmcluster.preflight.network)."""
    if placement.created or not spec.network.subnet_id:
        return []

    try:
        return check_node_network(spec, region, aws.client("ec2", region), placement.subnet_id)
    except Exception as exc:  # report it as a failed check; the rest can still run
        return [CheckResult("node network", "failed", _message(exc))]
