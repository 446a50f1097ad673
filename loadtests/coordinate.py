"""What Locust does not do for us across processes, done through its custom messages.

- User indices 0..C-1 over the whole cell (the master hands them out), so the prompt plan
  is the same whichever process a user lands in.
- The end of a cell: a process whose users have all stopped says so; when every process
  has, the run quits (headless) or stops (web UI). Locust alone would idle on.
- Records from workers on other hosts, sent to the master to be written in its cell
  directory (--records-to-master).
"""

from __future__ import annotations

import logging
import time

import gevent
import locust.stats
from gevent.event import AsyncResult
from locust.runners import MasterRunner, WorkerRunner

from loadtests.recorder import RecordFile

log = logging.getLogger("ddbench")
INDEX_TIMEOUT_S = 30
STATS_WAIT_S = 10.0  # workers report stats every 3 s; the master waits for the last report
# Locust's CSV writer rewrites its files every interval (1 s by default) and writes nothing more on
# quit, so a cell waits one interval after its last request for complete CSVs: at 1 s that was a
# third of a short cell. The writer reads the module's value at every turn.
CSV_INTERVAL_S = 0.2
locust.stats.CSV_STATS_INTERVAL_SEC = CSV_INTERVAL_S


class Coordinator:
    def __init__(self, environment):
        self.env = environment
        self._next_index = 0
        self._asks: dict[int, AsyncResult] = {}
        self._seq = 0
        self._done: dict[str, int] = {}
        self.completed = 0  # requests this process finished (workers' Locust stats are deltas)
        self._files: dict[str, RecordFile] = {}
        self.records_dir = None
        runner = environment.runner
        if isinstance(runner, MasterRunner):
            runner.register_message("ddbench_ask_index", self._on_ask, concurrent=True)
            runner.register_message("ddbench_done", self._on_done)
            runner.register_message("ddbench_record", self._on_record)
        elif isinstance(runner, WorkerRunner):
            runner.register_message("ddbench_index", self._on_index)

    @property
    def is_worker(self) -> bool:
        return isinstance(self.env.runner, WorkerRunner)

    def reset(self) -> None:
        self.close()
        self._next_index = 0
        self._done.clear()
        self.completed = 0

    # user indices
    def user_index(self) -> int:
        if not self.is_worker:
            return self._take_index()
        self._seq += 1
        answer = self._asks[self._seq] = AsyncResult()
        self.env.runner.send_message("ddbench_ask_index", {"seq": self._seq})
        return answer.get(timeout=INDEX_TIMEOUT_S)

    def _take_index(self) -> int:
        i, self._next_index = self._next_index, self._next_index + 1
        return i

    def _on_ask(self, environment, msg, **_):
        environment.runner.send_message("ddbench_index", {"seq": msg.data["seq"], "index": self._take_index()},
                                        client_id=msg.node_id)

    def _on_index(self, environment, msg, **_):
        self._asks.pop(msg.data["seq"]).set(msg.data["index"])

    # end of cell
    def watch_end(self) -> None:
        gevent.spawn(self._watch)

    def _watch(self) -> None:
        runner = self.env.runner
        while runner.user_count > 0:
            gevent.sleep(0.05)
        if self.is_worker:
            runner.send_message("ddbench_done", {"completed": self.completed})
        else:
            self._finish(self.completed)

    def _on_done(self, environment, msg, **_):
        self._done[msg.node_id] = msg.data["completed"]
        if len(self._done) >= environment.runner.worker_count:
            gevent.spawn(self._finish, sum(self._done.values()))

    def _finish(self, completed: int) -> None:
        """Quit once Locust's own stats hold every request, so its CSV/HTML are complete."""
        runner = self.env.runner
        deadline = time.monotonic() + STATS_WAIT_S
        while runner.stats.total.num_requests < completed and time.monotonic() < deadline:
            gevent.sleep(0.1)
        gevent.sleep(CSV_INTERVAL_S * 1.5)  # one more turn of Locust's CSV writer
        opts = self.env.parsed_options
        if opts is not None and opts.headless:
            log.info("ddbench: every user has finished its requests; quitting")
            runner.quit()
        else:
            log.info("ddbench: every user has finished its requests; stopping")
            runner.stop()

    # records through the master
    def send_record(self, worker: str, line: str) -> None:
        self.env.runner.send_message("ddbench_record", {"worker": worker, "line": line})

    def _on_record(self, environment, msg, **_):
        worker = msg.data["worker"]
        if worker not in self._files:
            self._files[worker] = RecordFile(self.records_dir, worker)
        self._files[worker].write(msg.data["line"])

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()
