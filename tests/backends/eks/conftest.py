"""Fixtures several of this folder's test files use, registered here rather than imported into each: an EKS cluster
in the sandbox for fmcluster's Kubernetes code (``cluster``, ``ctx``: tests/fixtures/eks_kube.py) and one for
``fmcluster smoke`` (``smoke_cluster``, ``api``: tests/fixtures/eks_smoke.py). Both clusters are module-scoped: each
test file that asks for one gets its own."""

from fixtures.eks_kube import cluster, ctx  # noqa: F401 - registered as fixtures
from fixtures.eks_smoke import api, smoke_cluster  # noqa: F401 - registered as fixtures
