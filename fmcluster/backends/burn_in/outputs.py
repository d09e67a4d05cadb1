"""The one error every burn-in reader raises on output it cannot read."""

from __future__ import annotations


class UnreadableOutput(ValueError):
    """A tool printed something its reader does not recognise. The gate treats it as a failed check (a node whose
    health cannot be read does not pass), never as a pass."""

    def __init__(self, tool: str, why: str, text: str):
        excerpt = " ".join(text.split())[:160] or "(nothing)"
        super().__init__(f"cannot read {tool} output: {why}; it printed: {excerpt}")
        self.tool = tool
