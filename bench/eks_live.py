"""The EKS live check lives with the tests (tests/fixtures/live_eks.py: tests must not import bench/); the benchmarks
import it from here as before."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.live_eks import eks_problems, eks_token  # noqa: E402,F401
