"""The shape of ``queues[].burn_in`` (issue 37): a level, or a level with the queue's own all-reduce floors.

The rules that need the whole queue (defaults, floors against the hardware) live in :mod:`fmcluster.spec.burn_in`,
which imports the models; this module is imported by them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from fmcluster.spec.field_types import Strict

Level = Literal["quick", "standard", "long", "off"]
LEVELS: tuple[Level, ...] = ("quick", "standard", "long", "off")
# The levels whose checks include an all-reduce across nodes, judged against a floor.
NCCL_LEVELS: tuple[Level, ...] = ("standard", "long")


def _off_from_yaml(value: Any) -> Any:
    """YAML 1.1 reads a bare ``off`` (and ``no``, ``false``) as false: that is the level off, as written."""
    return "off" if value is False else value


BurnInLevel = Annotated[Level, BeforeValidator(_off_from_yaml)]
# strict: a bare true is not a bandwidth; an integer is.
GbPerSecond = Annotated[float, Field(strict=True, gt=0)]


class BurnIn(Strict):
    level: BurnInLevel | None = Field(
        None, description="quick, standard, long or off; omitted: the queue's default (see queues[].burn_in).")
    floors: dict[int, GbPerSecond] = Field(
        default_factory=dict,
        description="All-reduce bus bandwidth floors in GB/s (nccl-tests' busbw) per node count, e.g. {2: 380}: "
        "they replace the catalog's floor at that node count. Each must be at or below what the hardware can "
        "carry over EFA (plan and the error say the ceiling), for a node count from 2 to the queue's maximum.")
