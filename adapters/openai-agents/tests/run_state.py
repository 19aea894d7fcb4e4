"""Edits of saved run states, as a client holding the blob could make them."""

from __future__ import annotations

import json


def forge(blob: str, old: str, new: str) -> str:
    """A client's edit of a saved run state: change an argument everywhere it appears. Newer
    openai-agents releases bind a paused call to an unkeyed SHA-256 fingerprint of the call; a
    client holding the blob recomputes it (here with the SDK's own function), so only the
    kernel stands in the way."""
    edited = blob.replace(old, new)
    try:
        from agents._tool_invocation import tool_invocation_identity
    except ImportError:  # releases without per-call fingerprints
        return edited
    calls = [
        item
        for item in json.loads(blob)["generated_items"]
        if isinstance(item.get("raw_item"), dict) and item["raw_item"].get("type") == "function_call"
    ]
    for item in calls:
        raw = item["raw_item"]
        changed = json.loads(json.dumps(raw).replace(old, new))
        for name in (None, raw.get("name")):
            before = tool_invocation_identity(raw, tool_name=name)
            after = tool_invocation_identity(changed, tool_name=name)
            if before and after:
                edited = edited.replace(before[2], after[2])
    return edited
