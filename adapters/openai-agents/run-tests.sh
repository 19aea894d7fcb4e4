#!/usr/bin/env bash
# Test the OpenAI Agents SDK adapter (and the binding's own tests) against the newest and the
# oldest openai-agents release its range claims, offline (scripted model). The steps are
# adapters/python-tests.sh's; this file names the releases.
set -euo pipefail

NEWEST_AGENTS=0.24.0   # newest openai-agents on PyPI when this adapter was released
OLDEST_AGENTS=0.14.0   # oldest openai-agents in the supported range (README.md)
# openai-agents 0.14.0 allows openai>=2.26,<3, but openai 2.5x made a field of
# InputTokensDetails required that 0.14.0 does not set: test it with the openai of its time.
OLDEST_OPENAI=2.26.0

ADAPTER=openai-agents
WHEELS=py-wheels
NEWEST_VENV=py-venv
OLDEST_VENV=py-venv-oldest
NEWEST_LABEL="openai-agents $NEWEST_AGENTS"
OLDEST_LABEL="openai-agents $OLDEST_AGENTS"
NEWEST=("openai-agents==$NEWEST_AGENTS")
OLDEST=("openai-agents==$OLDEST_AGENTS" "openai==$OLDEST_OPENAI")
COMMON=()
TEST_PATHS=(crates/countersign-python/tests adapters/openai-agents/tests)

source "$(dirname "${BASH_SOURCE[0]}")/../python-tests.sh"
