#!/usr/bin/env bash
# The fault campaign's short mode (scripts/chaos.sh --short): every fault kind but fuzzing, two
# trials each, on small inputs.
set -euo pipefail
exec bash "${PRETRAIN_SOURCE_DIR:?}/scripts/chaos.sh" --short
