#!/usr/bin/env bash
# Slurm: run the passes on every module under DIR in an array of shards, one `hloopt run --shard K/N`
# per task, each writing its modules into the one mirrored tree OUT (default out/).
#
#   jobid=$(sbatch --parsable examples/ci/hloopt-slurm-array.sh DIR [OUT])
#   sbatch --dependency=afterany:"$jobid" --wrap 'hloopt report merge reports/shard-*.json -o report.json'
#
# hloopt must be on the PATH where the tasks run; it is not on PyPI, so install it from its repository
# (pinned to a tag or commit), e.g. into the environment the script is submitted from:
#   python -m pip install "hloopt @ git+https://github.com/<owner>/hloopt@<rev>"
#
# The merge exits 1 if any shard had a failure and 2 if a shard's report is missing. K counts from
# 1 whether the array is --array=1-8 or --array=0-7 (K is the task's place in the array); N is the
# array's size, so change --array alone to change the number of shards (no step, like 0-14:2).
#SBATCH --job-name=hloopt
#SBATCH --array=1-8
#SBATCH --cpus-per-task=4
#SBATCH --time=01:00:00
#SBATCH --output=hloopt-%A_%a.log
set -euo pipefail

modules=${1:?usage: sbatch hloopt-slurm-array.sh DIR [OUT]}
out=${2:-out}
passes=${HLOOPT_PASSES:-all}
reports=${HLOOPT_REPORTS:-reports}

index=$((SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1))
mkdir -p "$reports"
exec hloopt run "$modules" --passes "$passes" -o "$out" --jobs "${SLURM_CPUS_PER_TASK:-1}" \
  --shard "$index/$SLURM_ARRAY_TASK_COUNT" --report "$reports/shard-$index.json"
