"""TensorFlowOnSpark-compatible entry point: ``from sparkdl import TFCluster; TFCluster.run(...)``."""

from .driver.arguments import InputMode
from .driver.cluster import TFCluster
from .driver.run import run

__all__ = ["InputMode", "TFCluster", "run"]
