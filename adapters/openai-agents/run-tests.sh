#!/usr/bin/env bash
# Build the `countersign` Python binding and test the OpenAI Agents SDK adapter against the
# newest and the oldest openai-agents release its range claims, offline (scripted model).
#
# Needs the Rust toolchain, python3 (3.10+), PyPI, and the test PostgreSQL database for the
# cross-process test on PostgreSQL: `bash .ci/postgres.sh ENV && source ENV` first (it exports
# COUNTERSIGN_TEST_POSTGRES_URL; the test fails loudly without it). Reuses the venvs under
# $CARGO_TARGET_DIR (default: <repo>/target) when present.
set -euo pipefail

NEWEST_AGENTS=0.24.0   # newest openai-agents on PyPI when this adapter was released
OLDEST_AGENTS=0.14.0   # oldest openai-agents in the supported range (README.md)
# openai-agents 0.14.0 allows openai>=2.26,<3, but openai 2.5x made a field of
# InputTokensDetails required that 0.14.0 does not set: test it with the openai of its time.
OLDEST_OPENAI=2.26.0
MATURIN=1.16.0
PYTEST=9.2.0

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
python="${PYTHON:-python3}"
wheels="$CARGO_TARGET_DIR/py-wheels"

venv() {  # venv DIR AGENTS_VERSION [EXTRA_PIN...]
    local dir="$1" agents="$2"
    shift 2
    if [ ! -x "$dir/bin/python" ]; then
        "$python" -m venv "$dir"
    fi
    "$dir/bin/python" -m pip install --quiet --upgrade pip
    "$dir/bin/python" -m pip install --quiet "maturin==$MATURIN" "pytest==$PYTEST" "openai-agents==$agents" "$@"
}

run_pytest() {  # run_pytest DIR LABEL
    local dir="$1" label="$2" status=0
    echo "== pytest with openai-agents $label"
    "$dir/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheels"/countersign-*.whl
    "$dir/bin/python" -m pip install --quiet --no-deps -e "$repo/adapters/openai-agents"
    (cd "$repo" && COUNTERSIGN_BIN="$CARGO_TARGET_DIR/debug/countersign" \
        "$dir/bin/python" -m pytest -q \
        crates/countersign-python/tests adapters/openai-agents/tests) || status=$?
    if [ "$status" -eq 5 ]; then
        echo "error: pytest collected no tests with openai-agents $label" >&2
        exit 1
    fi
    if [ "$status" -ne 0 ]; then
        echo "error: pytest failed with openai-agents $label (exit $status)" >&2
        exit "$status"
    fi
}

newest="$CARGO_TARGET_DIR/py-venv"
oldest="$CARGO_TARGET_DIR/py-venv-oldest"
venv "$newest" "$NEWEST_AGENTS"
venv "$oldest" "$OLDEST_AGENTS" "openai==$OLDEST_OPENAI"

echo "== building the binding (maturin, abi3) and the countersign CLI"
rm -rf "$wheels"
"$newest/bin/maturin" build --quiet --features conformance -m "$repo/crates/countersign-python/Cargo.toml" --out "$wheels"
(cd "$repo" && cargo build --quiet -p countersign-cli)

run_pytest "$newest" "$NEWEST_AGENTS (newest)"
run_pytest "$oldest" "$OLDEST_AGENTS (oldest)"
echo "ok: both openai-agents versions passed"
