"""Build-time smoke check of the DDTree overlay: fail the image unless DDTREE is registered and its flags parse.

Runs inside the image with SGLang's own parser (no GPU needed): the algorithm must resolve
through SpeculativeAlgorithm.from_string, and a DDTREE command line as ddbench generates it
must parse, with the budget read back as given.
"""

import argparse
import importlib.util
import json
import sys

from sglang.srt.server_args import ServerArgs
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


def fail(msg: str) -> None:
    print(f"DDTree smoke check FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


try:
    algo = SpeculativeAlgorithm.from_string("DDTREE")
except ValueError as e:
    fail(f"DDTREE is not a registered speculative algorithm: {e}")
if importlib.util.find_spec("sglang.srt.speculative.ddtree_worker") is None:
    fail("sglang.srt.speculative.ddtree_worker is missing")

parser = argparse.ArgumentParser(prog="smoke")
ServerArgs.add_cli_args(parser)
argv = ["--model-path", "/models/target", "--speculative-algorithm", "DDTREE",
        "--speculative-draft-model-path", "/models/drafter", "--speculative-num-draft-tokens", "16",
        "--speculative-ddtree-budget", "63", "--page-size", "1", "--attention-backend", "triton",
        "--disable-overlap-schedule", "--max-running-requests", "64", "--enable-metrics"]
try:
    ns = parser.parse_args(argv)
except SystemExit:
    fail(f"SGLang's parser rejected {' '.join(argv)}")
if getattr(ns, "speculative_ddtree_budget", None) != 63:
    fail(f"--speculative-ddtree-budget 63 parsed as {getattr(ns, 'speculative_ddtree_budget', None)!r}")
print(json.dumps({"ddtree": str(algo), "flags": "ok", "budget": ns.speculative_ddtree_budget}))
