"""Code the two Slurm backends (PCS, ParallelCluster) share; it names neither."""
