"""Labelled diagnostics of an SGLang DDTree build, run on the device beside (never inside) a run's measured arms.

    python -m ddbench.diagnostics overlay-check RUN_DIR [--profile P] [--arm linear-b16] [--prompts 3]
    python -m ddbench.diagnostics stage-cost RUN_DIR [--profile P] [--arm tree-b15-k15 ...] [--prompts 8]
    python -m ddbench.diagnostics steps RUN_DIR [--profile P] --arm chain-b15 [--prune] [--concurrency 4]

Each brings servers up with the project's own bring-up (containers.bringup.up: the profile's
generated command, ports, logs, status.json, stop on exit) and sends the run's prompts (the
profile's prompt set, in file order) one at a time, as the load generator's request body
(loadtests.client.chat_body): C = 1, the workload's temperature, max_tokens and ignore_eos.
The profile is RUN_DIR/manifest.json's unless --profile names one (needed when RUN_DIR has no
manifest yet). Everything goes under RUN_DIR/diagnostics/, which no analysis of the measured
cells reads as an arm. The environment must be what `setup.sh harness sglang sglang-ddtree`
exported.

One module per diagnostic: overlay_check, stage_cost, steps; serving.py holds what they share (the run's
profile and prompts, the bundle layers on PYTHONPATH, a server brought up and sent the prompts).
"""
