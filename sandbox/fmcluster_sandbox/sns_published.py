"""What was published to an SNS topic (``GET /_fmcluster/sns-published?topic_arn=ARN``), for tests that check a
message went out (a budget guard's warning). Not an AWS API: AWS shows a topic's publishes only through CloudWatch
metrics (NumberOfMessagesPublished) and what its subscribers receive; moto keeps each publish on the topic."""

from __future__ import annotations

from typing import Any


def published(topic_arn: str) -> tuple[int, Any]:
    """(status, body): ``[{"message_id", "subject", "message"}]`` in publishing order; 404 for an unknown topic."""
    from moto.sns.models import sns_backends

    parts = topic_arn.split(":")
    if len(parts) != 6 or parts[2] != "sns":
        return 400, {"error": f"not an SNS topic ARN: {topic_arn!r}"}
    region, account = parts[3], parts[4]
    backend = sns_backends[account][region]
    topic = backend.topics.get(topic_arn)
    if topic is None:
        return 404, {"error": f"no topic {topic_arn}"}
    return 200, [{"message_id": m[0], "message": m[1], "subject": m[2]} for m in topic.sent_notifications]
