"""The device plugins an EKS cluster's nodes need, at the images fmcluster pins, and the node labels that select them.

A plugin runs on the nodes carrying its label, which fmcluster puts on the queue's managed node group: selecting by
a label fmcluster sets (not by an instance-type list, which every new type outdates) means a p6-b300 or p6e-gb200
node gets its EFA plugin the day fmcluster knows the type.
"""

from __future__ import annotations

# NVIDIA/k8s-device-plugin v0.17.1: the image its deployments/static/nvidia-device-plugin.yml names at that release.
NVIDIA_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
# aws/eks-charts stable/aws-efa-k8s-device-plugin: chart v0.5.20's appVersion (Chart.yaml), the image tag it deploys.
EFA_IMAGE_TAG = "v0.5.13"
EFA_REPOSITORY = "eks/aws-efa-k8s-device-plugin"
# aws-neuron/neuron-helm-charts charts/neuron-helm-chart/values.yaml: devicePlugin.image at chart 2.28.
NEURON_IMAGE = "public.ecr.aws/neuron/neuron-device-plugin:2.28.27.0"

NVIDIA_LABEL = "fmcluster.io/nvidia-gpu"
EFA_LABEL = "fmcluster.io/efa"
NEURON_LABEL = "fmcluster.io/neuron"
QUEUE_LABEL = "fmcluster.io/queue"

# The EKS user guide, "View Amazon container image registries for Amazon EKS add-ons": the account that serves EKS's
# images in each Region; every Region not listed is 602401143452. (The page's ap-east-2 row names an ap-east-1 host;
# the account is taken from it and the host built from the Region, as for every other row.)
_EKS_IMAGE_ACCOUNTS = {
    "af-south-1": "877085696533", "ap-east-1": "800184023465", "ap-east-2": "533267051163",
    "ap-southeast-3": "296578399912", "ap-south-2": "900889452093", "ap-southeast-4": "491585149902",
    "ap-southeast-6": "333609536671", "ap-southeast-7": "121268973566", "cn-north-1": "918309763551",
    "cn-northwest-1": "961992271922", "eu-south-1": "590381155156", "eu-south-2": "455263428931",
    "eu-central-2": "900612956339", "il-central-1": "066635153087", "mx-central-1": "730335286997",
    "me-south-1": "558608220178", "me-central-1": "759879836304", "ca-west-1": "761377655185",
    "us-gov-east-1": "151742754352", "us-gov-west-1": "013241004608", "eusc-de-east-1": "877088126301",
}
_DEFAULT_EKS_IMAGE_ACCOUNT = "602401143452"


def eks_image_registry(region: str) -> str:
    """The ECR registry host EKS's own images come from in ``region``."""
    account = _EKS_IMAGE_ACCOUNTS.get(region, _DEFAULT_EKS_IMAGE_ACCOUNT)
    if region.startswith("cn-"):
        domain = "amazonaws.com.cn"
    elif region.startswith("eusc-"):
        domain = "amazonaws.eu"
    else:
        domain = "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}"


def efa_image(region: str) -> str:
    return f"{eks_image_registry(region)}/{EFA_REPOSITORY}:{EFA_IMAGE_TAG}"
