#!/usr/bin/env bash
# Create the virtual environments of the tracing backends used by the integration tests in tests/telemetry/.
#
# Each backend lives in its own venv at the repository root because its pins clash with the harness's own
# (Phoenix pins openai 3.x, pandas 3 and protobuf 7):
#   .venv-mlflow   mlflow==3.17.2          (3.18.0 does not resolve on every index)
#   .venv-phoenix  arize-phoenix==20.26.1  (about 825 MB)
#
# Usage: tests/backends/setup_backends.sh [mlflow] [phoenix]     (no argument: both)
# PYTHON selects the interpreter (default: python3). An existing venv whose backend imports is left alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
MLFLOW_SPEC="mlflow==3.17.2"
PHOENIX_SPEC="arize-phoenix==20.26.1"

make_venv() {  # name, pip spec, import check
    local dir="$ROOT/.venv-$1" spec="$2" check="$3"
    if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "$check" >/dev/null 2>&1; then
        echo "setup_backends: $dir is ready"
        return 0
    fi
    echo "setup_backends: creating $dir with $spec"
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --upgrade pip
    "$dir/bin/python" -m pip install --quiet "$spec"
    "$dir/bin/python" -c "$check"
    echo "setup_backends: $dir is ready"
}

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(mlflow phoenix)
for t in "${targets[@]}"; do
    case "$t" in
        mlflow) make_venv mlflow "$MLFLOW_SPEC" "import mlflow, sys; sys.exit(mlflow.__version__ != '3.17.2')" ;;
        phoenix) make_venv phoenix "$PHOENIX_SPEC" "import phoenix, sys; sys.exit(phoenix.__version__ != '20.26.1')" ;;
        *) echo "setup_backends: unknown backend '$t' (expected mlflow or phoenix)" >&2; exit 2 ;;
    esac
done
