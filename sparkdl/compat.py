"""TensorFlowOnSpark's ``compat`` module: helpers for ``map_fun`` code across TensorFlow versions.

``from sparkdl import compat`` replaces ``from tensorflowonspark import compat``; TensorFlow is
imported only when a function is called (inside a node), never by importing this module.
Defined in :mod:`sparkdl.common.tf_compat`.
"""

from .common.tf_compat import disable_auto_shard, export_saved_model, is_gpu_available, save_keras_file

__all__ = ["export_saved_model", "save_keras_file", "disable_auto_shard", "is_gpu_available"]
