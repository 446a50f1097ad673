"""What the server says about itself: SGLang's log lines, its Prometheus metrics, and spec details.

The names and formats are SGLang's, so one parser in analysis reads both backends. SGLang's
"accept len" is committed tokens per request-step (the bonus token counts), and its accept
rate divides accepted drafts by drafts proposed; ours proposes the tree's nodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0,
                   3.0, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)


@dataclass
class RequestSpec:
    """Per-request speculative counters, reported as sglext.spec_tokens_details."""

    verify_ct: int = 0
    correct: int = 0  # accepted drafts
    proposed: int = 0  # drafts verified
    histogram: list[int] = field(default_factory=list)  # accepted drafts per step -> count
    depth_histogram: list[int] = field(default_factory=list)
    nodes: int = 0

    def add(self, accepted: int, depth: int, nodes: int) -> None:
        self.verify_ct += 1
        self.correct += accepted
        self.proposed += nodes
        self.nodes += nodes
        for hist, value in ((self.histogram, accepted), (self.depth_histogram, depth)):
            hist.extend([0] * (value + 1 - len(hist)))
            hist[value] += 1

    def details(self, completion_tokens: int) -> dict:
        steps = max(self.verify_ct, 1)
        return {
            "spec_verify_ct": self.verify_ct,
            "spec_accept_length": completion_tokens / steps,
            "spec_accept_rate": self.correct / self.proposed if self.proposed else 0.0,
            "spec_num_correct_drafts": self.correct,
            "spec_num_proposed_drafts": self.proposed,
            "spec_correct_drafts_histogram": self.histogram,
            # ours: the tree's side of every step (commit length = accepted depth + 1)
            "spec_accepted_depth_histogram": self.depth_histogram,
            "spec_avg_tree_nodes": self.nodes / steps,
        }


def log_line(text: str) -> str:
    """SGLang's logging prefix with TP = 1: `[YYYY-mm-dd HH:MM:SS] message`."""
    return f"[{datetime.now().strftime('%Y-%m-%d %H:%M:%S')}] {text}"


@dataclass
class Window:
    """Counters over one --decode-log-interval window of decode iterations."""

    iterations: int = 0
    request_steps: int = 0
    tokens: int = 0
    accepted: int = 0
    proposed: int = 0
    depth: int = 0
    nodes: int = 0
    commits: int = 0  # 1 + accepted drafts per step, before any max_tokens / stop cut
    started: float = field(default_factory=time.perf_counter)

    def decode_batch_line(self, running: int, used_tokens: int, capacity: int, queued: int, speculative: bool,
                          cuda_graph: bool) -> str:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        line = (f"Decode batch, #running-req: {running}, #token: {used_tokens}, "
                f"token usage: {used_tokens / capacity:.2f}, ")
        if speculative:
            line += f"accept len: {self.accept_length:.2f}, accept rate: {self.accept_rate:.2f}, "
        return line + (f"cuda graph: {cuda_graph}, gen throughput (token/s): {self.tokens / elapsed:.2f}, "
                       f"#queue-req: {queued}")

    def ddtree_line(self) -> str:
        n = max(self.request_steps, 1)
        return (f"DDTree window, steps: {self.request_steps}, avg tree nodes: {self.nodes / n:.2f}, "
                f"avg accepted depth: {self.depth / n:.2f}, avg commit length: {self.commits / n:.2f}")

    @property
    def accept_length(self) -> float:
        return self.tokens / self.request_steps if self.request_steps else 0.0

    @property
    def accept_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0


class Metrics:
    """/metrics in Prometheus text, with SGLang's metric names and a model_name label."""

    def __init__(self, model_name: str):
        self.registry = r = CollectorRegistry()
        label = ["model_name"]

        def gauge(name, doc):
            return Gauge(name, doc, label, registry=r, multiprocess_mode="mostrecent").labels(model_name)

        def counter(name, doc):
            return Counter(name, doc, label, registry=r).labels(model_name)

        def histogram(name, doc):
            return Histogram(name, doc, label, registry=r, buckets=LATENCY_BUCKETS).labels(model_name)

        self.running = gauge("sglang:num_running_reqs", "Running requests")
        self.queued = gauge("sglang:num_queue_reqs", "Requests waiting for a slot")
        self.token_usage = gauge("sglang:token_usage", "KV cache use, fraction")
        self.gen_throughput = gauge("sglang:gen_throughput", "Generation throughput over the last log window (token/s)")
        self.accept_length = gauge("sglang:spec_accept_length", "Committed tokens per verify step, last log window")
        self.accept_rate = gauge("sglang:spec_accept_rate", "Accepted / proposed drafts, last log window")
        self.verify_calls = counter("sglang:spec_verify_calls", "Verify steps, summed over requests")
        self.generation_tokens = counter("sglang:generation_tokens", "Generated tokens")
        self.prompt_tokens = counter("sglang:prompt_tokens", "Prompt tokens")
        self.requests = counter("sglang:num_requests", "Finished requests")
        self.aborted = counter("sglang:num_aborted_requests", "Requests aborted (disconnect, shutdown)")
        self.ttft = histogram("sglang:time_to_first_token_seconds", "Time to first token")
        self.itl = histogram("sglang:inter_token_latency_seconds", "Time per output token after the first")
        self.e2e = histogram("sglang:e2e_request_latency_seconds", "Request latency")
