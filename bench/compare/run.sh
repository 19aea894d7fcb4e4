#!/usr/bin/env bash
# Countersign side by side with ctrlrun (issue #8). `cargo xtask bench --compare` runs this.
#
#   bench/compare/run.sh [--smoke] [compare.py options...]
#
# Makes (or reuses) a venv under $CARGO_TARGET_DIR with the pinned ctrlrun, installs our wheel
# into it, and runs compare.py with the Rust worker (`countersign-bench --compare-worker`).
#
# Default: release wheel (`maturin build --release`) and release Rust worker: the figures.
# --smoke: what `cargo xtask test` runs so the harness never rots: the debug wheel that
# adapters/openai-agents/run-tests.sh already built in $CARGO_TARGET_DIR/py-wheels (built here
# only if missing), the debug worker, and `compare.py --quick` (tiny counts; nothing is timed
# or asserted beyond "every scenario ran and behaved").
#
# Needs the Rust toolchain, python3 (3.11+, ctrlrun's floor) and PyPI.
set -euo pipefail

CTRLRUN=0.12.2   # newest ctrlrun on PyPI when this comparison was written; pinned
MATURIN=1.16.0

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
python="${PYTHON:-python3}"
venv="$CARGO_TARGET_DIR/py-bench-venv"

smoke=false
if [ "${1:-}" = "--smoke" ]; then
    smoke=true
    shift
fi

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
"$venv/bin/python" -m pip install --quiet "ctrlrun==$CTRLRUN" "maturin==$MATURIN"

if $smoke; then
    wheels="$CARGO_TARGET_DIR/py-wheels"
    if ! ls "$wheels"/countersign-*.whl >/dev/null 2>&1; then
        "$venv/bin/maturin" build --quiet -m "$repo/crates/countersign-python/Cargo.toml" --out "$wheels"
    fi
    (cd "$repo" && cargo build --quiet -p countersign-bench)
    worker="$CARGO_TARGET_DIR/debug/countersign-bench"
    set -- --quick "$@"
else
    wheels="$CARGO_TARGET_DIR/py-wheels-release"
    rm -rf "$wheels"
    "$venv/bin/maturin" build --quiet --release -m "$repo/crates/countersign-python/Cargo.toml" --out "$wheels"
    (cd "$repo" && cargo build --quiet --release -p countersign-bench)
    worker="$CARGO_TARGET_DIR/release/countersign-bench"
fi
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheels"/countersign-*.whl

exec "$venv/bin/python" "$repo/bench/compare/compare.py" --rust-bin "$worker" "$@"
