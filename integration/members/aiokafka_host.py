"""Several aiokafka group members in one process, one event loop:
``python -m integration.members.aiokafka_host``.

A fleet runs many consumers per machine but not an interpreter per consumer on two cores; sharing a
process lets a benchmark run a large group without measuring a hundred interpreters' start-up and
scheduling. Each member is the same :class:`~integration.members.aiokafka_member.AiokafkaMember` a
process of its own runs, with its own consumer and connections.

Commands on stdin, one per line:

- ``start ARGS``: start a member; ``ARGS`` are :mod:`integration.members.aiokafka_member`'s options
  (shell-quoted), whose ``--id`` names it;
- ``go ID``: release a member started with ``--hold``;
- ``stop ID``: close a member cleanly (it commits, then leaves the group).

End of stdin closes every member, then the host exits. The members print their events on the shared
stdout; when a member's consumer has closed (or failed) the host adds ``{"id": ID, "ev": "exit",
"code": 0 or 1}``, as the driver does when a member's own process exits. A member cannot be crashed
or frozen alone: those faults need a process of its own.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from integration.members.aiokafka_member import build_member, configure_logging, member_arguments
from integration.members.reporting import EventWriter, read_stdin_lines

log = logging.getLogger(__name__)


@dataclass
class _Hosted:
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    go: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


async def _run_member(member_id: str, argv: Sequence[str], hosted: _Hosted) -> None:
    code = 0
    try:
        await build_member(member_arguments().parse_args(argv)).run(hosted.stop, hosted.go)
    except Exception:
        log.exception("member %s failed", member_id)
        code = 1
    EventWriter(member_id).emit("exit", code=code)


async def serve() -> None:
    """Run the members stdin asks for until it ends, then close them all."""
    loop = asyncio.get_running_loop()
    commands: asyncio.Queue[str | None] = asyncio.Queue()
    read_stdin_lines(
        lambda line: loop.call_soon_threadsafe(commands.put_nowait, line),
        lambda: loop.call_soon_threadsafe(commands.put_nowait, None),
        name="host-stdin",
    )
    members: dict[str, _Hosted] = {}
    while (line := await commands.get()) is not None:
        verb, _, rest = line.partition(" ")
        if verb == "start":
            argv = shlex.split(rest)
            try:
                member_id = member_arguments().parse_args(argv).id
            except SystemExit:  # argparse has said why on stderr; the other members go on
                continue
            if member_id in members:
                log.error("member %s started twice; ignored", member_id)
                continue
            hosted = members[member_id] = _Hosted()
            hosted.task = asyncio.ensure_future(_run_member(member_id, argv, hosted))
        elif verb in ("go", "stop") and rest in members:
            getattr(members[rest], verb).set()
        elif line:
            log.error("unknown command %r", line)
    for hosted in members.values():
        hosted.stop.set()
    await asyncio.gather(*(h.task for h in members.values() if h.task is not None))


def main() -> int:
    configure_logging()
    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
