#!/usr/bin/env bash
# Test the LangGraph / LangChain v1 adapter against the newest and the oldest langgraph +
# langchain releases its ranges claim, offline (scripted chat model). The steps are
# adapters/python-tests.sh's; this file names the releases.
set -euo pipefail

# Newest on PyPI when this adapter was released (2026-12-01), and the oldest claimed (README.md).
NEWEST=(langgraph==1.2.22 langgraph-prebuilt==1.1.3 langchain==1.5.0 langchain-core==1.8.1
        langgraph-checkpoint==4.3.2 langgraph-checkpoint-sqlite==3.1.2
        langgraph-checkpoint-postgres==3.2.0)
OLDEST=(langgraph==1.0.0 langgraph-prebuilt==1.0.0 langchain==1.0.0 langchain-core==1.0.0
        langgraph-checkpoint==2.1.2 langgraph-checkpoint-sqlite==2.0.11
        langgraph-checkpoint-postgres==2.0.25)
COMMON=("psycopg[binary]==3.3.9")

ADAPTER=langgraph
WHEELS=py-wheels-langgraph
NEWEST_VENV=py-venv-langgraph
OLDEST_VENV=py-venv-langgraph-oldest
NEWEST_LABEL="langgraph 1.2.22 + langchain 1.5.0"
OLDEST_LABEL="langgraph 1.0.0 + langchain 1.0.0"
TEST_PATHS=(adapters/langgraph/tests)

source "$(dirname "${BASH_SOURCE[0]}")/../python-tests.sh"
