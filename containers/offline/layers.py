"""The bundle layers: what each carries, what it leaves to the GPU machine's image, and how it is trimmed.

A layer's pins live in `<layer>.in` (top-level requirements) and `<layer>.lock` (every wheel,
exact version and sha256). This module holds the rules that are not pins: which packages the
image already has (never carried, unless the version matters), and which files of a wheel are
dropped because nothing the run starts imports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The GPU host image's Python packages, as read on a machine running it on 2026-11-17. Versions are not
# all known: a package listed here is left to the image unless a layer carries it anyway (Layer.carry), and
# containers/offline/device.py checks on the device that every carried wheel's requirements are met by what is there.
IMAGE_PACKAGES = frozenset("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt
jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx
onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split())

# the target: the GPU machine's python3 (CPython 3.12.3, glibc x86_64)
PYTHON_VERSION = "3.12"
# pip does not widen a --platform it is given, so every older manylinux tag is listed
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(39, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "any"]

# one call copies at most 64 MiB; the tracked tree is about 41 MB of it
DEFAULT_PART_SIZE = 20_000_000


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Trim:
    """Drop the files of one distribution that match `drop` and no `keep` (fnmatch on the installed path)."""

    dist: str
    drop: tuple[str, ...]
    keep: tuple[str, ...] = ()
    why: str = ""

    def removes(self, path: str) -> bool:
        return any(fnmatchcase(path, g) for g in self.drop) and not any(fnmatchcase(path, g) for g in self.keep)


@dataclass(frozen=True)
class Layer:
    name: str
    # True: the lock is the whole dependency closure of <layer>.in, less what the image or a
    # layer below provides. False: the lock is exactly <layer>.in (a closure that is mostly
    # unused at run time, as SGLang's, is listed by hand from what start-up imports).
    closure: bool
    # image packages carried anyway, each with the reason its version matters
    carry: dict[str, str] = field(default_factory=dict)
    # taken without their Requires-Dist closure (a closure layer still resolves the rest of its .in)
    alone: tuple[str, ...] = ()
    # layers unpacked with this one whose packages it does not carry again
    below: tuple[str, ...] = ()
    trims: tuple[Trim, ...] = ()
    # modules the device imports right after unpacking: a missing package fails there, not mid-run
    smoke: tuple[str, ...] = ()
    # the largest part, or the largest of each part in turn (the last repeating): archive.part_sizes
    part_size: int | tuple[int, ...] = DEFAULT_PART_SIZE

    @property
    def requirements(self) -> Path:
        return HERE / f"{self.name}.in"

    @property
    def lockfile(self) -> Path:
        return HERE / f"{self.name}.lock"

    @property
    def manifest(self) -> Path:
        return HERE / f"{self.name}.manifest.json"

    def provided(self) -> frozenset[str]:
        """Distributions this layer leaves to the image (canonical names)."""
        return frozenset(IMAGE_PACKAGES - {canonical(n) for n in self.carry})

    def trims_for(self, dist: str) -> tuple[Trim, ...]:
        return tuple(t for t in self.trims if canonical(t.dist) == canonical(dist))


HARNESS = Layer(
    name="harness",
    closure=True,
    carry={
        "typing-extensions": "pydantic 2.14 and pydantic-core need >=4.16.0",
        "requests": "locust 2.47 needs >=2.33.1",
        "werkzeug": "flask 3.1 needs >=3.1.0",
        "click": "flask 3.1 needs >=8.1.3",
        "anyio": "fastapi needs >=4.1 and starlette <5",
        "jinja2": "flask 3.1 needs >=3.1.2",
        "h11": "wsproto (python-socketio's websocket client) needs >=0.16.0",
    },
    smoke=("pydantic", "fastapi", "uvicorn", "locust", "gevent", "zmq", "geventhttpclient"),
)

SGLANG = Layer(
    name="sglang",
    closure=True,
    alone=("sglang", "sglang-kernel", "flashinfer-python"),
    below=("harness",),
    carry={
        "transformers": "SGLang 0.5.17 pins 5.12.1 and refuses the image's 5.17 (config registration)",
        "tokenizers": "transformers 5.12.1 needs <=0.23.0; the image has 0.23.2",
    },
    trims=(
        Trim("sglang-kernel", drop=("sgl_kernel/*.so", "sgl_kernel/sm100/*"),
             keep=("sgl_kernel/sm90/common_ops*", "sgl_kernel/spatial_ops*"),
             why="Hopper only: sm90 common_ops; FA3 flash_ops (1.7 GB) and FlashMLA are loaded lazily, "
                 "never with triton attention"),
        # sgl_kernel's rmsnorm is flashinfer's, compiled by its JIT on first use (nvcc on the device):
        # its sources and headers travel; CUTLASS's and CCCL's examples, tests, docs and Python do not
        Trim("flashinfer-python",
             drop=("flashinfer/data/cutlass/examples/*", "flashinfer/data/cutlass/python/*",
                   "flashinfer/data/cutlass/test/*", "flashinfer/data/cutlass/tools/*",
                   "flashinfer/data/cccl/benchmarks/*", "flashinfer/data/cccl/docs/*",
                   "flashinfer/data/cccl/python/*"),
             keep=("flashinfer/data/cutlass/tools/util/include/*",),
             why="the JIT's sources and include dirs stay; examples, tests, docs and CUTLASS's Python go"),
        Trim("sglang", drop=("sglang/multimodal_gen/*", "sglang/jit_kernel/diffusion/*", "sglang/srt/grpc/_core*"),
             why="diffusion serving and the Rust gRPC server: no module that launch_server's HTTP path "
                 "imports reaches them (static import closure, function-level imports included)"),
        Trim("zstandard", drop=("zstandard/_cffi*", "zstandard/backend_cffi.py"),
             why="the CFFI backend: on CPython zstandard imports its C extension (backend_c)"),
        Trim("torch-memory-saver", drop=("torch_memory_saver_hook_mode_*.so",),
             keep=("torch_memory_saver_hook_mode_*_cu13.*",),
             why="it loads the build for torch's CUDA major: 13 on the H200 (cu12 and ROCm builds dropped)"),
        # not libtvm_ffi_testing.so: tvm_ffi.registry loads it at import (the H200 smoke import failed without it)
        Trim("apache-tvm-ffi", drop=("tvm_ffi/3rdparty/libbacktrace/*",),
             why="libbacktrace's sources; JIT builds use include/ and 3rdparty/dlpack"),
        Trim("xgrammar", drop=("xgrammar/lib/*", "xgrammar/include/*"),
             why="the static library and headers for building against xgrammar; Python loads the bindings .so"),
        Trim("jedi", drop=("jedi/third_party/typeshed/*",),
             why="type stubs for IPython's completer; IPython.display never reads them"),
    ),
    # a call carries at most 64 MiB, about 41 MB of it the tree without results/ (a device call's checkout is
    # sparse: `git sparse-checkout set --no-cone '/*' '!/results/'`): the first carries the harness (7.9 MB),
    # the sglang-ddtree layer (4.2 MB) and part 1, each later call one more part
    part_size=(13_000_000, 22_000_000),
    smoke=("sglang", "sglang.srt.server_args", "sglang.srt.entrypoints.http_server", "sgl_kernel", "flashinfer",
           "transformers", "tokenizers"),
)

LAYERS: dict[str, Layer] = {HARNESS.name: HARNESS, SGLANG.name: SGLANG}


def layer(name: str) -> Layer:
    try:
        return LAYERS[name]
    except KeyError:
        raise SystemExit(f"offline bundle: no layer {name!r}; known: {', '.join(LAYERS)}") from None
