"""What one request leaves behind, and what one cell's status says.

The load generator writes these; analysis reads them. They hold raw timings only
(perf_counter_ns, a system-wide monotonic clock on one host), never derived metrics,
so that every formula of docs/metrics.md lives in analysis alone and can be re-run.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RECORD_VERSION = 1


class Chunk(BaseModel):
    """One SSE event that carried content."""

    model_config = ConfigDict(extra="forbid")
    t_ns: int = Field(description="arrival, perf_counter_ns")
    text: str
    tokens: int | None = Field(None, description="token count of this chunk, when the server tells")


class Usage(BaseModel):
    model_config = ConfigDict(extra="allow")
    prompt_tokens: int
    completion_tokens: int


class RequestRecord(BaseModel):
    """One request, as the client saw it. Times are perf_counter_ns; *_unix_ns are wall clock."""

    model_config = ConfigDict(extra="forbid")
    v: int = RECORD_VERSION
    request_id: str
    # where it belongs
    arm: str
    concurrency: int
    repetition: int
    warmup: bool
    prompt_id: str
    category: str
    worker: str = Field(description="the Locust process that sent it (host:pid)")
    user: int = Field(description="index of the simulated user within the cell")
    # load.schedule 'rounds' (loadtests/rounds.py): the round of the stretch this request's unit ran in; left
    # out of the dump when unset, so that records from cells keep their bytes
    round: int | None = Field(None, exclude_if=lambda v: v is None,
                              description="rounds schedule: the round (0-based, warm-up rounds first) of its unit")
    # what was asked
    max_tokens: int
    temperature: float
    # left None by records from before these fields; top_k None: not sent
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = Field(None, description="the sampling seed sent (T>0 only): re-runs the request exactly")
    # the lengths asked for, which usage should show: None where nothing was targeted (or a record from before)
    target_input_tokens: int | None = Field(
        None, description="random prompts: the prompt's length in tokens as rendered by the chat template")
    target_output_tokens: int | None = Field(
        None, description="with ignore_eos: the tokens the request must generate (its max_tokens)")
    # raw timings
    intended_send_ns: int | None = Field(None, description="open loop: the scheduled send time")
    send_ns: int
    send_unix_ns: int
    headers_ns: int | None = None
    chunks: list[Chunk] = []
    end_ns: int | None = None
    # what came back
    status: int | None = Field(None, description="HTTP status; None when no response arrived")
    error: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    spec: dict[str, Any] | None = Field(None, description="sglext.spec_tokens_details as returned")
    output_token_ids: list[int] | None = Field(
        None, description="the generated token ids, in order, when the server returns them (choices[].token_ids "
                          "of a request with return_token_ids); None: it did not, or a record from before")

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200


class CellStatus(BaseModel):
    """status.json of a cell: whether it may be trusted, and if not, why."""

    model_config = ConfigDict(extra="forbid")
    arm: str
    concurrency: int
    repetition: int
    status: Literal["ok", "failed"]
    reason: str | None = None
    started_unix: float | None = None
    ended_unix: float | None = None
    # measured window on the perf_counter_ns clock: warmup done .. last measured request ended
    window_start_ns: int | None = None
    window_end_ns: int | None = None
    requests: int = 0
    errors: int = 0
    client_cpu_max: float | None = Field(None, description="peak CPU%% of any Locust process")
    # load.schedule 'rounds': the arms' units alternate inside one stretch, so an arm's own time is the sum of
    # its measured units, not the window (which every arm of the stretch shares)
    busy_ns: int | None = Field(None, exclude_if=lambda v: v is None,
                                description="rounds schedule: the summed length of this arm's measured units")
