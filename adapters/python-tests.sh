#!/usr/bin/env bash
# The steps every Python adapter's tests share, sourced by adapters/<name>/run-tests.sh: build
# the `countersign` binding (maturin, abi3) and the `countersign` CLI once, then run pytest in
# two venvs, one with the newest and one with the oldest framework releases the adapter claims,
# offline (scripted models).
#
# The sourcing script sets, then sources this file:
#   ADAPTER        the adapter's folder under adapters/ (for example `langgraph`)
#   WHEELS         the wheel folder's name under $CARGO_TARGET_DIR
#   NEWEST_VENV, OLDEST_VENV     the venv folders' names under $CARGO_TARGET_DIR (cargo xtask
#                  conformance reads the newest one)
#   NEWEST_LABEL, OLDEST_LABEL   what each run is called in the output
#   NEWEST, OLDEST arrays of pip requirements for each venv; COMMON: for both
#   TEST_PATHS     array of pytest paths, relative to the repository root
#
# Needs the Rust toolchain, python3 (3.10+), PyPI, and the test PostgreSQL database for the
# cross-process tests on PostgreSQL: `bash .ci/postgres.sh ENV && source ENV` first (it exports
# COUNTERSIGN_TEST_POSTGRES_URL; those tests fail loudly without it). Reuses the venvs when
# present.
set -euo pipefail

MATURIN=1.16.0
PYTEST=9.2.0

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
python="${PYTHON:-python3}"
wheels="$CARGO_TARGET_DIR/$WHEELS"

venv() {  # venv DIR PIN...
    local dir="$1"
    shift
    if [ ! -x "$dir/bin/python" ]; then
        "$python" -m venv "$dir"
    fi
    "$dir/bin/python" -m pip install --quiet --upgrade pip
    "$dir/bin/python" -m pip install --quiet "maturin==$MATURIN" "pytest==$PYTEST" \
        ${COMMON[@]+"${COMMON[@]}"} "$@"
}

run_pytest() {  # run_pytest DIR LABEL
    local dir="$1" label="$2" status=0
    echo "== pytest with $label"
    "$dir/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheels"/countersign-*.whl
    "$dir/bin/python" -m pip install --quiet --no-deps -e "$repo/adapters/$ADAPTER"
    (cd "$repo" && COUNTERSIGN_BIN="$CARGO_TARGET_DIR/debug/countersign" \
        "$dir/bin/python" -m pytest -q -p no:cacheprovider "${TEST_PATHS[@]}") || status=$?
    if [ "$status" -eq 5 ]; then
        echo "error: pytest collected no tests with $label" >&2
        exit 1
    fi
    if [ "$status" -ne 0 ]; then
        echo "error: pytest failed with $label (exit $status)" >&2
        exit "$status"
    fi
}

newest="$CARGO_TARGET_DIR/$NEWEST_VENV"
oldest="$CARGO_TARGET_DIR/$OLDEST_VENV"
venv "$newest" "${NEWEST[@]}"
venv "$oldest" "${OLDEST[@]}"

echo "== building the binding (maturin, abi3) and the countersign CLI"
rm -rf "$wheels"
"$newest/bin/maturin" build --quiet --features conformance -m "$repo/crates/countersign-python/Cargo.toml" --out "$wheels"
(cd "$repo" && cargo build --quiet -p countersign-cli)

run_pytest "$newest" "$NEWEST_LABEL (newest)"
run_pytest "$oldest" "$OLDEST_LABEL (oldest)"
echo "ok: $ADAPTER passed with $NEWEST_LABEL and $OLDEST_LABEL"
