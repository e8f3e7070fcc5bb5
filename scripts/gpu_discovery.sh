#!/usr/bin/env bash
# A Spark GPU discovery script: prints {"name": "gpu", "addresses": [...]} with the GPUs nvidia-smi
# lists, as Spark's examples/src/main/scripts/getGpusResources.sh does (the pip pyspark package
# does not ship that one). Use it as spark.worker.resource.gpu.discoveryScript (standalone) or
# spark.executor.resource.gpu.discoveryScript (YARN, Kubernetes).
#
# gpu_discovery.sh --claim DIR: for several Spark workers on one machine (local-cluster), each run
# takes one GPU, the next in turn (a claim is an atomic mkdir under DIR), so the workers get
# distinct GPUs while there are enough and share them round-robin after that. Spark runs a
# discovery script without arguments: call this from a two-line wrapper script.
set -euo pipefail

mapfile -t gpus < <(nvidia-smi --query-gpu=index --format=csv,noheader,nounits | tr -d ' ')
if [[ ${#gpus[@]} -gt 0 && "${1:-}" == "--claim" ]]; then
  claims="${2:?--claim needs a directory}"
  mkdir -p "$claims"
  claim=0
  until mkdir "$claims/claim$claim" 2>/dev/null; do claim=$((claim + 1)); done
  gpus=("${gpus[$((claim % ${#gpus[@]}))]}")
fi
addresses=""
for gpu in "${gpus[@]}"; do addresses+="${addresses:+, }\"$gpu\""; done
echo "{\"name\": \"gpu\", \"addresses\": [$addresses]}"
