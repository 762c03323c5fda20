#!/usr/bin/env bash
# Issue 30's many-clip scaling table, one row per call, on a lent GPU machine (mjlab backend, 4096 envs):
#
#   MIMIC_RL_DATA=DATA tools/gpu_scaling.sh OUT_DIR CLIPS SECONDS [extra mimic-rl train options]
#
# trains one policy on the CLIPS shortest clips of DATA/motions/g1_moves (by frame count; 1, 3, 6 and 12 give the
# table's rows, the 6 being those of its 6-clip row) for SECONDS of training (--time-budget; then the final
# evaluation), evaluating every clip from its first frame every 25 iterations (2.46 M env steps at 4096 envs), and
# writes to OUT_DIR: train.log, evals.jsonl, eval.json (the final evaluation), config.yaml, history.txt and
# reached.json (tools/eval_history.py: the env steps at which the mean success first reached 0.8, per clip-second)
# and the last checkpoint in 15 MiB parts (model_<N>.pt.part00, ...: a call brings back files of at most 16 MiB, a
# checkpoint of 4096 envs is ~20 MB).
#
# The run lives in RUN_DIR (default /tmp/mimic_scaling/g1_<CLIPS>), its clips beside it in clips_<CLIPS> (the paths
# its config.yaml names). A second call on the same warm machine continues it (--resume); on a fresh machine, carry
# an earlier OUT_DIR's files and pass RESUME_FROM=that folder: the checkpoint's parts are joined into RUN_DIR and the
# run continues from there. The exit code is the training's.
#
# A lent machine: one command runs at most 600 s, and mjlab compiles its warp kernels for ~90 s at the start, so
# SECONDS of ~380 should fit a call with timeout_s 560 (not yet timed; a 6-clip evaluation took 4-15 s on an H100).
# mjlab and its stack travel as the parts of ../shared/tools/offline-gpu/build.sh, one per call, then unpack.sh PARTS
# SITE and export PYTHONPATH=SITE:. MUJOCO_GL=disable; copy ../shared/data/motions/g1_moves (10 MB) into a carried
# folder and point MIMIC_RL_DATA at the folder above its motions/.
#
# ENV, NUM_ENVS and DEVICE override mjlab:MimicRL-Tracking-G1, 4096 and cuda: e.g. a dry run on this CPU with the
# embedded env, ENV=mujoco NUM_ENVS=32 DEVICE=cpu tools/gpu_scaling.sh OUT 3 60 --robot g1 --robot-mjcf
# $MIMIC_RL_DATA/robots/unitree_g1/g1.xml --set runner.eval_interval=2 --eval-envs 2. Run it from the repository
# root (it runs this checkout's mimic_rl, installed or not: `python -c ... main()` rather than the mimic-rl script).
set -uo pipefail
out=${1:?usage: tools/gpu_scaling.sh OUT_DIR CLIPS SECONDS [train options]}
count=${2:?usage: tools/gpu_scaling.sh OUT_DIR CLIPS SECONDS [train options]}
seconds=${3:?usage: tools/gpu_scaling.sh OUT_DIR CLIPS SECONDS [train options]}
shift 3
moves="${MIMIC_RL_DATA:?set MIMIC_RL_DATA to the folder above motions/}/motions/g1_moves"
run=${RUN_DIR:-/tmp/mimic_scaling/g1_$count}
clips=$(dirname "$run")/clips_$count
[[ -d $moves ]] || { echo "$moves: no such folder; copy ../shared/data/motions/g1_moves there" >&2; exit 2; }
[[ $count =~ ^[0-9]+$ && $count -ge 1 && $count -le 24 ]] || { echo "CLIPS: expected 1 to 24, got $count" >&2; exit 2; }
[[ $seconds =~ ^[0-9]+$ && $seconds -ge 1 ]] || { echo "SECONDS: expected a whole number, got $seconds" >&2; exit 2; }
mkdir -p "$out" "$clips"

# the CLIPS shortest clips (one CSV line per frame), ties by name
mapfile -t chosen < <(for f in "$moves"/*.csv; do echo "$(wc -l <"$f") $(basename "$f")"; done | sort -k1,1n -k2 |
    head -n "$count" | awk '{print $2}')
[[ ${#chosen[@]} -eq $count ]] || { echo "$moves: holds ${#chosen[@]} clips, fewer than $count" >&2; exit 2; }
rm -f "$clips"/*.csv
for name in "${chosen[@]}"; do cp "$moves/$name" "$clips/"; done

resume=()
if [[ -n ${RESUME_FROM:-} && ! -e $run/config.yaml ]]; then  # a fresh machine: join the carried checkpoint's parts
    part0=$(ls "$RESUME_FROM"/model_*.pt.part00 2>/dev/null | head -n 1)
    [[ -n $part0 ]] || { echo "$RESUME_FROM: RESUME_FROM: expected model_<N>.pt.part00 there" >&2; exit 2; }
    mkdir -p "$run"
    cp "$RESUME_FROM/config.yaml" "$RESUME_FROM/evals.jsonl" "$run/"
    cat "${part0%.part00}".part* >"$run/$(basename "${part0%.part00}")"
fi
ls "$run"/model_*.pt >/dev/null 2>&1 && resume=(--resume)

echo "clips (${#chosen[@]}): ${chosen[*]}" | tee -a "$out/train.log"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | tee -a "$out/train.log"
PYTHONUNBUFFERED=1 python -c 'import sys; from mimic_rl.cli import main; sys.exit(main())' train "${resume[@]}" \
    --env "${ENV:-mjlab:MimicRL-Tracking-G1}" --csv-fps 60 \
    --num-envs "${NUM_ENVS:-4096}" --device "${DEVICE:-cuda}" --iterations 100000 --time-budget "$seconds" \
    --motion "$clips" --set runner.eval_interval=25 --log-dir "$run" "$@" > >(tee -a "$out/train.log") 2>&1
status=$?
echo "train exit code $status" | tee -a "$out/train.log"

cp "$run/config.yaml" "$out/" 2>/dev/null
cp "$run/evals.jsonl" "$out/" 2>/dev/null
cp "$run/eval.json" "$out/" 2>/dev/null  # the final evaluation (with each clip's error over time)
python tools/eval_history.py "$run" --json "$out/reached.json" 2>&1 | tee "$out/history.txt"
last=$(ls "$run"/model_*.pt 2>/dev/null | sed 's/.*model_\([0-9]*\)\.pt/\1/' | sort -n | tail -n 1)
if [[ -n $last ]]; then
    rm -f "$out"/model_*.pt.part*
    split -b 15m -d "$run/model_$last.pt" "$out/model_$last.pt.part"
fi
ls -la "$out"
exit "$status"
