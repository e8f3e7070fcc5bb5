#!/usr/bin/env bash
# The main job: train a digits model with 2 TF nodes on an embedded local Spark cluster,
# export it and score the test split with distributed inference. Extra arguments go to
# examples/mnist/mnist_tf.py (e.g. --master spark://host:7077 --epochs 30).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
exec "$VENV/bin/python" examples/mnist/mnist_tf.py "$@"
