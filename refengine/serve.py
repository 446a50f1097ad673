"""`python -m refengine.serve`: the reference engine behind SGLang's launch flags and HTTP API.

    python -m refengine.serve --model-path models/ddbench-tiny-target \\
        --speculative-algorithm DDTREE --speculative-draft-model-path models/ddbench-tiny-dflash-b16 \\
        --speculative-ddtree-budget 15 --port 30000 --enable-metrics   # top-k from SGLANG_DDTREE_MAX_TOPK

Flags keep SGLang's names, so ddbench drives both backends with one command builder.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from contextlib import asynccontextmanager

import torch

from refengine.server.stats import log_line

DTYPES = {"auto": None, "float32": torch.float32, "float": torch.float32, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "half": torch.float16}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m refengine.serve", description=__doc__.split("\n")[0])
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--tokenizer-path", help="default: the model path")
    ap.add_argument("--served-model-name", help="default: the model path")
    ap.add_argument("--speculative-algorithm", default="NONE", type=str.upper, choices=["NONE", "DFLASH", "DDTREE"])
    ap.add_argument("--speculative-draft-model-path")
    ap.add_argument("--speculative-dflash-block-size", "--speculative-num-draft-tokens", type=int,
                    dest="block_size", help="default: the drafter's block_size")
    ap.add_argument("--speculative-ddtree-budget", type=int, help="tree nodes, root excluded; default block - 1")
    ap.add_argument("--speculative-ddtree-topk", type=int,
                    help="children per node at most; default $SGLANG_DDTREE_MAX_TOPK, else 1 (a chain)")
    ap.add_argument("--max-running-requests", type=int, default=16)
    ap.add_argument("--context-length", type=int, help="default: the target's max_position_embeddings")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--enable-metrics", action="store_true")
    ap.add_argument("--disable-cuda-graph", action="store_true")
    ap.add_argument("--decode-log-interval", type=int, default=40)
    ap.add_argument("--dtype", default="auto", choices=sorted(DTYPES))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0, help="seed for requests that bring none")
    args = ap.parse_args(argv)
    if args.speculative_algorithm != "NONE" and not args.speculative_draft_model_path:
        ap.error(f"--speculative-algorithm {args.speculative_algorithm} needs --speculative-draft-model-path")
    if args.max_running_requests < 1:
        ap.error("--max-running-requests must be >= 1")
    return args


def make_plan(args, drafter_block: int | None):
    from refengine.plan import Plan

    if args.speculative_algorithm == "NONE":
        return Plan("ar")
    block = args.block_size or drafter_block
    if args.speculative_algorithm == "DFLASH":
        return Plan("linear", block_size=block)
    budget = args.speculative_ddtree_budget or block - 1
    topk = args.speculative_ddtree_topk or int(os.environ.get("SGLANG_DDTREE_MAX_TOPK", "1"))
    bonus = float(os.environ.get("SGLANG_DDTREE_DEPTH_BONUS", "0"))
    if topk == 1:
        return Plan("chain", budget=budget, topk=1, depth_bonus=bonus)
    return Plan("tree", budget=budget, topk=topk, depth_bonus=bonus)


def build(args):
    """Load the pair, the tokenizer and the engine; return (app, scheduler)."""
    from refengine.drafter import Drafter
    from refengine.engine import Engine, verify_width
    from refengine.layers import fuse
    from refengine.model import Target
    from refengine.sampling import Sampling
    from refengine.server.app import ServerInfo, build_app
    from refengine.server.runner import BatchRunner
    from refengine.server.scheduler import Scheduler
    from refengine.server.stats import Metrics
    from refengine.tokenizer import Tokenizer

    dtype = DTYPES[args.dtype] or (torch.bfloat16 if args.device.startswith("cuda") else torch.float32)
    target = fuse(Target.from_pretrained(args.model_path, dtype=dtype, device=args.device))
    drafter = None
    if args.speculative_algorithm != "NONE":
        drafter = fuse(Drafter.from_pretrained(args.speculative_draft_model_path, dtype=dtype, device=args.device))
    plan = make_plan(args, drafter.block_size if drafter else None)
    context = args.context_length or target.config.max_position_embeddings
    engine = Engine(target, drafter, capacity=context + verify_width(plan), batch=args.max_running_requests,
                    graphs=not args.disable_cuda_graph and args.device.startswith("cuda"))
    runner = BatchRunner(engine, plan, context)
    tokenizer = Tokenizer.from_pretrained(args.tokenizer_path or args.model_path)
    name = args.served_model_name or args.model_path
    scheduler = Scheduler(runner, Metrics(name), args.max_running_requests, args.decode_log_interval)
    info = ServerInfo(model_name=name, model_path=args.model_path, context_length=context,
                      args={k: v for k, v in vars(args).items()}, enable_metrics=args.enable_metrics)
    app = build_app(scheduler, tokenizer, info, Sampling)
    return app, scheduler, plan


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%Y-%m-%d %H:%M:%S")
    torch.manual_seed(args.seed)
    app, scheduler, plan = build(args)

    @asynccontextmanager
    async def lifespan(_app):
        scheduler.start()
        app.state.ready = True
        print(log_line(f"The server is fired up and ready to roll! arm={plan}"), flush=True)
        yield
        app.state.ready = False
        scheduler.stop()

    app.router.lifespan_context = lifespan
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=3, lifespan="on")
    uvicorn.Server(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
