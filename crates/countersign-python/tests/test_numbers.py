"""The shared number vectors (crates/countersign/tests/vectors/numbers.json) through the Python
binding: each input is read as Python reads JSON (`json.loads`: integers exact, floats as
doubles) and sent as an argument; the action hash, or the refusal, must be the one the Rust
kernel's own test (tests/vectors.rs) and the Node binding's test agree on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import countersign

VECTORS_DIR = Path(__file__).resolve().parents[2] / "countersign" / "tests" / "vectors"
FILE = json.loads((VECTORS_DIR / "numbers.json").read_text())


@pytest.fixture(scope="module")
def control() -> countersign.Control:
    return countersign.Control(
        VECTORS_DIR / "numbers.policy.yaml",
        principal=FILE["principal"],
        store_url="memory:",
    )


@pytest.mark.parametrize("vector", FILE["vectors"], ids=lambda vector: vector["input"])
def test_number_vector(control: countersign.Control, vector: dict) -> None:
    arguments = {"n": json.loads(vector["input"])}
    if "refused" in vector:
        with pytest.raises(countersign.InvalidArguments) as raised:
            control.evaluate(FILE["action"], arguments)
        assert raised.value.canonical_reason == vector["refused"]
        assert raised.value.did_run == "no" and raised.value.may_retry is False
    else:
        evaluation = control.evaluate(FILE["action"], arguments)
        assert evaluation.action_hash == vector["action_hash"]


def test_the_vector_file_has_both_kinds() -> None:
    kinds = {"refused" in vector for vector in FILE["vectors"]}
    assert kinds == {True, False}
