#!/usr/bin/env bash
# The wheels of proctor's dependencies that the GPU machine's image lacks, for scripts/gpu_check.sh to carry there
# (it reaches no network; at most 64 MiB travel with a run). Run it here, where pip reaches PyPI:
#
#   scripts/gpu_wheels.sh [DIR]        # DIR: gpu-wheels (git-ignored); prints DIR/check.json and DIR's size
#
# DIR gets: the wheels (CPython 3.12, x86-64 Linux) of the packages that proctor needs and the image lacks, resolved
# by pip against the image's known versions (scripts/gpu_deps.py: the image's list); fallback/, pure-Python wheels of
# image packages whose version there is unknown (gpu_check.sh installs one only where the image's conflicts);
# build/, setuptools and wheel with their requirements, to build proctor's editable install offline; check.json, whether the image plus
# DIR satisfies proctor, with what is missing. With GPU_WHEELS_SMOLLM2=1 it also saves SmolLM2-135M-Instruct's
# config and tokenizer (from ../shared/models) into DIR/smollm2-shape: its weights (98 MB as GGUF) do not fit, so
# gpu_check.sh builds a model of the same shape with random weights for its timing step.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-gpu-wheels}
PY=${PYTHON:-python}
LIMIT_MIB=60  # under the 64 MiB a run carries, leaving room for the repository's untracked files
TARGET=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
"$PY" scripts/gpu_deps.py missing >"$stage/requirements.txt"
"$PY" scripts/gpu_deps.py constraints >"$stage/constraints.txt"
echo "proctor's requirements the image lacks: $(tr '\n' ' ' <"$stage/requirements.txt")"
# with their dependencies, resolved against the image's known versions; the image's own packages are then dropped
"$PY" -m pip download -q --no-cache-dir -d "$stage/all" "${TARGET[@]}" -c "$stage/constraints.txt" \
    -r "$stage/requirements.txt"
rm -rf "$DIR"
mkdir -p "$DIR/build"
"$PY" scripts/gpu_deps.py select "$stage/all" "$DIR"
# the isolated build env sees none of the image's packages: the build requirements come with their own
"$PY" -m pip download -q --no-cache-dir -d "$DIR/build" "${TARGET[@]}" "setuptools>=68" wheel

if [ "${GPU_WHEELS_SMOLLM2:-0}" = 1 ]; then
    "$PY" - "$DIR/smollm2-shape" <<'EOF'
import sys
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer

folder = Path("../shared/models/smollm2-135m-instruct")
gguf = next(folder.glob("*.gguf")).name
AutoConfig.from_pretrained(folder, gguf_file=gguf).save_pretrained(sys.argv[1])
AutoTokenizer.from_pretrained(folder, gguf_file=gguf).save_pretrained(sys.argv[1])
EOF
fi

status=0
"$PY" scripts/gpu_deps.py check --image --wheels "$DIR" >"$DIR/check.json" || status=$?
cat "$DIR/check.json"
mib=$(du -sm "$DIR" | cut -f1)
echo "$DIR: $(find "$DIR" -name '*.whl' | wc -l) wheels, ${mib} MiB (limit ${LIMIT_MIB})"
if [ "$mib" -gt "$LIMIT_MIB" ]; then
    echo "error: $DIR is ${mib} MiB, over ${LIMIT_MIB} MiB: it would not travel with a run" >&2
    exit 1
fi
exit "$status"
