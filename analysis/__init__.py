"""Analysis: a results directory in, tidy tables, matched comparisons and trust checks out.

    python -m analysis RUN_DIR
"""
