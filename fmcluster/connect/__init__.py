"""Living with a running cluster: reach its login (or head) node over ssh, smoke-test it with a Slurm job,
and read its logs. Each backend says where its login node is (``login_node(session)``); the rest is shared."""
