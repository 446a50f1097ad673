"""Output that is not a terminal (a log file, CI) gets a line a cell, and long lines (the --resume command)
whole, never cut at 80 columns."""

import io

from rich.console import Console

from ddbench import reproduce
from ddbench.progress_lines import ProgressLines


def test_a_line_a_cell_with_the_pace_so_far():
    out = io.StringIO()
    lines = ProgressLines(Console(file=out, width=80))
    with lines as p:
        task = p.add_task("starting", total=4)
        p.update(task, description="linear-b16 C=4 r2")
        p.advance(task)
        p.update(task, description="rounds C=8 r1")
        p.advance(task, 2)
    got = out.getvalue().splitlines()
    assert len(got) == 2
    assert got[0].startswith("[1/4] linear-b16 C=4 r2 done, 0:00:00 elapsed, eta 0:00:00")
    assert got[1].startswith("[3/4] rounds C=8 r1 done")
    assert ProgressLines.line({"description": "ar C=1 r1", "total": 80, "done": 20}, 192.0) == \
        "[20/80] ar C=1 r1 done, 0:03:12 elapsed, eta 0:09:36"


def test_the_sweep_prints_lines_where_a_bar_would_not_draw():
    assert not reproduce.console.is_terminal        # pytest captures stderr
    assert reproduce.console.soft_wrap


def test_a_long_command_is_printed_whole_on_a_non_terminal(capsys):
    line = "just reproduce cpu-tiny --resume " + "/very/long/results/path" * 6
    reproduce.console.print(f"interrupted; resume with:\n  {line}", highlight=False)
    assert capsys.readouterr().err.splitlines()[1].strip() == line
