"""The ground floor: what every stage shares and nothing else.

The profile schema and its overrides, the cell order, each arm's settings, the prompt sets, the
results layout, request records, the manifest, the per-request formulas, the Prometheus parser,
the time budget. It imports no stage (containers, loadtests, analysis, report, refengine) and no
orchestration (ddbench's own modules above it); tests/unit/test_layers.py holds that.
"""
