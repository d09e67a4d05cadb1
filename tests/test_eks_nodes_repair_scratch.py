

def test_status_lists_the_conditions_the_agent_sets_false() -> None:
    """A Node as the EKS node monitoring agent leaves it after a GPU fault (node-health-nma.adoc: condition
    AcceleratedHardwareReady, reason NvidiaXID79Error), typed by hand: status lists that condition, not the healthy
    ones nor the kubelet's Ready. The sandbox's Nodes carry only Ready (their status cannot be written), so this
    is read from a literal Node."""
    from fmcluster.backends.eks.cluster_view import unhealthy

    node = {"metadata": {"name": "ip-10-0-1-5.ec2.internal"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady"},
        {"type": "KernelReady", "status": "True", "reason": "KernelIsReady"},
        {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79Error",
         "lastTransitionTime": "2026-12-05T10:00:00Z"}]}}
    assert unhealthy(node) == [{"node": "ip-10-0-1-5.ec2.internal", "condition": "AcceleratedHardwareReady",
                                "reason": "NvidiaXID79Error", "since": "2026-12-05T10:00:00Z"}]
    node["status"]["conditions"][0]["status"] = "False"  # NotReady is the kubelet's, reported apart
    node["status"]["conditions"][2]["status"] = "True"
    assert unhealthy(node) == []
