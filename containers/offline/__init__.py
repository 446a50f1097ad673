"""Bundles of Python packages for a GPU machine (an H100 or H200) with no network and no Docker.

Each layer (`harness`, `sglang`, ...) is pinned in `<layer>.lock`, built here from PyPI wheels
into one deterministic tar.xz under `.offline/<layer>/` (split into parts that fit one call's
copy limit), described by `<layer>.manifest.json`, and unpacked on the device by `setup.sh`.
"""
