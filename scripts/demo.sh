#!/usr/bin/env bash
# Set up and start TensorBoard on the shipped sample runs in ./log; open the Diagnostics tab.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
PORT=${PORT:-6006}
echo "Open http://localhost:${PORT}/#diagnostics&p.diagnostics.run=resnet50-workers0-v100  (a GPU run; every run is in the Run menu. Ctrl-C to stop)"
exec .venv/bin/tensorboard --logdir ./log --host "${HOST:-localhost}" --port "$PORT"
