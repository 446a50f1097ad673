"""Load generation: Locust drives the traffic, ddbench times every stream itself.

    locustfile.py   the Locust user (standalone: locust -f loadtests/locustfile.py --host URL)
    client.py       one streamed chat request -> one RequestRecord (raw timings only)
    sse.py          server-sent events from bytes as they arrive
    plan.py         which prompt each request sends, and when (open loop)
    recorder.py     per-process JSONL record files, flushed per record
    coordinate.py   Locust glue: user indices, end of cell, records over Locust messages
    cpu.py          CPU sampling of the Locust processes
    cell.py         run one cell headless (the orchestrator's entry point)
    webui.py        Locust's web UI with our options, records under results/adhoc/
    liveweb.py      the UI's LLM view; the servers it switches come from the orchestration
    nullserver.py   a streaming server with a known chunk schedule, for tests and accuracy
    accuracy.py     the accuracy and throughput benchmarks against the null server
    peer.py         the same workload through guidellm, for a side-by-side check
"""
