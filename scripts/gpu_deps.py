"""Which of proctor's dependencies a Python environment lacks, and whether a folder of wheels fills the gap.

    python scripts/gpu_deps.py missing                 # proctor's requirements the GPU image lacks (pip -r format)
    python scripts/gpu_deps.py constraints             # the image's known versions (pip -c format)
    python scripts/gpu_deps.py select STAGE DIR        # copy STAGE's wheels the image lacks into DIR, the pure-Python
                                                       # ones of image packages of unknown version into DIR/fallback
    python scripts/gpu_deps.py check --image --wheels DIR   # here: would the image plus DIR's wheels satisfy proctor?
    python scripts/gpu_deps.py check [--wheels DIR]    # there: this interpreter's packages (plus DIR's wheels)

`scripts/gpu_wheels.sh` and `scripts/gpu_check.sh` call it. The requirements are proctor's `[project]
dependencies` (pyproject.toml), then, recursively, the Requires-Dist of every wheel that provides one, markers
evaluated for the target (with `--image`: CPython 3.12 on x86-64 Linux, the GPU image; else this interpreter) and
extras followed where the provider's metadata is at hand. A requirement is met by a wheel of the folder, else by
an installed distribution: with `--image`, `IMAGE` (the GPU image's packages as its notes list them, with the
versions they give); else what this interpreter imports. `check` prints one JSON object (`ok`, `missing`,
`conflicts`: a provider whose version is outside the specifier, `unverified`: an image package of unknown
version, `fallback`: the DIR/fallback wheels that would fix a conflict) and exits 1 when not ok.
"""

from __future__ import annotations

import argparse
import email.parser
import importlib.metadata
import json
import re
import shutil
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
#: the GPU machine's image (/work/.library/device/KINDS.md, 'Python packages already there', 2026-11-17), with
#: the versions its 'pip list' row gives; None: there, version unknown
_KNOWN = {"accelerate": "1.15.0", "huggingface-hub": "1.33.0", "numpy": "2.5.2", "safetensors": "0.8.0",
          "tokenizers": "0.23.2", "torch": "2.11.0", "transformers": "5.17.0", "triton": "3.6.0",
          "sentencepiece": "0.2.2", "tiktoken": "0.14.0", "torchvision": "0.26.0", "torchaudio": "2.11.0"}
_NAMES = """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite
lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas
nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink
nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum
opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks
pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn
scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
zipp"""
IMAGE: dict[str, str | None] = {canonicalize_name(n): _KNOWN.get(n) for n in _NAMES.split()}
#: the GPU image's interpreter, for markers
IMAGE_ENV = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
             "implementation_name": "cpython", "platform_python_implementation": "CPython", "sys_platform": "linux",
             "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix"}


@dataclass
class Dist:
    """A distribution that can provide a requirement: its version and its own requirements."""

    name: str
    version: str | None
    requires: list[str] = field(default_factory=list)
    source: str = "installed"
    metadata: bool = True  # False: an image package known by name only (its requirements are not at hand)


def proctor_requirements() -> list[Requirement]:
    """proctor's core dependencies, as pyproject.toml declares them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def wheel_name(path: Path) -> str:
    """A wheel file's distribution name, normalized."""
    return canonicalize_name(path.name.split("-")[0])


def read_wheel(path: Path) -> Dist:
    """A wheel's name, version and Requires-Dist, from its METADATA."""
    with zipfile.ZipFile(path) as zf:
        meta = next(n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        msg = email.parser.Parser().parsestr(zf.read(meta).decode())
    return Dist(canonicalize_name(msg["Name"]), msg["Version"], msg.get_all("Requires-Dist") or [], str(path))


def installed() -> dict[str, Dist]:
    """What this interpreter imports (the first of each name on sys.path, as import does)."""
    out: dict[str, Dist] = {}
    for d in importlib.metadata.distributions():
        name = canonicalize_name(d.metadata["Name"] or "")
        out.setdefault(name, Dist(name, d.version, d.requires or []))
    return out


def image() -> dict[str, Dist]:
    """The GPU image's packages, by name, with the versions known."""
    return {n: Dist(n, v, metadata=False, source="image") for n, v in IMAGE.items()}


def wheels(folder: Path | None) -> dict[str, Dist]:
    """The wheels directly in `folder` (not its subfolders), by name."""
    found = [read_wheel(p) for p in sorted(folder.glob("*.whl"))] if folder else []
    return {d.name: d for d in found}


def applies(req: Requirement, env: dict[str, str], extras: set[str]) -> bool:
    """Whether `req`'s marker holds for the target, for any of the extras asked for (or none)."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": e}) for e in (extras or {""}))


def check(providers: dict[str, Dist], env: dict[str, str]) -> dict:
    """Walk proctor's requirements through `providers` (module docstring)."""
    missing, conflicts, unverified = [], [], set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(r, "proctor") for r in proctor_requirements()]
    while todo:
        req, by = todo.pop()
        name = canonicalize_name(req.name)
        dist = providers.get(name)
        if dist is None:
            missing.append(f"{req} (for {by})")
            continue
        if dist.version is None:
            unverified.add(name)
        elif not req.specifier.contains(Version(dist.version), prereleases=True):
            conflicts.append({"requirement": str(req), "for": by, "name": name, "has": dist.version,
                              "from": dist.source})
        key = (name, frozenset(req.extras))
        if key in seen or not dist.metadata:
            continue
        seen.add(key)
        for line in dist.requires:
            sub = Requirement(line)
            if applies(sub, env, set(req.extras)):
                todo.append((sub, f"{name} {dist.version}"))
    unique = {json.dumps(c, sort_keys=True): c for c in conflicts}
    return {"missing": sorted(set(missing)), "conflicts": list(unique.values()), "unverified": sorted(unverified)}


def cmd_missing() -> None:
    for req in proctor_requirements():
        if canonicalize_name(req.name) not in IMAGE:
            print(req)


def cmd_constraints() -> None:
    for name, version in sorted(IMAGE.items()):
        if version is not None:
            print(f"{name}=={version}")


def cmd_select(stage: Path, out: Path) -> None:
    """STAGE's wheels of packages the image lacks into OUT; pure-Python wheels of image packages whose version
    is unknown into OUT/fallback (installed there only when the image's own version conflicts)."""
    (out / "fallback").mkdir(parents=True, exist_ok=True)
    for whl in sorted(stage.glob("*.whl")):
        name = wheel_name(whl)
        if name not in IMAGE:
            shutil.copy2(whl, out / whl.name)
        elif IMAGE[name] is None and whl.name.endswith("-none-any.whl"):
            shutil.copy2(whl, out / "fallback" / whl.name)


def cmd_check(use_image: bool, folder: Path | None) -> int:
    base = image() if use_image else installed()
    providers = {**base, **wheels(folder)}
    report = check(providers, IMAGE_ENV if use_image else default_environment())
    fallback = wheels(folder / "fallback") if folder else {}
    conflicted = {c["name"] for c in report["conflicts"]}
    report["fallback"] = sorted(fallback[n].source for n in conflicted if n in fallback)
    report["ok"] = not report["missing"] and not report["conflicts"]
    report["against"] = "the GPU image's package list" if use_image else sys.executable
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("missing")
    sub.add_parser("constraints")
    sel = sub.add_parser("select")
    sel.add_argument("stage", type=Path)
    sel.add_argument("out", type=Path)
    chk = sub.add_parser("check")
    chk.add_argument("--image", action="store_true", help="against the GPU image's package list, not this Python")
    chk.add_argument("--wheels", type=Path, help="a folder of wheels that will be installed too")
    args = ap.parse_args(argv)
    if args.cmd == "missing":
        cmd_missing()
    elif args.cmd == "constraints":
        cmd_constraints()
    elif args.cmd == "select":
        cmd_select(args.stage, args.out)
    else:
        return cmd_check(args.image, args.wheels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
