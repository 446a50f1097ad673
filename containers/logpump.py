"""Copy stdin to a log file line by line, redacting secrets: a local server's stdout goes through here.

    python -m containers.logpump FILE

It runs in the server's process group, so it outlives an `up` that leaves the server running.
It ignores SIGTERM and SIGINT (sent to the whole group on stop) and ends at end of input,
when the server is gone, so the server's last words reach the file; SIGKILL still ends it.
The environment it inherits names the secrets to redact.
"""

import signal

# first, before the slower imports below: a stop that comes early must not lose the log
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)

import sys  # noqa: E402

from ddbench.core.results import redact  # noqa: E402


def pump(src, path: str) -> None:
    with open(path, "a", buffering=1, encoding="utf-8") as out:
        for line in src:
            out.write(redact(line))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m containers.logpump FILE")
    pump(open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False), sys.argv[1])
