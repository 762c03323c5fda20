#!/usr/bin/env bash
# Issue 15's GPU measurements in one command, on a machine with CUDA:
#
#   MIMIC_RL_DATA=/path/to/data tools/gpu_benchmarks.sh OUT_DIR [SECONDS]
#
# It runs the CUDA tests, the storage and PPO benchmarks on the GPU (4096 envs), the launch counts, and the mjlab
# side by side (mimic-rl train against mjlab's own rsl_rl runner on mjlab's G1 tracking task, SECONDS of wall time
# each, default 240), and writes every output to OUT_DIR. Run it from the repository root.
#
# A lent GPU machine without PyPI access: build the bundle here with ../shared/tools/offline-gpu/build.sh PARTS,
# carry the parts over one per call, then unpack.sh PARTS SITE and export PYTHONPATH=SITE:. MUJOCO_GL=disable.
# Copy the clips it needs (motions/g1/B_HandsUp.npz) into a carried folder and point MIMIC_RL_DATA at it.
#
# STEPS picks what runs (default: all of "tests bench counts mjlab"). A lent machine allows 10 minutes per call, and
# all of it takes longer (mjlab's side by side alone: ~90 s of warp compile, then SECONDS per runner): run one step
# per call there, e.g. STEPS=tests, then STEPS="bench counts", then STEPS=mjlab, into the same OUT_DIR.
# Issue 30's many-clip scaling rows (a training run per row): tools/gpu_scaling.sh.
set -uo pipefail
out=${1:?usage: tools/gpu_benchmarks.sh OUT_DIR [SECONDS]}
seconds=${2:-240}
steps=" ${STEPS:-tests bench counts mjlab} "
mkdir -p "$out"
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA here'; print(torch.cuda.get_device_name())" \
    | tee "$out/device.txt" || exit 1
if [[ $steps == *" tests "* ]]; then
    python -m pytest -q tests/test_cuda.py tests/test_mjlab_task.py -k "cuda or CUDA" 2>&1 | tee "$out/tests.txt"
fi
if [[ $steps == *" bench "* ]]; then
    python tools/bench_storage.py --device cuda --repeats 9 --envs 4096 1024 2>&1 | tee "$out/bench_storage.txt"
    python tools/bench_ppo.py --device cuda --envs 4096 --repeats 9 2>&1 | tee "$out/bench_ppo.txt"
fi
if [[ $steps == *" counts "* ]]; then
    python tools/count_ops.py 2>&1 | tee "$out/count_ops.txt"
fi
if [[ $steps == *" mjlab "* ]]; then
    motion="${MIMIC_RL_DATA:?set MIMIC_RL_DATA}/motions/g1/B_HandsUp.npz"
    python tools/compare_mjlab.py --device cuda --num-envs 4096 --seconds "$seconds" --motion "$motion" \
        --output "$out/mjlab" 2>&1 | tee "$out/compare_mjlab.txt"
fi
echo "wrote $out"
