"""What the backends' smoke tests share, naming no backend: the checks and the report (:mod:`.checks`), nccl-tests
output (:mod:`.nccl`), and SIGTERM/SIGHUP ending a run as Ctrl-C does, so its job is cancelled (:mod:`.termination`).
What each backend runs is its own (``fmcluster/backends/eks/smoke/``, ``fmcluster/backends/slurm/smoke.py``)."""
