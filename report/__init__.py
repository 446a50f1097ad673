"""Report: a LaTeX/PDF report of one run, from analysis tables (python -m report RUN_DIR)."""
