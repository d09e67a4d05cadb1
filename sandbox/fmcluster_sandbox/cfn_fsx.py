"""``AWS::FSx::FileSystem`` in moto's CloudFormation, which moto lacks, so a ParallelCluster cluster with a
new FSx for Lustre file system (``SharedStorage: FsxLustreSettings`` without ``FileSystemId``) can be
created and deleted.

The resource creates and deletes the file system through moto's FSx backend, as the FSx API would (with
the sandbox's FSx behaviour: AWS's id form, network interfaces, ``Lifecycle``, ``MountName``). It answers
``Ref`` with the file system id and ``Fn::GetAtt`` with the attributes the CloudFormation reference lists:
``DNSName``, ``LustreMountName``, ``ResourceARN`` and ``RootVolumeId`` ("AWS::FSx::FileSystem",
CloudFormation template reference). As for every taggable resource, the stack's tags and CloudFormation's
own ``aws:cloudformation:*`` tags are propagated to the file system ("Resource tag", CloudFormation user
guide); moto propagates them to EC2 resources only.

``AWS::FSx::DataRepositoryAssociation`` (ParallelCluster's ``DataRepositoryAssociations``) links the file
system to S3 through the sandbox's FSx data repository associations; ``Ref`` is the association id.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from moto.core.common_models import CloudFormationModel

ATTRIBUTES = ("DNSName", "LustreMountName", "ResourceARN", "RootVolumeId")
_CONFIGURATIONS = {"LustreConfiguration": "lustre_configuration", "WindowsConfiguration": "windows_configuration",
                   "OntapConfiguration": "ontap_configuration", "OpenZFSConfiguration": "open_zfs_configuration"}


def _backend(account_id: str, region_name: str) -> Any:
    from moto.fsx.models import fsx_backends

    return fsx_backends[account_id][region_name]


def _clean(value: Any) -> Any:
    """CloudFormation sends every property the template names; the API takes only those with a value."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v not in (None, "")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


class FsxFileSystem(CloudFormationModel):
    def __init__(self, file_system: Any):
        self.file_system = file_system

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::FSx::FileSystem"

    @property
    def physical_resource_id(self) -> str:
        return self.file_system.file_system_id

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in ATTRIBUTES

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        described = self.file_system.to_dict()
        if attribute_name == "DNSName":
            return described.get("DNSName")
        if attribute_name == "ResourceARN":
            return described.get("ResourceARN")
        if attribute_name == "LustreMountName":
            return (described.get("LustreConfiguration") or {}).get("MountName")
        if attribute_name == "RootVolumeId":
            return (described.get("OpenZFSConfiguration") or {}).get("RootVolumeId")
        raise UnformattedGetAttTemplateException()

    @classmethod
    def create_from_cloudformation_json(cls, resource_name: str, cloudformation_json: dict[str, Any],
                                        account_id: str, region_name: str, **kwargs: Any) -> FsxFileSystem:
        props = _clean(cloudformation_json.get("Properties", {}))
        configurations = {arg: props.get(key) for key, arg in _CONFIGURATIONS.items()}
        file_system = _backend(account_id, region_name).create_file_system(
            str(uuid.uuid4()), props["FileSystemType"], int(props.get("StorageCapacity", 0)) or None,
            props.get("StorageType", "SSD"), list(props.get("SubnetIds", [])), list(props.get("SecurityGroupIds", [])),
            props.get("Tags"), props.get("KmsKeyId"), file_system_type_version=props.get("FileSystemTypeVersion"),
            **configurations)
        return cls(file_system)

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name: str, cloudformation_json: dict[str, Any],
                                        account_id: str, region_name: str) -> None:
        backend = _backend(account_id, region_name)
        if resource_name in backend.file_systems:
            backend.delete_file_system(resource_name, str(uuid.uuid4()), None, None, None)

    def delete(self, account_id: str, region_name: str) -> None:
        self.delete_from_cloudformation_json(self.physical_resource_id, {}, account_id, region_name)

    def is_created(self) -> bool:
        return True


class FsxDataRepositoryAssociation(CloudFormationModel):
    def __init__(self, association: dict[str, Any]):
        self.association = association

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::FSx::DataRepositoryAssociation"

    @property
    def physical_resource_id(self) -> str:
        return self.association["AssociationId"]

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in ("AssociationId", "ResourceARN")

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name in ("AssociationId", "ResourceARN"):
            return self.association[attribute_name]
        raise UnformattedGetAttTemplateException()

    @classmethod
    def create_from_cloudformation_json(cls, resource_name: str, cloudformation_json: dict[str, Any],
                                        account_id: str, region_name: str,
                                        **kwargs: Any) -> FsxDataRepositoryAssociation:
        from fmcluster_sandbox.fsx_extras import REGISTRY

        request = {**_clean(cloudformation_json.get("Properties", {})), "ClientRequestToken": str(uuid.uuid4())}
        status, _, body = REGISTRY.handle("CreateDataRepositoryAssociation", json.dumps(request).encode(),
                                          region_name, account_id)
        answer = json.loads(body)
        if status != 200:
            raise ValueError(f"{answer.get('__type')}: {answer.get('Message')}")
        return cls(answer["Association"])

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name: str, cloudformation_json: dict[str, Any],
                                        account_id: str, region_name: str) -> None:
        from fmcluster_sandbox.fsx_extras import REGISTRY

        REGISTRY.handle("DeleteDataRepositoryAssociation", json.dumps({"AssociationId": resource_name}).encode(),
                        region_name, account_id)

    def delete(self, account_id: str, region_name: str) -> None:
        self.delete_from_cloudformation_json(self.physical_resource_id, {}, account_id, region_name)

    def is_created(self) -> bool:
        return True


def _propagate_stack_tags() -> None:
    from moto.cloudformation import parsing

    original = parsing.ResourceMap.create
    if getattr(original, "_fmcluster", False):
        return

    def create(self: Any, template: dict[str, Any]) -> bool:
        ready = original(self, template)
        for logical_id, resource in list(self._parsed_resources.items()):
            if isinstance(resource, FsxFileSystem):
                tags = {**self.tags, "aws:cloudformation:logical-id": logical_id}
                resource.file_system.backend.tagger.tag_resource(
                    resource.file_system.resource_arn, [{"Key": k, "Value": v} for k, v in tags.items()])
        return ready

    create._fmcluster = True  # type: ignore[attr-defined]
    parsing.ResourceMap.create = create


def install() -> None:
    """Make moto's CloudFormation parser see the model above (idempotent)."""
    from moto.cloudformation import parsing

    _propagate_stack_tags()

    parsing.get_model_list.cache_clear()
    parsing.get_model_map.cache_clear()
    parsing.get_name_type_map.cache_clear()
    for model in (FsxFileSystem, FsxDataRepositoryAssociation):
        if parsing.get_model_map().get(model.cloudformation_type()) is not model:
            raise RuntimeError(f"moto did not pick up the sandbox's {model.cloudformation_type()} model")
