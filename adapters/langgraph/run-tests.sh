#!/usr/bin/env bash
# Build the `countersign` Python binding and test the LangGraph / LangChain v1 adapter against
# the newest and the oldest langgraph + langchain releases its ranges claim, offline (scripted
# chat model).
#
# Needs the Rust toolchain, python3 (3.10+), PyPI, and the test PostgreSQL database for the
# cross-process test on PostgreSQL: `bash .ci/postgres.sh ENV && source ENV` first (it exports
# COUNTERSIGN_TEST_POSTGRES_URL; the test fails loudly without it). Reuses the venvs under
# $CARGO_TARGET_DIR (default: <repo>/target) when present.
set -euo pipefail

# Newest on PyPI when this adapter was released (2026-12-01), and the oldest claimed (README.md).
NEWEST=(langgraph==1.2.22 langgraph-prebuilt==1.1.3 langchain==1.5.0 langchain-core==1.8.1
        langgraph-checkpoint==4.3.2 langgraph-checkpoint-sqlite==3.1.2
        langgraph-checkpoint-postgres==3.2.0)
OLDEST=(langgraph==1.0.0 langgraph-prebuilt==1.0.0 langchain==1.0.0 langchain-core==1.0.0
        langgraph-checkpoint==2.1.2 langgraph-checkpoint-sqlite==2.0.11
        langgraph-checkpoint-postgres==2.0.25)
MATURIN=1.16.0
PYTEST=9.2.0
PSYCOPG=3.3.9

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
python="${PYTHON:-python3}"
wheels="$CARGO_TARGET_DIR/py-wheels-langgraph"

venv() {  # venv DIR PIN...
    local dir="$1"
    shift
    if [ ! -x "$dir/bin/python" ]; then
        "$python" -m venv "$dir"
    fi
    "$dir/bin/python" -m pip install --quiet --upgrade pip
    "$dir/bin/python" -m pip install --quiet "maturin==$MATURIN" "pytest==$PYTEST" \
        "psycopg[binary]==$PSYCOPG" "$@"
}

run_pytest() {  # run_pytest DIR LABEL
    local dir="$1" label="$2" status=0
    echo "== pytest with $label"
    "$dir/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheels"/countersign-*.whl
    "$dir/bin/python" -m pip install --quiet --no-deps -e "$repo/adapters/langgraph"
    (cd "$repo" && COUNTERSIGN_BIN="$CARGO_TARGET_DIR/debug/countersign" \
        "$dir/bin/python" -m pytest -q -p no:cacheprovider adapters/langgraph/tests) || status=$?
    if [ "$status" -eq 5 ]; then
        echo "error: pytest collected no tests with $label" >&2
        exit 1
    fi
    if [ "$status" -ne 0 ]; then
        echo "error: pytest failed with $label (exit $status)" >&2
        exit "$status"
    fi
}

newest="$CARGO_TARGET_DIR/py-venv-langgraph"
oldest="$CARGO_TARGET_DIR/py-venv-langgraph-oldest"
venv "$newest" "${NEWEST[@]}"
venv "$oldest" "${OLDEST[@]}"

echo "== building the binding (maturin, abi3) and the countersign CLI"
rm -rf "$wheels"
"$newest/bin/maturin" build --quiet --features conformance -m "$repo/crates/countersign-python/Cargo.toml" --out "$wheels"
(cd "$repo" && cargo build --quiet -p countersign-cli)

run_pytest "$newest" "langgraph 1.2.22 + langchain 1.5.0 (newest)"
run_pytest "$oldest" "langgraph 1.0.0 + langchain 1.0.0 (oldest)"
echo "ok: both langgraph/langchain versions passed"
