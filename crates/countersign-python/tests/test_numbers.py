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


@pytest.mark.parametrize("n", [9007199254740991, -9007199254740991, 1.0, 5])
def test_an_integer_argument_reaches_the_executor_as_an_integer(
    control: countersign.Control, n: object
) -> None:
    # Issue #19: every accepted integer is within ±(2^53−1), so the executor gets an `int`,
    # never a float (`1.0` is the number 1 in canonical JSON).
    seen: list = []
    control.execute(FILE["action"], {"n": n}, lambda arguments: seen.append(arguments["n"]))
    assert seen == [int(n)] and type(seen[0]) is int


@pytest.mark.parametrize("n", [2**53, -(2**53), 10**20])
def test_an_integer_past_the_boundaries_is_refused_in_both_signs(
    control: countersign.Control, n: int
) -> None:
    with pytest.raises(countersign.InvalidArguments) as raised:
        control.evaluate(FILE["action"], {"n": n})
    assert raised.value.canonical_reason == "unsafe_integer"


@pytest.mark.parametrize("text", ["\ud800", "\udc00", "\ude00\ud83d"])
def test_a_lone_surrogate_in_a_python_string_is_refused_never_replaced(
    control: countersign.Control, text: str
) -> None:
    # B51: a Python `str` can hold a lone surrogate; it crosses as a `\u` escape and the kernel
    # refuses it (no U+FFFD, no `?`).
    with pytest.raises(countersign.InvalidArguments) as raised:
        control.evaluate(FILE["action"], {"n": 1, "s": text})
    assert raised.value.canonical_reason == "lone_surrogate"
    pair = control.evaluate(FILE["action"], {"n": 1, "s": "\ud83d\ude00"})
    emoji = control.evaluate(FILE["action"], {"n": 1, "s": "\U0001F600"})
    # A Python string holding the pair's two code points is not the emoji in Python, but
    # json.dumps writes it as two escapes that the kernel reads as the one character U+1F600.
    assert pair.action_hash == emoji.action_hash


def test_the_reason_enum_is_the_kernels() -> None:
    """Issue #19: one closed set of refusal codes, the kernel's, in Python too."""
    from countersign import _native

    assert [reason.value for reason in countersign.Reason] == _native.reasons()
    error = countersign.ApprovalDenied("no", reason="approval_denied")
    assert error.reason is countersign.Reason.APPROVAL_DENIED and error.reason == "approval_denied"
    assert f"{error.reason}" == str(error.reason) == "approval_denied"
    assert json.dumps({"reason": error.reason}) == '{"reason": "approval_denied"}'
