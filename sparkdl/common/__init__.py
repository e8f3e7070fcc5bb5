"""What every room may import: errors, time limits, roles, paths, GPUs, TF helpers.

Nothing here imports another room. :mod:`.errors` (every error sparkdl raises), :mod:`.timeouts`
(every time limit), :mod:`.roles` (which node is which), :mod:`.paths`, :mod:`.gpus`,
:mod:`.tf_compat` (TensorFlowOnSpark's ``compat``) and :mod:`.single_node` (its
``util.single_node_env``). Files, on the driver and the nodes alike, are :mod:`sparkdl.storage`'s.
"""
