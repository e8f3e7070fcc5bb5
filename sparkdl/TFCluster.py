"""TensorFlowOnSpark-compatible entry point: ``from sparkdl import TFCluster; TFCluster.run(...)``."""

from .driver.cluster import InputMode, TFCluster, run

__all__ = ["InputMode", "TFCluster", "run"]
