# ddbench's front door. Recipes stay thin: the logic lives in Python modules.
# PROFILE is a shipped profile's name (cpu-tiny) or a path to a YAML file.

set positional-arguments := true

# the project virtualenv (made by ./setup) comes first on PATH, when there is one
export PATH := justfile_directory() / ".venv/bin:" + env_var("PATH")
# recipes run at the repository root; a path typed from a subdirectory resolves against the directory it was typed in
export DDBENCH_CALLER_DIR := invocation_directory()

default:
    @just --list

# install system packages (TeX, Docker, Chromium) and the Python environment
setup *ARGS:
    @./setup "$@"

# validate a profile and print its plan: cells, requests, each arm's launch command
check PROFILE *ARGS:
    @python3 -m ddbench check "$@"

# write a commented profile from a model pair (--target, --drafter), the GPUs (--gpus) and an engine, then check it
init *ARGS:
    @python3 -m ddbench init "$@"

# the whole study: bring up each arm, run every cell, analyze, write the PDF
reproduce PROFILE="cpu-tiny" *ARGS:
    @python3 -m ddbench reproduce "$@"

# download the pinned wheels for an offline image build (VARIANT: cpu, cuda, or sglang)
wheelhouse VARIANT="cpu":
    @python3 -m containers.wheelhouse --variant "$1"

# an offline Python bundle for a GPU machine without network (LAYER: harness, sglang, sglang-ddtree with DDTREE_FORK_GIT=a clone of the fork): -> .offline/LAYER/ (carry it)
offline-bundle LAYER:
    @python3 -m containers.offline.bundle build "$1"

# build an image: base, base-py312, refengine-cpu|cuda, sglang-local|blackwell|hopper (sglang-*: --fork-git DIR)
build IMAGE *ARGS:
    @python3 -m containers.images build "$@"

# SGLang+DDTree of the one pin in a CPython 3.12 venv, for a GPU host without Docker
sglang-venv VENV FORK_GIT *WHEELHOUSE:
    @sh containers/sglang/install.sh "$@"

# the drafter diagnosis of a run (the tree's headroom over the chain), offline on the CPU: -> RUN_DIR/tables/headroom_*.csv
headroom RUN_DIR *ARGS:
    @python3 -m analysis.headroom "$@"

# lossless at T>0 on the reference engine: each arm's law of the first k sampled tokens against AR's exact law (G-test, stated power, a planted bug that must fail), offline on the CPU: -> RUN_DIR/tables/lossless_sampling.csv
lossless RUN_DIR *ARGS:
    @python3 -m analysis.sampling_law "$@"

# bring one arm's server up and leave it running
up PROFILE ARM *ARGS:
    @python3 -m ddbench up "$@"

# stop every ddbench server (containers labelled ddbench=1, local processes we started)
down *ARGS:
    @python3 -m ddbench down "$@"

# servers you run, in one line: --arm ar=http://h:30000 --arm linear-b16=http://h:30001 [--concurrency 1,8,32]
bench *ARGS:
    @python3 -m ddbench bench "$@"

# one headless cell against an arm
load PROFILE ARM CONCURRENCY *ARGS:
    @python3 -m ddbench load "$@"

# Locust's web UI on 127.0.0.1:8089 against an arm, for ad-hoc load
ui PROFILE *ARGS:
    @python3 -m ddbench ui "$@"

# raw results -> tables/ (tidy tables, comparisons, trust checks)
analyze RUN_DIR *ARGS:
    @python3 -m ddbench analyze "$@"

# do analysed runs of one profile agree? per ratio: both intervals and verdicts (two runs), the run effect over all
agreement RUN_A RUN_B *MORE:
    @python3 -m analysis.agreement "$@"

# tables -> report.pdf
report RUN_DIR *ARGS:
    @python3 -m ddbench report "$@"

# gzip a finished run's records, scrapes, logs and telemetry (what a committed run keeps)
pack RUN_DIR:
    @python3 -m ddbench pack "$@"

# re-run a committed run's T=0, C=1 cells here and compare tokens and tau
verify RUN_DIR *ARGS:
    @python3 -m ddbench verify "$@"

# retrain the shipped model pair (on a CUDA GPU, about 10 minutes on an H200) from the same seeds
train-models *ARGS:
    @if [ $# -eq 0 ]; then set -- all --size h200 --seed 1234; fi; python3 -m ddbench train-models "$@"

# a model pair of a real shape (qwen3-8b, tiny-twin) that computes the shipped pair's predictions: -> .twins/SHAPE-sSEED (bf16; a GPU makes the 8B's seeded weights fast)
twin SHAPE *ARGS:
    @python3 -m refengine.twin "$@"

# the engine's own benchmark: tokens/s per arm at C=1, ratios to AR, per-step costs
bench-engine *ARGS:
    @python3 -m refengine.bench "$@"

# every test that needs no GPU (GPU tests are skipped with their reason)
test *ARGS:
    @python3 -m pytest tests "$@"

lint:
    ruff check .
    mypy
    find containers -name 'Dockerfile*' -print0 | xargs -0 -r hadolint

# remove caches and ad-hoc results (committed runs stay)
clean:
    rm -rf .pytest_cache .ruff_cache .mypy_cache .benchmarks results/adhoc
    find . -name __pycache__ -not -path './.venv/*' -prune -exec rm -rf {} +
