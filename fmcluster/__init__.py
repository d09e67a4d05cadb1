"""fmcluster: one short YAML spec in, a foundation-model training cluster on AWS out."""

__version__ = "0.1.0"
