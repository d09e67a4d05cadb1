"""A Kubernetes API emulator for the sandbox's EKS clusters (``/k8s/<cluster name>/…`` on the sandbox port)."""

from fmcluster_sandbox.kube.api import KubeApi

__all__ = ["KubeApi"]
