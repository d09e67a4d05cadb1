"""Whether a name is an instance type AWS sells, and which one was meant when it is not.

Separate from :mod:`fmcluster.catalog` because it asks :mod:`fmcluster.catalog.hardware` too (EC2's list shipped
with fmcluster, and types read from EC2 since), which itself builds on the catalog.
"""

from __future__ import annotations

import difflib

from fmcluster.catalog import instance_names
from fmcluster.catalog.hardware import known_instance_type, known_instance_types
from fmcluster.catalog.type_names import COMMON_EC2_TYPES, is_valid_ec2_type_name


def suggest_instance(name: str) -> str | None:
    """Did-you-mean for an instance type name: the closest catalog or common EC2 type, or ``None``.

    Catalog names win ties. An exact (case-insensitive) match is returned as itself.
    """
    query = name.strip().lower()
    if not query:
        return None
    catalog = instance_names()
    candidates = list(dict.fromkeys([*catalog, *COMMON_EC2_TYPES, *known_instance_types()]))
    if query in candidates:
        return query
    best: str | None = None
    best_score = 0.0
    for cand in candidates:
        score = difflib.SequenceMatcher(None, query, cand).ratio()
        if cand in catalog:
            score += 1e-6  # prefer catalog entries on ties
        if score > best_score:
            best, best_score = cand, score
    return best if best_score >= 0.75 else None



def instance_type_problem(name: str) -> str | None:
    """Why ``name`` cannot be an instance type (with the likeliest meant one), or None when AWS sells it as far as
    fmcluster knows: the catalog, EC2's list shipped with fmcluster, or a DescribeInstanceTypes answer read since
    (a type newer than the shipped list)."""
    if known_instance_type(name):
        return None
    message = f"unknown instance type '{name}'"
    suggestion = suggest_instance(name)
    if suggestion and suggestion != name:
        message += f" (did you mean '{suggestion}'?)"
    if is_valid_ec2_type_name(name):
        message += ("; it is not in EC2's list of instance types that fmcluster ships, nor read from EC2 since (if "
                    "AWS sells it now, run once with an AWS endpoint: credentials, --endpoint-url or --sandbox)")
    return message
