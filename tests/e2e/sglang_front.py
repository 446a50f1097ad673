"""A reference-engine server that describes itself as the pinned SGLang does: a front that answers
/get_server_info and /server_info with every ServerArgs field of the pinned DDTree fork (its flag table in
containers/sglang/flags), valued from the command line ddbench would launch for the arm and resolved as SGLang
resolves a DFLASH or DDTREE one, plus the scheduler's fields, the running state and the version; everything
else (chat, /metrics, /flush_cache, /health) goes to the reference engine behind it, so the tokens, timings and
counters are real. It demands SGLang's --api-key as a bearer token, as SGLang does.

    python tests/e2e/sglang_front.py --upstream URL --port PORT --info INFO.json
"""

import argparse
import json

from containers.sglang_flags import load_table, parser, server_argv

VERSION = "0.5.17"
# what a 1-GPU deployment of the shipped pair reports of its KV pool (a figure, not a flag)
TOKEN_CAPACITY, MAX_INPUT = 1_048_576, 40_954


def field(flag: dict) -> str:
    """The ServerArgs field a flag sets: its first long name, as SGLang derives flags from fields."""
    return flag["names"][0].lstrip("-").replace("-", "_")


def resolve(args: dict) -> dict:
    """SGLang's speculative normalisation (arg_groups/speculative_hook.py): a DFLASH server reports its block as
    speculative_num_draft_tokens, a DDTREE one also, with a budget of block - 1 unless given."""
    algo = (args.get("speculative_algorithm") or "").upper()
    if algo in ("DFLASH", "DDTREE"):
        block = args.get("speculative_ddtree_block_size") if algo == "DDTREE" else None
        block = block or args.get("speculative_dflash_block_size") or args.get("speculative_num_draft_tokens") or 16
        args.update(speculative_num_draft_tokens=int(block), speculative_dflash_block_size=None,
                    speculative_eagle_topk=1, speculative_num_steps=1)
        if algo == "DDTREE" and args.get("speculative_ddtree_budget") is None:
            args["speculative_ddtree_budget"] = int(block) - 1
    return args


def server_info(argv: list[str], table_name: str) -> dict:
    """/server_info of SGLang started with argv: the dataclass's fields, the scheduler's, and the version."""
    table = load_table(table_name)
    ns = vars(parser(table).parse_args(server_argv(argv)))
    args = resolve({field(f): ns[f"f{i}"] for i, f in enumerate(table["flags"])})
    return {**args, "max_total_num_tokens": TOKEN_CAPACITY, "max_req_input_len": MAX_INPUT,
            "internal_states": [{**args, "memory_usage": {"weight": 0.03, "kvcache": 0.5,
                                                          "token_capacity": TOKEN_CAPACITY, "graph": 0.1},
                                 "effective_max_running_requests_per_dp": args.get("max_running_requests")}],
            "version": VERSION}


def app(upstream: str, info: dict):
    import httpx
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    api = FastAPI()
    client = httpx.AsyncClient(base_url=upstream, timeout=None)
    key = info.get("api_key")

    @api.middleware("http")
    async def auth(request: Request, call_next):
        if key and request.url.path != "/health" and request.headers.get("authorization") != f"Bearer {key}":
            return JSONResponse({"error": "Unauthorized"}, 401)
        return await call_next(request)

    @api.get("/get_server_info")
    @api.get("/server_info")
    async def described():
        live = (await client.get("/server_info")).json().get("internal_states", [{}])[0]
        states = [{**info["internal_states"][0], **{k: v for k, v in live.items() if k.endswith("accept_length")}}]
        return {**info, "internal_states": states}

    @api.api_route("/{path:path}", methods=["GET", "POST"])
    async def forward(path: str, request: Request):
        req = client.build_request(request.method, "/" + path, content=await request.body(),
                                   headers={"content-type": request.headers.get("content-type", "")})
        r = await client.send(req, stream=True)
        return StreamingResponse(r.aiter_raw(), r.status_code, media_type=r.headers.get("content-type"),
                                 background=_closer(r))

    return api


def _closer(r):
    from starlette.background import BackgroundTask

    return BackgroundTask(r.aclose)


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--info", required=True, help="the self-description to answer with (server_info's output)")
    a = ap.parse_args()
    with open(a.info) as f:
        info = json.load(f)
    uvicorn.run(app(a.upstream, info), host="127.0.0.1", port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
