"""Errors a user can act on.

Every failure that reaches the CLI is one of these: the CLI prints ``str(error)`` and exits with
``error.exit_code``. Anything else is a bug and gets a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


class FmclusterError(Exception):
    """Base for errors with a message meant for the user."""

    exit_code: int = 1


class Aborted(FmclusterError):
    """The user answered "no": nothing changed. Printed as ``aborted``, exit 1 (not bad input)."""

    exit_code = 1


class UsageError(FmclusterError):
    """Bad input that is not a spec file: a bad flag value, an unknown name, a missing file."""

    exit_code = 2


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a spec, located as precisely as the YAML allows."""

    file: str
    line: int | None
    column: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        field = f"{self.path}: " if self.path else ""
        return f"{where}: {field}{self.message}"


class SpecError(FmclusterError):
    """The spec is invalid. Carries every problem found, each with its position."""

    exit_code = 2

    def __init__(self, problems: list[SpecProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class AwsError(FmclusterError):
    """AWS (or the sandbox) said no. Names the resource, AWS's code and message, and what to do."""

    exit_code = 1

    def __init__(self, resource: str, code: str, message: str, hint: str = ""):
        self.resource = resource
        self.code = code
        self.aws_message = message
        self.hint = hint
        text = f"{resource}: AWS said {code}: {message}"
        if hint:
            text += f"\n  → {hint}"
        super().__init__(text)
