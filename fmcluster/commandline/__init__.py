"""What the ``fmcluster`` command line needs besides its commands: global options anywhere on the line,
help without type tags, and shell completion of cluster and queue names."""
