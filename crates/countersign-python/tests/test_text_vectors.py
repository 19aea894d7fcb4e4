"""The shared text vectors (crates/countersign/tests/vectors/text.json, cases B50, B51, B52)
through the Python binding: each input is handed to the kernel as the raw text it is
(`countersign.RawArguments`), so a key written twice, a lone surrogate escape and nesting past
64 levels are the kernel's refusals, as in the Rust (tests/vectors.rs) and Node tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import countersign

VECTORS_DIR = Path(__file__).resolve().parents[2] / "countersign" / "tests" / "vectors"
FILE = json.loads((VECTORS_DIR / "text.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def control() -> countersign.Control:
    return countersign.Control(
        VECTORS_DIR / "numbers.policy.yaml",
        principal=FILE["principal"],
        store_url="memory:",
    )


@pytest.mark.parametrize("vector", FILE["vectors"], ids=lambda vector: vector["note"])
def test_text_vector(control: countersign.Control, vector: dict) -> None:
    if "input_hex" in vector:
        # Bytes that are not UTF-8: no Python str holds them; strict decoding fails, and the
        # binding never sees a U+FFFD in their place.
        with pytest.raises(UnicodeDecodeError):
            bytes.fromhex(vector["input_hex"]).decode("utf-8")
        return
    raw = countersign.RawArguments(vector["input"])
    if "refused" in vector:
        with pytest.raises(countersign.InvalidArguments) as raised:
            control.evaluate(FILE["action"], raw)
        assert raised.value.canonical_reason == vector["refused"]
        assert raised.value.did_run == "no" and raised.value.may_retry is False
    else:
        evaluation = control.evaluate(FILE["action"], raw)
        # The same canonical text hashes the same whatever its spelling (the escaped pair and
        # the literal emoji).
        same = [
            other
            for other in FILE["vectors"]
            if other.get("canonical") == vector["canonical"] and "input" in other
        ]
        for other in same:
            again = control.evaluate(FILE["action"], countersign.RawArguments(other["input"]))
            assert again.action_hash == evaluation.action_hash


def test_a_duplicate_that_a_dict_would_hide_is_refused_only_as_raw_text(
    control: countersign.Control,
) -> None:
    text = '{"to":"a@x","amount":1,"amount":1000}'
    # json.loads keeps the last: the dict path cannot see the duplicate (documented).
    assert json.loads(text) == {"to": "a@x", "amount": 1000}
    control.evaluate(FILE["action"], json.loads(text))
    with pytest.raises(countersign.InvalidArguments) as raised:
        control.evaluate(FILE["action"], countersign.RawArguments(text))
    assert raised.value.canonical_reason == "duplicate_key"


def test_text_past_four_mebibytes_is_too_large(control: countersign.Control) -> None:
    big = '{"s":"' + "a" * (4 * 1024 * 1024) + '"}'
    with pytest.raises(countersign.InvalidArguments) as raised:
        control.evaluate(FILE["action"], countersign.RawArguments(big))
    assert raised.value.canonical_reason == "too_large"
    with pytest.raises(countersign.InvalidArguments) as as_dict:
        control.evaluate(FILE["action"], {"s": "a" * (4 * 1024 * 1024)})
    assert as_dict.value.canonical_reason == "too_large"


def test_raw_arguments_refuses_a_lone_surrogate_locally_and_a_non_str() -> None:
    for text in ['{"s":"\ud800"}', '{"s":"\udc00"}', '{"s":"\ude00\ud83d"}']:
        with pytest.raises(countersign.InvalidArguments) as raised:
            countersign.RawArguments(text)
        assert raised.value.canonical_reason == "lone_surrogate"
        assert "\ufffd" not in str(raised.value)
    with pytest.raises(TypeError):
        countersign.RawArguments(b"{}")  # type: ignore[arg-type]
