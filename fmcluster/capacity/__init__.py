"""``fmcluster capacity``: Capacity Blocks for ML, found, bought, listed and extended (EC2's Capacity Block APIs)."""
