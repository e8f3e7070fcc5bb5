"""TensorFlowOnSpark's ``util.single_node_env``: set up this process for single-node TensorFlow.

For code that runs TensorFlow itself inside a Spark task rather than in a sparkdl node. Defined in
:mod:`sparkdl.common.single_node`.
"""

from .common.single_node import single_node_env

__all__ = ["single_node_env"]
