"""The pure pieces the burn-in gate (issue 37) will call: readers of the real tools' outputs (``dcgmi diag -j``,
``fi_info -p efa``, ``nvidia-smi -L``) and the narrowing of a slow all-reduce to its node or link. Nothing here
runs a tool, calls AWS or names a backend; floors and level durations are catalog facts
(:mod:`fmcluster.catalog.nccl_floors`, :mod:`fmcluster.catalog.burn_in_levels`)."""
