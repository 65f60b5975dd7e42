#!/usr/bin/env bash
# The prepared GPU check (issue 39, item 6): one command, at most 10 minutes on one H200, run whenever a GPU is lent.
#
#   scripts/gpu_wheels.sh                      # here, once: the wheels the GPU image lacks, into gpu-wheels/
#   scripts/gpu_check.sh                       # there, from the repository root, with gpu-wheels carried
#   GPU_CHECK_DRY=1 scripts/gpu_check.sh       # anywhere: every step at a tiny size, without CUDA (the test)
#
# Settings: GPU_CHECK_STEPS (default "machine install tests quickstart smollm2": the steps to run, in that order),
# GPU_CHECK_QS_SCALE (the quickstart's --scale: 1.0, dry 0.02), GPU_CHECK_BUDGET_S (570), GPU_CHECK_CAP_SCALE (a
# whole number multiplying every step's cap, for a slow machine: 1), GPU_CHECK_WORK (the work folder, .gpu-check),
# GPU_CHECK_WHEELS (gpu-wheels), GPU_CHECK_SMOLLM2_MODEL (step 5's model folder), PYTHON (python3).
#
# Steps, each under a time cap that keeps the whole under GPU_CHECK_BUDGET_S (570 s):
#   1. the machine: nvidia-smi, torch and its CUDA, the packages;
#   2. proctor installed into .gpu-check/site: the carried wheels, then `pip install --no-deps -e .` built
#      offline, then scripts/gpu_deps.py's check of every requirement (a conflicting image package gets its
#      fallback wheel);
#   3. tests/gpu (OMP_NUM_THREADS=4 python -m pytest -q tests/gpu), with a JUnit record;
#   4. the household quickstart on CUDA (`proctor quickstart`), its wall time and its stage times;
#   5. PLACEHOLDER: one iteration of the SmolLM2 household loop on CUDA with bf16 autocast, when its config is in
#      the repository.
# Everything goes under .gpu-check/ (git-ignored) and $OUT (default .gpu-check/out): gpu_check.json (every step's
# status, exit code and seconds, the machine, the dependency check, the quickstart's table and stage times) and
# the logs. No step writes outside the repository and $OUT (caches and temporary files included). A failed step is
# recorded and the next one runs; the exit code is 1 when any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DRY=${GPU_CHECK_DRY:-0}
PY=${PYTHON:-python3}
WORK=${GPU_CHECK_WORK:-$ROOT/.gpu-check}
OUT=${OUT:-$WORK/out}
BUDGET_S=${GPU_CHECK_BUDGET_S:-570}
WHEELS=${GPU_CHECK_WHEELS:-$ROOT/gpu-wheels}
STEPS=${GPU_CHECK_STEPS:-machine install tests quickstart smollm2}
QS_SCALE=${GPU_CHECK_QS_SCALE:-$([ "$DRY" = 1 ] && echo 0.02 || echo 1.0)}
CAP_SCALE=${GPU_CHECK_CAP_SCALE:-1}
SITE=$WORK/site
START=$(date +%s)

rm -rf "$SITE" "$WORK/runs" "$WORK/tmp" "$WORK/pytest" "$WORK/steps.jsonl"
mkdir -p "$OUT" "$WORK/tmp" "$WORK/cache" "$WORK/runs"
export TMPDIR=$WORK/tmp XDG_CACHE_HOME=$WORK/cache HF_HOME=$WORK/cache/huggingface MPLCONFIGDIR=$WORK/cache/mpl \
    TRITON_CACHE_DIR=$WORK/cache/triton TORCHINDUCTOR_CACHE_DIR=$WORK/cache/inductor PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=$SITE:$ROOT/src${PYTHONPATH:+:$PYTHONPATH} PATH=$SITE/bin:$PATH
[ "$DRY" = 1 ] && export CUDA_VISIBLE_DEVICES=""  # the dry run checks the steps, never the device

# step NAME CAP_S FUNCTION: run FUNCTION (exported, in its own bash; stdout and stderr into $OUT/NAME.log) under the
# smaller of CAP_S and the budget left; one line of JSON per step into $WORK/steps.jsonl
step() {
    local name=$1 cap=$2
    shift 2
    local left=$((BUDGET_S - ($(date +%s) - START)))
    cap=$((cap * CAP_SCALE))
    local limit=$((cap < left ? cap : left))
    if [ "$limit" -le 5 ]; then
        echo "{\"step\": \"$name\", \"status\": \"not run: the budget is spent\"}" >>"$WORK/steps.jsonl"
        return
    fi
    echo "== $name (at most ${limit} s)"
    local t0 rc ms seconds status
    t0=$(date +%s%N)
    timeout --kill-after=10 "$limit" bash -c "$*" >"$OUT/$name.log" 2>&1
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    seconds=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
    case $rc in 0) status=passed ;; 124 | 137) status="timed out after ${limit} s" ;; *) status=failed ;; esac
    echo "   $status, rc $rc, ${seconds} s"
    echo "{\"step\": \"$name\", \"status\": \"$status\", \"rc\": $rc, \"seconds\": $seconds}" >>"$WORK/steps.jsonl"
}

machine() {
    nvidia-smi || echo "(no nvidia-smi)"
    "$PY" -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda,
'available', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    "$PY" -m pip list --format freeze 2>/dev/null
    if [ "$DRY" != 1 ] && ! "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
        echo "error: torch sees no CUDA device (GPU_CHECK_DRY=1 runs the steps without one)"
        return 1
    fi
}

install() {
    set -e
    if [ "$DRY" = 1 ]; then
        # this interpreter has proctor's dependencies already; the carried wheels are for the GPU image's Python
        echo "dry run: the wheels are not installed here; proctor's editable install is built as there"
    else
        [ -d "$WHEELS" ] || { echo "error: no $WHEELS: run scripts/gpu_wheels.sh here and carry gpu-wheels"; exit 1; }
        "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl
    fi
    local build=(--no-index --find-links "$WHEELS/build")  # setuptools and wheel for the isolated build, offline
    [ "$DRY" = 1 ] && [ ! -d "$WHEELS/build" ] && build=(--no-build-isolation)
    "$PY" -m pip install -q "${build[@]}" --no-deps --target "$SITE" -e "$ROOT"
    set +e
    local ok fixes
    if [ "$DRY" = 1 ]; then
        "$PY" scripts/gpu_deps.py check >"$WORK/deps.json"
    else
        "$PY" scripts/gpu_deps.py check --wheels "$WHEELS" >"$WORK/deps.json"
    fi
    ok=$?
    fixes=$("$PY" -c "import json, sys; print(' '.join(json.load(open(sys.argv[1]))['fallback']))" "$WORK/deps.json")
    if [ -n "$fixes" ]; then
        echo "the image's versions conflict; installing the fallback wheels: $fixes"
        # shellcheck disable=SC2086  # one path per word
        "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" --upgrade $fixes || return 1
        "$PY" scripts/gpu_deps.py check >"$WORK/deps.json"
        ok=$?
    fi
    cat "$WORK/deps.json"
    "$PY" -c "import proctor.cli, pydantic, fastapi, datasets; print('proctor imports from', proctor.__file__)" || return 1
    return $ok
}

gpu_tests() {
    OMP_NUM_THREADS=4 "$PY" -m pytest -q tests/gpu -p no:cacheprovider --basetemp "$WORK/pytest" \
        --junitxml "$OUT/tests.xml"
}

quickstart() {
    "$PY" -m proctor quickstart --out "$WORK/runs/quickstart" --scale "$QS_SCALE"
}

# --- step 5: PLACEHOLDER -------------------------------------------------------------------------------------
# One iteration of a SmolLM2 loop on CUDA with bf16 autocast (`precision: auto`, float32 master weights). Its
# config, examples/household/smollm2.yaml, is being written by another helper: until it is in the repository the
# step records "skipped". The override keeps the config's stages and sizes and sets only `out`, `iterations: 1`
# and the model. SmolLM2's weights cannot travel (98 MB as GGUF, about 270 MB in bf16, over the 64 MiB a run
# carries), so unless GPU_CHECK_SMOLLM2_MODEL names a folder there, the model is SmolLM2-135M's shape with random
# weights, built from gpu-wheels/smollm2-shape (GPU_WHEELS_SMOLLM2=1 scripts/gpu_wheels.sh): its stage times and
# memory are SmolLM2's, its success rates mean nothing. The dry run validates the override with the config's own
# model path (`--dry-run`: nothing is built or run).
# TODO(lead): size the override so that this step fits the budget left after step 4, once the config exists.
smollm2_loop() {
    local config=$ROOT/examples/household/smollm2.yaml
    if [ ! -f "$config" ]; then
        echo "skipped: $config is not in the repository yet"
        return 0
    fi
    local model=${GPU_CHECK_SMOLLM2_MODEL:-}
    if [ -z "$model" ] && [ "$DRY" = 1 ]; then
        model=$("$PY" -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['model']['path'])" "$config")
    elif [ -z "$model" ]; then
        [ -f "$WHEELS/smollm2-shape/config.json" ] || { echo "error: no SmolLM2 model: set GPU_CHECK_SMOLLM2_MODEL" \
            "or carry gpu-wheels/smollm2-shape (GPU_WHEELS_SMOLLM2=1 scripts/gpu_wheels.sh)"; return 1; }
        model=$WORK/smollm2-random
        "$PY" - "$WHEELS/smollm2-shape" "$model" <<'EOF' || return 1
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

shape, out = sys.argv[1:]
torch.manual_seed(0)
AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(shape), dtype=torch.bfloat16).save_pretrained(out)
AutoTokenizer.from_pretrained(shape).save_pretrained(out)
print("random-weight SmolLM2-135M shape:", out)
EOF
    fi
    "$PY" - "$config" "$WORK/smollm2.yaml" "$WORK/runs/smollm2" "$model" <<'EOF' || return 1
import sys

import yaml

config, override, out, model = sys.argv[1:]
data = yaml.safe_load(open(config))
data.update(out=out, iterations=1)
data["model"] = {**(data.get("model") or {}), "path": model}
yaml.safe_dump(data, open(override, "w"), sort_keys=False)
EOF
    if [ "$DRY" = 1 ]; then
        "$PY" -m proctor run "$WORK/smollm2.yaml" --dry-run
    else
        "$PY" -m proctor run "$WORK/smollm2.yaml"
    fi
}

export ROOT DRY PY WORK OUT WHEELS SITE QS_SCALE
export -f machine install gpu_tests quickstart smollm2_loop
for name in $STEPS; do
    case $name in
        machine) step machine 60 machine ;;
        install) step install 120 install ;;
        tests) step tests 240 gpu_tests ;;
        quickstart) step quickstart 330 quickstart ;;
        smollm2) step smollm2 600 smollm2_loop ;;
        *) echo "error: unknown step $name in GPU_CHECK_STEPS" >&2; exit 2 ;;
    esac
done

"$PY" - "$WORK" "$OUT" "$DRY" "$(($(date +%s) - START))" <<'EOF'
import json
import sys
from pathlib import Path

work, out, dry, wall = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])


def read(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def stage_seconds(run: Path) -> dict | None:
    manifest = read(run / "manifest.json")
    return {k: v.get("seconds") for k, v in manifest["stages"].items()} if manifest else None


steps = [json.loads(line) for line in (work / "steps.jsonl").read_text().splitlines()]
summary = read(work / "runs" / "quickstart" / "summary.json")
record = {"dry_run": dry, "wall_s": wall, "steps": steps, "dependencies": read(work / "deps.json"),
          "quickstart": {"stage_seconds": stage_seconds(work / "runs" / "quickstart"), "summary": summary},
          "smollm2": {"stage_seconds": stage_seconds(work / "runs" / "smollm2")}}
(out / "gpu_check.json").write_text(json.dumps(record, indent=1))
print(json.dumps({"wall_s": wall, "steps": steps}, indent=1))
sys.exit(0 if all(s.get("status") == "passed" for s in steps) else 1)
EOF
