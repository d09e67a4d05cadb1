"""Fixtures several of this folder's test files use, registered here rather than imported into each: the in-process
Kubernetes API (``server``, ``k8s``: tests/fixtures/kube.py) and the EKS emulator's ``world``
(tests/fixtures/sandbox_eks.py). test_sandbox_pcs.py defines a ``server`` of its own (the PCS API's), which wins
there."""

from fixtures.kube import k8s, server  # noqa: F401 - registered as fixtures
from fixtures.sandbox_eks import world, world_handles  # noqa: F401 - registered as fixtures
