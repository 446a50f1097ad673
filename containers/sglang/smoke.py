"""The SGLang+DDTree image's smoke check, run inside the image at build time (no GPU needed).

    python3 smoke.py COMMANDS_JSON OUT_JSON --need-sm 90,100,120

Fails the build (exit 1) unless:
- DDTREE resolves through SGLang's own SpeculativeAlgorithm.from_string;
- the DDTree worker module imports;
- the installed sglang, sglang-kernel, flashinfer, torch and transformers are the pin's (--expect);
- every command line in COMMANDS_JSON (each shipped SGLang profile's, arm by arm, as ddbench
  generates it) parses with the image's own ServerArgs parser, and the speculative values read
  back as given;
- sglang-kernel's common ops carry SASS for every SM in --need-sm (what every attention backend
  runs: norms, activations, sampling), and triton's bundled ptxas can compile for each of them
  (the triton attention backend that DDTree verify needs is JIT-compiled).
The GPU architectures of every compiled file of sglang-kernel and flashinfer are listed, read
from the files (gpuarch.py). The result goes to OUT_JSON, which the build also labels the image with.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import importlib.util
import json
import platform
import re
import subprocess
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpuarch  # noqa: E402

SPEC_FLAGS = {"--speculative-algorithm": "speculative_algorithm",
              "--speculative-ddtree-budget": "speculative_ddtree_budget",
              "--speculative-num-draft-tokens": "speculative_num_draft_tokens"}


def check_algorithm() -> str:
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    return str(SpeculativeAlgorithm.from_string("DDTREE"))


def check_worker() -> str:
    mod = importlib.import_module("sglang.srt.speculative.ddtree_worker")
    return mod.__file__


def parse_commands(commands: list[dict]) -> list[dict]:
    from sglang.srt.server_args import ServerArgs

    out = []
    for c in commands:
        argv = c["argv"]
        args = argv[argv.index("sglang.launch_server") + 1:] if "sglang.launch_server" in argv else argv
        parser = argparse.ArgumentParser(prog=f"{c['profile']}/{c['arm']}", exit_on_error=False)
        ServerArgs.add_cli_args(parser)
        rec = {"profile": c["profile"], "arm": c["arm"]}
        try:
            ns = parser.parse_args(args)
        except (argparse.ArgumentError, SystemExit) as e:
            out.append({**rec, "ok": False, "error": str(e) or "SGLang's parser exited"})
            continue
        wrong = {}
        for flag, dest in SPEC_FLAGS.items():
            if flag in args:
                given = args[args.index(flag) + 1]
                if str(getattr(ns, dest, None)) != given:
                    wrong[flag] = {"given": given, "parsed": str(getattr(ns, dest, None))}
        out.append({**rec, "ok": not wrong, **({"misread": wrong} if wrong else {})})
    return out


def package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    return Path(spec.submodule_search_locations[0]) if spec else None


def version(name: str) -> str | None:
    """An installed distribution's version; None for one the release no longer needs (flashinfer-cubin: 0.5.17's
    flashinfer-python 0.6.15 no longer requires it)."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def ptxas_archs() -> dict:
    exe = package_dir("triton") / "backends" / "nvidia" / "bin" / "ptxas"
    text = subprocess.run([str(exe), "--help"], capture_output=True, text=True).stdout
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    return {"path": str(exe), "version": version[0] if version else "?",
            "sm": sorted({int(m) for m in re.findall(r"\bsm_(\d+)a?\b", text)})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="smoke.py")
    ap.add_argument("commands", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--need-sm", default="90,100,120")
    ap.add_argument("--expect", default="", help="name=version,...: the pin's versions, each must be installed")
    a = ap.parse_args(argv)
    need = sorted(int(x) for x in a.need_sm.split(","))
    doc: dict = {"python": platform.python_version(), "need_sm": need, "failures": []}
    doc["versions"] = {n: version(n) for n in ("sglang", "sglang-kernel", "flashinfer-python", "flashinfer-cubin",
                                               "torch", "triton", "transformers")}
    for item in filter(None, a.expect.split(",")):
        name, _, want = item.partition("=")
        got = doc["versions"].get(name) or version(name)
        if got is None or got.split("+")[0] != want:  # a local tag (+cu130) names the same release
            doc["failures"].append(f"{name} {got or 'not'} is installed, the pin says {want}")
    for name, fn in (("ddtree_algorithm", check_algorithm), ("ddtree_worker", check_worker)):
        try:
            doc[name] = fn()
        except Exception as e:  # noqa: BLE001 - every failure is reported, the build then fails
            doc[name] = None
            doc["failures"].append(f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")
    doc["commands"] = parse_commands(json.loads(a.commands.read_text()))
    doc["failures"] += [f"{c['profile']}/{c['arm']}: {c.get('error') or c.get('misread')}"
                        for c in doc["commands"] if not c["ok"]]
    kernels = gpuarch.scan([package_dir("sgl_kernel")])
    cubin_dir = package_dir("flashinfer_cubin")   # absent: flashinfer JIT-compiles what it runs
    cubins = gpuarch.scan([cubin_dir]) if cubin_dir else {}
    doc["sgl_kernel_sm"] = {Path(k).relative_to(package_dir("sgl_kernel")).as_posix(): v for k, v in kernels.items()}
    doc["flashinfer_cubin_sm"] = {"files": len(cubins), "sass": gpuarch.union(cubins)}
    common = {k: v for k, v in doc["sgl_kernel_sm"].items() if "common_ops" in k}
    for sm in need:
        if not any(sm in v["sass"] for v in common.values()):
            doc["failures"].append(f"sglang-kernel common_ops has no SASS for sm_{sm}: {common}")
    doc["ptxas"] = ptxas_archs()
    for sm in need:
        if sm not in doc["ptxas"]["sm"]:
            doc["failures"].append(f"triton's ptxas ({doc['ptxas']['version']}) cannot target sm_{sm}")
    doc["ok"] = not doc["failures"]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: doc[k] for k in ("ok", "ddtree_algorithm", "need_sm", "failures")}, indent=1))
    print(f"{sum(c['ok'] for c in doc['commands'])}/{len(doc['commands'])} command lines parse")
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
