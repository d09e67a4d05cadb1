"""How many of the spec's tags fit on one resource, once fmcluster and the backend have added theirs.

AWS allows 50 tags per resource; keys starting with ``aws:`` are AWS's own and do not count ("Tag your Amazon
EC2 resources" / "Tagging AWS resources", tag restrictions: "Maximum number of tags per resource - 50 ...
Tags with this prefix do not count against your tags per resource limit"). A spec with more user tags than
fit would get past validation and fail only once ``create`` has made resources, so it is refused at load
time instead. (The ``aws:`` prefix and the 128/256 key and value lengths are checked by ``rules._tags``.)
"""

from __future__ import annotations

from collections.abc import Callable

from fmcluster.spec.backend_rules import backend_rules
from fmcluster.spec.models import Spec
from fmcluster.spec.positions import Path_

AWS_TAGS_PER_RESOURCE = 50
# fmcluster.render.common.resource_tags puts these four on everything it creates (render sits above spec, so
# they are spelled out here; tests/spec/test_spec_errors.py checks they match), and render.network adds "Name".
OWNERSHIP_TAGS = ("fmcluster:cluster", "fmcluster:region", "fmcluster:cluster-id", "fmcluster:resource")
FMCLUSTER_TAGS = (*OWNERSHIP_TAGS, "Name")
Report = Callable[[Path_, str], None]


def check_tag_count(spec: Spec, error: Report, warn: Report) -> None:
    """Refuse, at the first tag that does not fit, a spec with more tags than one resource can carry."""
    allowed = backend_rules(spec.backend).tag_budget()
    own, budget, why = allowed.own, allowed.budget, allowed.why
    counted = [key for key in spec.tags if key not in own and not key.lower().startswith("aws:")]
    if len(counted) > budget:
        error(("tags", counted[budget]),
              f"{len(counted)} tags are too many: {why} ({', '.join(own)}), so a spec can have at most {budget}; "
              f"this is tag {budget + 1}")
