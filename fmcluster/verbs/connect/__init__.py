"""Living with a running cluster: reach its login (or head) node over ssh or its Kubernetes API through a kubeconfig,
smoke-test it (a Slurm job over ssh, or an MPIJob through an EKS cluster's scheduler), and read its logs. Each
backend says where its login node or API is (``login_node(context)``, ``kube_access(context)``); the rest is shared."""
