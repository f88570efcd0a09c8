#!/usr/bin/env bash
# The README's test command: set-up (scripts/setup.sh), then every test: unit tests, tests under
# mpirun with 1, 2 and 4 ranks, the command-line tests and the h5py check of our HDF5 format.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} GTEST_COLOR=no
ctest --test-dir build --output-on-failure -j2 --timeout 900
