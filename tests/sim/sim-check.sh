#!/bin/sh
# tests/sim/sim-check.sh: make check's share of the whole-node simulator:
# a fixed range of seeds must run clean (the long campaigns, the seeded
# bugs and the history judge are scripts/sim's; tests/sim/README.md).
set -u
bin=./tests/sim/sim
[ -x "$bin" ] || { echo "1..0 # SKIP $bin not built"; exit 77; }
exec "$bin" --seeds "${SIM_CHECK_SEEDS:-8}" --first "${SIM_CHECK_FIRST:-1}"
