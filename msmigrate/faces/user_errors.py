"""Mistakes a user can fix (a typo in an option, a run id that is not there): one red line on stderr and a non-zero
exit, never a traceback. Every face reports them the same way."""

from __future__ import annotations

from typing import Optional

import typer
from rich.markup import escape

from msmigrate.agent.config import POLICY_NAMES, closest
from msmigrate.faces.chat.render import make_console

_err = make_console(stderr=True)


def user_error(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` as one line; the caller raises what this returns."""
    _err.print(f"[red]error:[/] {escape(message)}")
    return typer.Exit(code)


def check_policy(policy: Optional[str], allowed: tuple[str, ...] = POLICY_NAMES) -> None:
    if policy is not None and policy not in allowed:
        raise user_error(f"unknown policy {policy!r}; {closest(policy, allowed)}")
