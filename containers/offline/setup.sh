#!/bin/sh
# On the H200, from the repository root: unpack bundle layers into /tmp/site-LAYER, check them,
# and print the PYTHONPATH export (only that goes to stdout). Use it as
#   e=$(sh containers/offline/setup.sh harness) && eval "$e" && python3 -m ddbench ...
exec python3 "$(dirname "$0")/device.py" setup "$@"
