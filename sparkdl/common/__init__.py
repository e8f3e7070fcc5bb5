"""What every room may import: errors, time limits, roles, paths, GPUs, Hadoop files, TF helpers.

Nothing here imports another room. :mod:`.errors` (every error sparkdl raises), :mod:`.timeouts`
(every time limit), :mod:`.roles` (which node is which), :mod:`.paths`, :mod:`.gpus`,
:mod:`.hadoop_files`, :mod:`.tf_compat` (TensorFlowOnSpark's ``compat``) and
:mod:`.single_node` (its ``util.single_node_env``).
"""
