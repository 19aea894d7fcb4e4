#!/usr/bin/env bash
# Real Chromium for the approval service's browser tests, and axe-core for their accessibility
# check. Idempotent and quick when everything is already there:
#
# - `chromium` and `chromium-driver` from Debian's packages (apt-get), skipped when
#   /usr/bin/chromium and /usr/bin/chromedriver exist;
# - `axe-core` from the npm registry into TOOLS_DIR (default
#   $CARGO_TARGET_DIR/browser-tools), skipped when its axe.min.js is there.
#
# Prints the lines to export (and writes them to ENV_FILE when given):
#
#   export COUNTERSIGN_CHROMIUM=/usr/bin/chromium
#   export COUNTERSIGN_CHROMEDRIVER=/usr/bin/chromedriver
#   export COUNTERSIGN_AXE_JS=.../node_modules/axe-core/axe.min.js
#
# Usage: .ci/browser.sh [ENV_FILE]
set -euo pipefail

env_file="${1:-}"
axe_version="4.11.0"
tools_dir="${COUNTERSIGN_BROWSER_TOOLS:-${CARGO_TARGET_DIR:-target}/browser-tools}"

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "browser: installing chromium and chromium-driver with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2
fi

axe="${tools_dir}/node_modules/axe-core/axe.min.js"
if [ ! -f "${axe}" ]; then
    echo "browser: installing axe-core ${axe_version} from npm into ${tools_dir}" >&2
    mkdir -p "${tools_dir}"
    npm install --silent --no-audit --no-fund --prefix "${tools_dir}" "axe-core@${axe_version}" >&2
fi
axe="$(cd "$(dirname "${axe}")" && pwd)/axe.min.js"

lines="export COUNTERSIGN_CHROMIUM=/usr/bin/chromium
export COUNTERSIGN_CHROMEDRIVER=/usr/bin/chromedriver
export COUNTERSIGN_AXE_JS=${axe}"
if [ -n "${env_file}" ]; then
    echo "${lines}" > "${env_file}"
fi
echo "${lines}"
