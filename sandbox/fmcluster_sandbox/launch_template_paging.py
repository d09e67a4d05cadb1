"""DescribeLaunchTemplates pages as EC2 documents it, where moto 5.2.5 does not.

EC2 API reference, DescribeLaunchTemplates: ``MaxResults`` "can be between 1 and 200" (botocore's model:
``DescribeLaunchTemplatesMaxResults`` min 1, max 200) and "To retrieve the remaining results, make another call
with the returned ``NextToken`` value"; botocore's paginator for the operation follows ``NextToken``. moto cuts
every answer to 15 templates (its default ``MaxResults``) and hands out no ``NextToken``, so a caller with more
than 15 templates never sees the rest. Here the filtered, named or listed templates are paged: ``MaxResults``
per page, a ``NextToken`` while more remain, ``InvalidParameterValue`` for a ``MaxResults`` out of range and
``InvalidPaginationToken`` for a token this sandbox did not hand out (EC2 API reference, "Error codes").
Without ``MaxResults`` every match is answered in one page (the sandbox's choice: the page does not say).
"""

from __future__ import annotations

from typing import Any

from fmcluster_sandbox import paging

_INSTALLED = False
MAX_RESULTS = (1, 200)  # botocore model DescribeLaunchTemplatesMaxResults


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses.launch_templates import LaunchTemplates

    def describe_launch_templates(self: Any) -> Any:
        size = self._get_int_param("MaxResults")
        if size is not None and not MAX_RESULTS[0] <= size <= MAX_RESULTS[1]:
            raise EC2ClientError("InvalidParameterValue", f"Value ( {size} ) for parameter maxResults is invalid. "
                                 f"Expecting a value between {MAX_RESULTS[0]} and {MAX_RESULTS[1]}.")
        try:
            start = paging.offset(self._get_param("NextToken"))
        except ValueError as exc:
            raise EC2ClientError("InvalidPaginationToken", "The specified pagination token is not valid.") from exc
        self.error_on_dryrun()
        templates = self.ec2_backend.describe_launch_templates(
            template_names=self._get_param("LaunchTemplateNames", []),
            template_ids=self._get_param("LaunchTemplateIds", []),
            filters=self._filters_from_querystring())
        end = len(templates) if size is None else start + size
        # each template as moto 5.2.5's own DescribeLaunchTemplates answers it
        result: dict[str, Any] = {"LaunchTemplates": [{
            "CreateTime": t.create_time,
            "CreatedBy": f"arn:{self.partition}:iam::{self.current_account}:root",
            "DefaultVersionNumber": t.default_version_number,
            "LatestVersionNumber": t.latest_version_number,
            "LaunchTemplateId": t.id,
            "LaunchTemplateName": t.name,
            "Tags": t.tags,
        } for t in templates[start:end]]}
        if end < len(templates):
            result["NextToken"] = paging.token(end)
        return ActionResult(result)

    LaunchTemplates.describe_launch_templates = describe_launch_templates
    _INSTALLED = True
