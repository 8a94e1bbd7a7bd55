#!/bin/bash
# The checks that need a lent GPU machine with many cores, as one script for one call:
#   device    benchmarks/device_auto.py (what `device: auto` picks, against training on each
#             device) and the GPU tests of the tianshou plugin;
#   pipeline  RL-PSRO on Leduc (dqn defaults, per_player, nash, seed 0) on Ray with $WORKERS
#             rollout workers, once per `training.pipeline` value in $PIPELINES, each stopped
#             at NashConv <= $TARGET or after $RUN_S seconds (scaling.py --rl's config).
# Run from the repository root on that machine, with $OUT the folder that comes back and
# the packages its Python lacks in .whl/: cp312 wheels (open_spiel, tianshou, pettingzoo,
# gymnasium, ...; `pip download --no-deps --only-binary=:all: --python-version 3.12`) and
# Ray as .whl/ray.tar.xz (a Ray wheel's files without ray/{rllib,jars,data,serve,train,
# tune,llm}, to fit what a call carries). Every file is written to $OUT as the checks go
# (a run's metrics.jsonl copied every 5 s), so a call cut off by its time limit still
# brings back what was measured.
#
#   CHECKS="device pipeline" PIPELINES="4 1" WORKERS=8 RUN_S=240 bash benchmarks/device_checks.sh
set -u
CHECKS=${CHECKS:-"device pipeline"} PIPELINES=${PIPELINES:-"4 1"} WORKERS=${WORKERS:-8}
RUN_S=${RUN_S:-240} TARGET=${TARGET:-0.5} OUT=${OUT:?set OUT to the folder that comes back}
T0=$(date +%s)
export PYTHONPATH=/tmp/site PYTHONHASHSEED=0 PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
mkdir -p /tmp/site
[ -f .whl/ray.tar.xz ] && tar -xJf .whl/ray.tar.xz -C /tmp/site
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site \
    . plugins/popmarl-solvers plugins/popmarl-openspiel plugins/popmarl-tianshou plugins/popmarl-ray 2>&1 | tail -2
echo "installed after $(( $(date +%s) - T0 )) s on $(nproc) CPUs"

if [[ " $CHECKS " == *" device "* ]]; then
    python3 benchmarks/device_auto.py --steps 8000 > "$OUT/device_auto.txt" 2>&1
    python3 -m pytest -q -p no:cacheprovider tests/plugins/tianshou/test_device_auto.py \
        tests/plugins/tianshou/test_tianshou_device.py > "$OUT/gpu_tests.txt" 2>&1
    tail -1 "$OUT/gpu_tests.txt"
fi

if [[ " $CHECKS " == *" pipeline "* ]]; then
    for k in $PIPELINES; do
        config=/tmp/pipeline$k.yaml run=/tmp/runs/pipeline$k
        python3 - "$k" "$WORKERS" "$RUN_S" "$TARGET" "$config" <<'PY'
import argparse, sys, yaml
sys.path.insert(0, "benchmarks")
import scaling
k, workers, seconds, target, path = sys.argv[1:]
args = argparse.Namespace(game="leduc_poker", seed=0, address=None, seconds=float(seconds), target=float(target))
yaml.safe_dump(scaling.rl_config(args, int(k), int(workers)), open(path, "w"))
PY
        python3 -m popmarl.cli run "$config" --out "$run" > "$OUT/pipeline$k.log" 2>&1 &
        pid=$!
        while kill -0 $pid 2>/dev/null; do
            sleep 5; cp "$run/metrics.jsonl" "$OUT/pipeline$k.jsonl" 2>/dev/null
        done
        cp "$run/metrics.jsonl" "$OUT/pipeline$k.jsonl" 2>/dev/null
        python3 - "$OUT/pipeline$k.jsonl" "$TARGET" <<'PY'
import json, sys
lines = [json.loads(line) for line in open(sys.argv[1])]
reached = next((line["wall_time_s"] for line in lines if line["nash_conv"] <= float(sys.argv[2])), None)
print(f"{sys.argv[1]}: {len(lines)} iterations, NashConv {lines[-1]['nash_conv']:.3f} at "
      f"{lines[-1]['wall_time_s']:.0f} s; <= {sys.argv[2]} at {reached if reached is None else round(reached)} s")
PY
    done
fi
echo "done after $(( $(date +%s) - T0 )) s"
