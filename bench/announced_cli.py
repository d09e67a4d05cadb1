"""Run the fmcluster CLI in this process, printing every AWS request to stderr as it is sent.

    python bench/announced_cli.py fmcluster-args...

Each HTTP attempt prints one line ``[bench] call <service>.<Operation>`` (flushed) before it leaves, so a
harness can SIGKILL the command while AWS (the sandbox, with a per-call latency) is inside that request.
Nothing is added to fmcluster: one more botocore ``before-send`` handler on every session it creates.
"""

from __future__ import annotations

import sys

PREFIX = "[bench] call "


def main() -> None:
    from fmcluster.connection import aws

    original_session = aws.session
    registered: set[int] = set()

    def announce(event_name: str = "", **_: object) -> None:
        # one write per line: the engine's threads send requests at once, and print() writes the text and
        # its newline separately, so two lines could interleave
        sys.stderr.write(PREFIX + ".".join(event_name.split(".")[1:3]) + "\n")
        sys.stderr.flush()

    def session(region):
        new = original_session(region)
        if id(new) not in registered:
            registered.add(id(new))
            new.events.register("before-send.*.*", announce)
        return new

    aws.session = session
    sys.argv = ["fmcluster", *sys.argv[1:]]
    from fmcluster.cli.app import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
