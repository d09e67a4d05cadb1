"""AWS PCS: the lifecycle class in ``backend``, what generic code knows by name in ``profile``."""
