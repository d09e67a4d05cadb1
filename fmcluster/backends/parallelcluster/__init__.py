"""AWS ParallelCluster 3: the lifecycle class in ``backend``, what generic code knows by name in ``profile``."""
