"""`fmcluster capacity`: find, buy, list and extend EC2 Capacity Blocks for ML."""
