"""Which AWS regions exist, from botocore's own partition data (``botocore/data/partitions.json``).

Read from the file, without importing botocore's machinery, so that ``plan`` and ``render`` stay fast and
offline. A region newer than the installed botocore is reported as unknown, with that as one possible reason.
"""

from __future__ import annotations

import difflib
import functools
import json
from importlib import resources


@functools.cache
def known_regions() -> frozenset[str]:
    """Every region of every partition botocore knows (aws, aws-cn, aws-us-gov, the ISO partitions, …)."""
    data = json.loads(resources.files("botocore").joinpath("data", "partitions.json").read_text())
    return frozenset(name for partition in data["partitions"] for name in partition["regions"]
                     if not name.endswith("-global"))


def region_problem(name: str) -> str | None:
    """None for a region botocore knows; otherwise what is wrong, with the closest known names."""
    if name in known_regions():
        return None
    message = f"unknown region '{name}'"
    close = difflib.get_close_matches(name, sorted(known_regions()), n=3, cutoff=0.6)
    if close:
        message += f" (did you mean {' or '.join(repr(c) for c in close)}?)"
    else:
        message += f" (did you mean one of {', '.join(sorted(known_regions()))}?)"
    return message + "; the list is botocore's partition data, so a brand-new region needs a newer botocore"
