"""Type stubs for the native half of the ``countersign`` package (PyO3). Use the public API in
:mod:`countersign` instead of these."""

import os
from typing import Any, Callable, Optional

class Principal:
    """Who is acting: a non-empty string of at most 256 characters with no control characters,
    such as ``agent:support-bot``. Raises ``ValueError`` otherwise."""

    def __init__(self, id: str) -> None: ...
    @property
    def id(self) -> str: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class NativeControl:
    def __init__(
        self,
        policy: str | os.PathLike[str],
        principal: Principal,
        store_url: Optional[str] = None,
        approval_ttl: Optional[float] = None,
        interrupt: Any = None,
    ) -> None: ...
    @property
    def policy_path(self) -> Optional[os.PathLike[str]]: ...
    @property
    def store_url(self) -> str: ...
    @property
    def principal(self) -> Optional[str]: ...
    @property
    def mode(self) -> str: ...
    @property
    def policy_hash(self) -> str: ...
    def evaluate(self, action: str, arguments_json: str) -> str: ...
    def needs_approval(self, action: str, arguments_json: str) -> bool: ...
    def request_approval(
        self,
        action: str,
        arguments_json: str,
        run: Optional[str] = None,
        correlation: Optional[str] = None,
    ) -> Optional[str]: ...
    def execute(
        self,
        action: str,
        arguments_json: str,
        executor: Callable[[dict], Any],
        approval: Optional[str] = None,
        timeout: Optional[float] = None,
        run: Optional[str] = None,
        correlation: Optional[str] = None,
    ) -> tuple[Any, dict]: ...
    def answer(
        self,
        request_id: str,
        decision_json: str,
        approver: Optional[str] = None,
        note: Optional[str] = None,
        token: Optional[str] = None,
        action_hash: Optional[str] = None,
    ) -> str: ...
    def withdraw(
        self,
        request_id: str,
        cancel: bool,
        approver: Optional[str] = None,
        token: Optional[str] = None,
        reason: Optional[str] = None,
    ) -> str: ...
    def cancel_run(
        self, run: str, operator: str, reason: Optional[str] = None
    ) -> list[tuple[str, str | BaseException]]: ...
    def revoke_token(
        self, token_or_id: str, operator: str, reason: Optional[str] = None
    ) -> bool: ...
    @property
    def approval_warnings(self) -> list[str]: ...
    def correlated(
        self, framework: str, run: Optional[str], call_id: str
    ) -> Optional[str]: ...
    def approval(self, request_id: str) -> Optional[str]: ...
    def approvals(self, state: Optional[str] = None) -> str: ...
    def effect(self, key: str) -> Optional[str]: ...
    def receipts(self) -> str: ...
    def verify_receipts(self) -> str: ...

# The chat-surface contract (see Control.interrupt and Control.respond).

def interrupt_object_json(control: NativeControl, request_id: str) -> Optional[str]: ...
def respond(
    control: NativeControl,
    request_id: str,
    response_json: str,
    framework: str,
    approver: Optional[str] = None,
    token: Optional[str] = None,
) -> str: ...

# The adapter conformance kit (see countersign.conformance).

class KernelRefusal: ...

class KitSetup:
    def review(self, shown_json: str) -> Optional[str]: ...
    @property
    def scratch_dir(self) -> os.PathLike[str]: ...

class KitSession:
    def control(self) -> NativeControl: ...
    @property
    def interrupt(self) -> Any: ...
    def review(self, shown_json: str) -> Optional[str]: ...
    def run_tool(self, arguments_json: str) -> str: ...
    def paused(self, request_id: str) -> BaseException: ...
    @property
    def scratch_dir(self) -> os.PathLike[str]: ...

def run_adapter_kit(
    adapter: Any,
    relaunch: list[str],
    cli: Optional[str | os.PathLike[str]] = None,
    policy: Optional[str] = None,
) -> tuple[bool, str, str]: ...


def reasons() -> list[str]: ...
