"""The LLM view of Locust's web UI: an "LLM" tab in Locust's own page, /ddbench with charts and the arm
switch, /ddbench/stats as JSON. Installed by the locustfile on the master (or the only process) of a
`just ui` session (option --ddbench-live).

Workers send each finished request's fact (loadtests/live.py) to the master as a Locust message, so the
master's figures cover every process and Locust's own request counts are untouched (no extra request
events). With --ddbench-profile and --ddbench-serve the master also owns the server: it brings the arm
up through the SERVERS the orchestration gives it (ddbench/ui_servers.py, a second locustfile that `ddbench
ui` loads), and a switch stops the load, takes the server down and brings the chosen arm up in its place.
Each (arm, user count) setting is a phase (adhoc.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

import gevent
import httpx
from flask import Response, jsonify, request
from locust.runners import MasterRunner, WorkerRunner

from ddbench.core import prom
from ddbench.core.manifest import start_run
from ddbench.core.profile import Profile, load_profile
from ddbench.core.records import RequestRecord
from ddbench.core.results import MANIFEST, RunDir
from loadtests import adhoc, live
from loadtests.cell import probe
from loadtests.client import streams_token_ids
from loadtests.live import LiveStats, ServerCounters, table

log = logging.getLogger("ddbench")
logging.getLogger("httpx").setLevel(logging.WARNING)   # a line per /metrics scrape would drown the log
MESSAGE = "ddbench_live"
SCRAPE_S = 2.0


class ServeError(RuntimeError):
    pass


@dataclass(frozen=True)
class Servers:
    """How the master starts an arm's server, given by the orchestration."""
    up: Callable[[Profile, str, Path], object]   # (profile, arm, run dir) -> a server: .url, .stop()
    command: Callable[[Profile, str, int | None], str]   # (profile, arm, port) -> the line that starts it


# set at import by the orchestration's locustfile (ddbench/ui_servers.py), before Locust's init event
SERVERS: Servers | None = None


def send(environment, rec: RequestRecord) -> None:
    """From any process: a finished request's fact, to wherever the live view is."""
    runner, fact = environment.runner, live.fact(rec)
    if isinstance(runner, WorkerRunner):
        runner.send_message(MESSAGE, fact)
    elif SESSION is not None:
        SESSION.stats.add(fact)


class Session:
    """The master's view: the live figures, the server counters, the phases and, when it owns the server,
    the arm that serves."""

    def __init__(self, environment, profile: Profile | None, serve: bool):
        self.env, self.profile, self.serve = environment, profile, serve
        self.opts = environment.parsed_options
        self.stats = LiveStats(ar_arms={a.id for a in profile.arms if a.kind == "ar"} if profile else set())
        self.counters = ServerCounters()
        self.server = None
        self.serving: tuple[str, str, str] | None = None   # arm, url, model of the server this UI started
        self.state, self.error = "up", None
        self.phases: adhoc.Phases | None = None
        self.load_started: tuple[float, int] | None = None   # until the load's first phase opens

    # the arm
    @property
    def arm(self) -> str:
        return self.opts.arm

    def command(self) -> str | None:
        if self.profile is None or SERVERS is None:
            return None
        return SERVERS.command(self.profile, self.arm, urlsplit(self.env.host).port if self.env.host else None)

    def bring_up(self, arm: str) -> None:
        if SERVERS is None:
            raise ServeError("--ddbench-serve: no server bring-up was loaded; start the UI with `ddbench ui PROFILE`, "
                             "which loads ddbench/ui_servers.py beside the locustfile")
        self.server = SERVERS.up(self.profile, arm, self.records_dir())
        model = probe(self.server.url)
        self.serving = (arm, self.server.url, model)
        self.opts.return_token_ids = str(streams_token_ids(self.server.url, model, self.profile.workload.api)).lower()
        self._point_at()

    def _point_at(self) -> None:
        """What the form may have changed back to the arm that serves: its host, its arm id in the records,
        its model name; the master passes its options to the workers with each spawn order."""
        arm, url, model = self.serving
        self.env.host = url
        for user_class in self.env.user_classes:
            user_class.host = url
        self.opts.arm, self.opts.model = arm, model

    def switch(self, arm: str) -> None:
        """Stop the load, take the current server down, bring `arm` up in its place (in a greenlet)."""
        self.profile.arm(arm)   # an unknown arm is refused before anything stops
        self.state, self.error = "switching", None

        def run():
            try:
                if self.env.runner.state not in ("ready", "stopped"):
                    self.env.runner.stop()
                self.stop()
                self.bring_up(arm)
                self.state = "up"
            except Exception as e:   # the page shows why; the UI stays up for another choice
                self.state, self.error = "failed", f"{type(e).__name__}: {str(e).splitlines()[0]}"
                log.error("ddbench: bringing %s up failed: %s", arm, e)

        gevent.spawn(run)

    def stop(self) -> None:
        """The open phase closed, the server this UI started down."""
        self.end_phase()
        if self.server is not None:
            self.server.stop()
            self.server = None

    # phases and records
    def records_dir(self) -> Path:
        return Path(self.opts.records_dir)

    def begin_phase(self, users: int) -> None:
        if self.phases is None or self.phases.dir != self.records_dir():
            self.end_phase()
            self.phases = adhoc.Phases(self.records_dir())
            self._manifest()
        self.stats.users = users
        rate = float(self.opts.rate or 0) if self.opts.mode == "open" else 0.0
        self.phases.begin(self.arm, users, rate=rate or None, since=self.load_started)
        self.load_started = None

    def start_load(self) -> None:
        """Before the load's first users spawn (the locustfile calls it first thing in test_start)."""
        if self.serving:
            self._point_at()
        self.stats.reset()
        self.load_started = (time.time(), time.perf_counter_ns())

    def end_phase(self) -> None:
        if self.phases is not None:
            self.phases.end()
            try:
                adhoc.materialize(self.phases.dir)
            except (OSError, ValueError) as e:
                log.error("ddbench: could not write the session's cells: %s", e)

    def _manifest(self) -> None:
        d = self.records_dir()
        if self.profile is not None and not (d / MANIFEST).is_file():
            d.mkdir(parents=True, exist_ok=True)
            start_run(self.profile, str(self.opts.ddbench_profile), RunDir(d))

    # the figures
    def scrape(self) -> None:
        while True:
            gevent.sleep(SCRAPE_S)
            if not self.env.host or self.state != "up":
                continue
            try:
                r = httpx.get(self.env.host.rstrip("/") + "/metrics", timeout=2)
                if r.status_code == 200:
                    self.counters.add(time.time(), prom.parse(r.text))
            except (httpx.HTTPError, prom.PromError):
                pass

    def snapshot(self, series: bool = True) -> dict:
        snap = self.stats.snapshot(server_tau=self.counters.tau, series=series)
        arms = [a.id for a in self.profile.arms] if self.profile else [self.arm]
        snap = {**snap, "arm": self.arm, "arms": arms, "command": self.command(), "state": self.state,
                "error": self.error, "can_switch": self.serve, "host": self.env.host,
                "records_dir": str(self.records_dir())}
        return {**snap, "rows": table(snap)}


SESSION: Session | None = None


def install(environment) -> Session:
    """On the master (or the only process) of a UI session: state, message handler, routes, the tab."""
    global SESSION
    opts = environment.parsed_options
    profile = load_profile(opts.ddbench_profile) if opts.ddbench_profile else None
    s = SESSION = Session(environment, profile, serve=bool(opts.ddbench_serve))
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        runner.register_message(MESSAGE, lambda environment, msg, **_: s.stats.add(msg.data))
    if s.serve:
        s.bring_up(opts.arm)
    environment.events.spawning_complete.add_listener(lambda user_count, **_: s.begin_phase(int(user_count)))
    environment.events.test_stop.add_listener(lambda **_: (s.stats.stop(), s.end_phase()))
    environment.events.quitting.add_listener(lambda **_: s.stop())
    gevent.spawn(s.scrape)
    if environment.web_ui is not None:
        _routes(environment.web_ui, s)
    return s


def _routes(web_ui, s: Session) -> None:
    app = web_ui.app
    web_ui.template_args.update(
        extended_tabs=[{"title": "LLM", "key": "llm"}],
        extended_tables=[{"key": "llm", "structure": [{"key": "metric", "title": "Metric"},
                                                      {"key": "window", "title": f"Last {s.stats.window_s:g} s"},
                                                      {"key": "total", "title": "Since start"}]}])

    @app.after_request
    def _llm_rows(response):
        if request.path == "/stats/requests" and response.is_json:
            body = response.get_json()
            body["extended_stats"] = [{"key": "llm", "data": s.snapshot(series=False)["rows"]}]
            response.set_data(json.dumps(body))
        return response

    @app.route("/ddbench/stats")
    def _stats():
        return jsonify(s.snapshot())

    @app.route("/ddbench/arm", methods=["POST"])
    def _arm():
        arm = (request.get_json(silent=True) or {}).get("arm") or request.form.get("arm")
        if not s.serve:
            return jsonify(error="this UI drives a server it did not start (--url): no arm switch"), 409
        if s.state == "switching":
            return jsonify(error="a switch is already in progress"), 409
        try:
            s.switch(str(arm))
        except ValueError as e:
            return jsonify(error=str(e)), 400
        return jsonify(state=s.state, arm=arm), 202

    @app.route("/ddbench")
    def _page():
        return Response(resources.files("loadtests").joinpath("liveweb.html").read_text(), mimetype="text/html")
