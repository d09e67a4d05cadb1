"""``validate`` for ParallelCluster: its own ClusterSchema and validators (``create_cluster(dryrun=True)``) judge
the config, with what fmcluster makes at create time (subnets, the bucket, an OpenZFS /home) filled in or left
out and said so; botocore's models judge fmcluster's own requests."""

from __future__ import annotations

from fmcluster import extras
from fmcluster.backends.parallelcluster.config_checks import check_schema, check_with_validators
from fmcluster.backends.parallelcluster.network_stand_ins import network_stand_ins
from fmcluster.backends.parallelcluster.render import OPENZFS_ROOT_VOLUME
from fmcluster.backends.slurm.node_software import BUCKET_REFERENCE, without_bucket
from fmcluster.checks import CheckResult, Status
from fmcluster.connection import aws
from fmcluster.engine.references import references, resolve
from fmcluster.render.common import CLUSTER_TAG
from fmcluster.render.documents import RenderedDocuments
from fmcluster.spec import LoadedSpec
from fmcluster.spec.trace import locate
from fmcluster.validate.requests import botocore_checks, stand_in, with_stand_ins


def checks(loaded: LoadedSpec, rendered: RenderedDocuments, region: str, online: bool,
           zone: str | None) -> list[CheckResult]:
    """ParallelCluster's schema and validators on its config; botocore's models on what fmcluster makes first."""
    if not extras.available("parallelcluster"):
        hint = f"needs the parallelcluster extra: {extras.install_hint('parallelcluster')}"
        requests = [d for d in rendered.documents if d.kind != "pcluster_cluster"]
        return ([CheckResult("pcluster schema", "skipped", hint)]
                + ([botocore_checks(rendered, requests)] if requests else [])
                + [CheckResult("pcluster validators", "skipped", hint)])
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
        results.append(botocore_checks(rendered, requests))
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
