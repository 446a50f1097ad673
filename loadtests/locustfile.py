"""ddbench's Locust workload: OpenAI chat streams, timed by hand, one raw record per request.

    locust -f loadtests/locustfile.py --host http://127.0.0.1:30000 [--prompt-set ...] [--headless -u 8 -r 8]

Closed loop (default): each user sends W warmup requests, then N measured ones (or measures
for a duration), with no think time, and stops; the run ends when every user has. Open loop
(--mode open): users take slots of one cell-wide arrival schedule and record each slot's
intended send time, so queueing behind a slow server shows instead of hiding.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

try:
    import loadtests  # noqa: F401
except ImportError:  # run by path outside an installed checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gevent
from locust import FastHttpUser, constant, events, task
from locust.exception import StopUser
from locust.runners import MasterRunner

from ddbench.core.prompts import PromptSetError, load_prompt_set
from ddbench.core.records import RequestRecord
from ddbench.core.results import RESULTS_ROOT
from loadtests import plan
from loadtests.client import PATHS, chat_body, stream_chat
from loadtests.coordinate import Coordinator
from loadtests.options import OptionError, add_options, settings
from loadtests.recorder import RecordFile, record_path, worker_name

log = logging.getLogger("ddbench")


class Cell:
    """What one Locust process knows about the test in progress."""

    def __init__(self):
        self.coord: Coordinator | None = None
        self.settings = None
        self.order = []
        self.users = 0
        self.slots: plan.Slots | None = None
        self.t0_ns = 0
        self.file: RecordFile | None = None
        self.worker = ""
        self.live = None           # liveweb.send in a `just ui` session (--ddbench-live), else None
        self.live_session = None   # the master's liveweb.Session


CELL = Cell()


@events.init_command_line_parser.add_listener
def _options(parser):
    add_options(parser)
    # set by `just ui` (loadtests/webui.py), not shown in the form
    parser.add_argument("--ddbench-live", action="store_true", include_in_web_ui=False,
                        help="ddbench: the live LLM view (TTFT, TPOT, tokens/s, tau) in the web UI")
    parser.add_argument("--ddbench-profile", default="", include_in_web_ui=False,
                        help="ddbench: the profile whose arms the UI serves and switches between")
    parser.add_argument("--ddbench-serve", action="store_true", include_in_web_ui=False,
                        help="ddbench: this process brings the arm's server up (and down, and switches it)")


@events.init.add_listener
def _init(environment, **_):
    CELL.coord = Coordinator(environment)
    opts = environment.parsed_options
    if opts is None or getattr(opts, "worker", False):
        return  # workers take their options from the master's spawn orders
    if not opts.records_dir:
        opts.records_dir = str(RESULTS_ROOT / "adhoc" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
    try:  # fail at start, naming the option or the prompt file line at fault
        s = settings(opts)
        load_prompt_set(s.prompt_set, s.categories or None, random=s.random_prompts())
    except (OptionError, PromptSetError) as e:
        log.error("ddbench: %s", e)
        sys.exit(2)
    log.info("ddbench: records go to %s", s.records_dir)
    if opts.ddbench_live:  # a `just ui` session; headless cells never load the live view
        from loadtests import liveweb

        try:
            CELL.live_session = liveweb.install(environment)
        except liveweb.ServeError as e:
            log.error("ddbench: %s", e)
            sys.exit(2)


@events.test_start.add_listener
def _test_start(environment, **_):
    runner, opts = environment.runner, environment.parsed_options
    if not CELL.coord.is_worker:
        if CELL.live_session is not None:   # first: it may correct the options the users read below
            CELL.live_session.start_load()
        CELL.coord.reset()
        # the master's view, which workers receive with their spawn orders
        opts.ddbench_users = runner.target_user_count
        opts.ddbench_processes = runner.worker_count if isinstance(runner, MasterRunner) else 1
        CELL.coord.records_dir = opts.records_dir
    if isinstance(runner, MasterRunner):
        return
    s = CELL.settings = settings(opts)
    CELL.worker = worker_name()  # here, not at import: --processes forks after the import
    CELL.live = _live_sender() if getattr(opts, "ddbench_live", False) else None
    CELL.users = int(getattr(opts, "ddbench_users", 0) or runner.target_user_count)
    prompts = load_prompt_set(s.prompt_set, s.categories or None, random=s.random_prompts())
    CELL.order = plan.prompt_order(prompts, s.seed)
    CELL.t0_ns = 0
    CELL.slots = None
    if s.mode == "open":
        processes = int(getattr(opts, "ddbench_processes", 1) or 1)
        index = max(getattr(runner, "worker_index", 0), 0)
        warm = s.warmup * CELL.users
        measured = s.per_user * CELL.users if s.per_user else None
        CELL.slots = plan.Slots(s.rate, s.arrival, s.seed, index, processes, warm, measured, s.duration_s)
    # a UI user may point a new run elsewhere: reopen when the directory changed
    local = not (s.records_to_master and CELL.coord.is_worker)
    want = record_path(s.records_dir, CELL.worker) if local else None
    if CELL.file and CELL.file.path != want:
        CELL.file.close()
        CELL.file = None
    if want and CELL.file is None:
        CELL.file = RecordFile(s.records_dir, CELL.worker)


def _live_sender():
    from loadtests import liveweb

    return liveweb.send


@events.spawning_complete.add_listener
def _spawned(user_count, **_):
    if not isinstance(CELL.coord.env.runner, MasterRunner):
        CELL.coord.watch_end()


@events.quitting.add_listener
def _quit(environment, **_):
    if CELL.file:
        CELL.file.close()
        CELL.file = None
    if CELL.coord:
        CELL.coord.close()


class ChatUser(FastHttpUser):
    """One simulated client. Its requests carry no think time: the loop is the server's pace."""

    wait_time = constant(0)
    network_timeout = 600.0  # a long generation is slow, not dead
    connection_timeout = 10.0

    def on_start(self):
        self.index = CELL.coord.user_index()
        self.sent = 0
        self.deadline_ns: int | None = None

    @task
    def chat(self):
        s = CELL.settings
        if s.mode == "open":
            self.open_loop(s)
        else:
            self.closed_loop(s)

    def closed_loop(self, s):
        i = self.sent
        warmup = i < s.warmup
        if not warmup:
            if s.per_user and i >= s.warmup + s.per_user:
                raise StopUser()
            if s.duration_s:
                now = time.perf_counter_ns()
                self.deadline_ns = self.deadline_ns or now + int(s.duration_s * 1e9)
                if now >= self.deadline_ns:
                    raise StopUser()
        slot = plan.closed_loop_slot(self.index, i, max(CELL.users, 1))
        self.send(s, CELL.order[slot % len(CELL.order)], warmup, None, slot)

    def open_loop(self, s):
        slot = CELL.slots.take()
        if slot is None:
            raise StopUser()
        k, offset = slot
        CELL.t0_ns = CELL.t0_ns or time.perf_counter_ns()
        intended = CELL.t0_ns + int(offset * 1e9)
        wait = (intended - time.perf_counter_ns()) / 1e9
        if wait > 0:
            gevent.sleep(wait)
        self.send(s, CELL.order[k % len(CELL.order)], k < s.warmup * CELL.users, intended, k)

    def send(self, s, prompt, warmup: bool, intended_ns: int | None, slot: int):
        self.sent += 1
        rid = uuid.uuid4().hex
        seed = plan.request_seed(s.seed, s.repetition, slot) if s.temperature > 0 else None
        if s.output_length is not None:   # the drawn length wins over the prompt's own max_tokens
            prompt = prompt.model_copy(update={"max_tokens": plan.output_target(s.output_length, s.max_tokens,
                                                                                s.seed, slot)})
        body = chat_body(prompt, model=s.model or "default", max_tokens=s.max_tokens, temperature=s.temperature,
                         top_p=s.top_p, top_k=s.top_k, ignore_eos=s.ignore_eos, token_ids=s.return_token_ids,
                         seed=seed, api=s.api)
        raw = stream_chat(self.client, body, rid, name="warmup" if warmup else s.api, path=PATHS[s.api])
        rec = RequestRecord(
            request_id=rid, arm=s.arm, concurrency=s.concurrency or CELL.users, repetition=s.repetition,
            warmup=warmup, prompt_id=prompt.id, category=prompt.category, worker=CELL.worker, user=self.index,
            max_tokens=body["max_tokens"], temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=seed,
            target_input_tokens=prompt.input_tokens,
            target_output_tokens=body["max_tokens"] if s.ignore_eos else None,
            intended_send_ns=intended_ns, **raw)
        CELL.coord.completed += 1
        if CELL.live:
            CELL.live(self.environment, rec)
        if CELL.file:
            CELL.file.write(rec)
        else:
            CELL.coord.send_record(CELL.worker, rec.model_dump_json())
