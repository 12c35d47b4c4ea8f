"""The process that owns a local broker's processes, so that a broker never outlives its owner.

``python -m kassign.broker.supervisor PLAN.json`` formats and starts the nodes the plan lists, waits
until Metadata answers with every broker, reports one JSON line on stdout (``{"ready": true, ...}`` or
``{"ready": false, "error": ...}``), then watches. It stops the nodes (SIGTERM, then SIGKILL after a
grace period) and deletes the plan's work directory when:

- its stdin reaches end-of-file (owned mode): the owner closed the pipe or died in any way, SIGKILL
  included, since the kernel closes a dead process's pipes;
- it gets SIGTERM, SIGINT or SIGHUP (``kassign broker stop`` for a detached broker);
- a node exits on its own.

In owned mode the owner may also send commands on stdin, one a line, each answered by one JSON line
on stdout: ``kill N`` SIGKILLs node ``N`` (a crash: no controlled shutdown) and ``start N`` starts
it again on its data (:class:`kassign.broker.nodes.NodeControl` sends them). A node killed this way
is down on purpose, not a reason to stop the cluster.

The nodes die with the supervisor even if it is SIGKILLed itself (``PR_SET_PDEATHSIG`` on Linux).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kassign.broker.errors import BrokerUnavailable
from kassign.broker.probe import wait_for_broker

log = logging.getLogger("kassign.broker.supervisor")

#: Written into the work directory, which is then kept, when a node stopped on its own: why.
DIED_FILE = "DIED"

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the supervisor's own cleanup still applies
        pass


def log_tail(path: str | os.PathLike[str], lines: int = 15) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Supervisor:
    """Runs one plan: ``{"workdir", "bootstrap", "min_brokers", "startup_timeout", "nodes": [{"argv",
    "log", "format_argv"?}], "state_file"?, "detached"?}``."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.procs: list[subprocess.Popen] = []
        self.stopping = False
        #: indexes of nodes killed on purpose (``kill N``) and not started again
        self.down: set[int] = set()
        #: why a node stopped on its own (None: none did); then :meth:`stop` keeps the work directory
        self.died: str | None = None

    def _spawn(self, argv: list[str], log_path: str) -> subprocess.Popen:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path + ".out", "ab") as out:  # the child keeps its own copy of the descriptor
            return subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.plan["workdir"],
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def _format(self) -> None:
        formats = [(n["format_argv"], n["log"]) for n in self.plan["nodes"] if n.get("format_argv")]
        running = [(self._spawn(argv, log_path), log_path) for argv, log_path in formats]
        for proc, log_path in running:
            try:
                code = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise BrokerUnavailable(
                    f"formatting the storage took over 120 s; its output ends:\n{log_tail(log_path + '.out')}"
                ) from None
            if code != 0:
                raise BrokerUnavailable(
                    f"formatting the storage failed (exit {proc.returncode}):\n{log_tail(log_path + '.out')}"
                )

    def _gone(self) -> str | None:
        for node, proc in zip(self.plan["nodes"], self.procs):
            if proc.poll() is not None:
                tail = log_tail(node["log"]) or log_tail(node["log"] + ".out")
                return f"a broker process exited with code {proc.returncode} while starting; its log ends:\n{tail}"
        return None

    def start(self) -> dict[str, Any]:
        """Format, start and wait; returns the ready report (raises BrokerUnavailable on failure)."""
        began = time.monotonic()
        self._format()
        for node in self.plan["nodes"]:
            self.procs.append(self._spawn(node["argv"], node["log"]))
        timeout = float(self.plan.get("startup_timeout", 90))
        try:
            # A secured cluster is asked on its mutual-TLS INTERNAL listener (the plan's "probe").
            probe = self.plan.get("probe") or {}
            wait_for_broker(
                probe.get("bootstrap", self.plan["bootstrap"]),
                timeout,
                min_brokers=int(self.plan.get("min_brokers", 1)),
                alive=self._gone,
                tls=probe.get("tls"),
            )
        except BrokerUnavailable as exc:
            if "within" in str(exc):
                tail = log_tail(self.plan["nodes"][0]["log"]) or log_tail(self.plan["nodes"][0]["log"] + ".out")
                raise BrokerUnavailable(
                    f"the broker did not answer within {timeout:.0f} s; its log "
                    f"({self.plan['nodes'][0]['log']}) ends:\n{tail}"
                ) from None
            raise
        return {
            "ready": True,
            "bootstrap": self.plan["bootstrap"],
            "pids": [p.pid for p in self.procs],
            "supervisor_pid": os.getpid(),
            "startup_s": round(time.monotonic() - began, 2),
        }

    def _index(self, node_id: int) -> int:
        for index, node in enumerate(self.plan["nodes"]):
            if node.get("node_id") == node_id:
                return index
        raise ValueError(f"no node {node_id}; nodes are {[n.get('node_id') for n in self.plan['nodes']]}")

    def kill_node(self, node_id: int) -> int:
        """SIGKILL one node's process group and wait for it; returns the killed pid."""
        index = self._index(node_id)
        if index in self.down:
            raise ValueError(f"node {node_id} is already down")
        proc = self.procs[index]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        self.down.add(index)
        log.info("node %s (pid %s) killed on request", node_id, proc.pid)
        return proc.pid

    def start_node(self, node_id: int) -> int:
        """Start a node killed by :meth:`kill_node` again, on its existing data; returns its new pid."""
        index = self._index(node_id)
        if index not in self.down:
            raise ValueError(f"node {node_id} is running")
        node = self.plan["nodes"][index]
        self.procs[index] = self._spawn(node["argv"], node["log"])
        self.down.discard(index)
        log.info("node %s started again (pid %s)", node_id, self.procs[index].pid)
        return self.procs[index].pid

    def command(self, line: str) -> dict[str, Any]:
        """Run one owner command (``kill N`` / ``start N``); returns the answer to send back."""
        words = line.split()
        try:
            if len(words) != 2 or words[0] not in ("kill", "start") or not words[1].isdigit():
                raise ValueError(f"unknown command {line.strip()!r}; expected 'kill N' or 'start N'")
            act = self.kill_node if words[0] == "kill" else self.start_node
            return {"ok": True, "node": int(words[1]), "pid": act(int(words[1]))}
        except (ValueError, OSError, subprocess.TimeoutExpired) as exc:
            return {"ok": False, "error": str(exc)}

    def stop(self) -> None:
        """Stop every node (SIGTERM, SIGKILL after the grace period) and delete the work directory."""
        if self.stopping:
            return
        self.stopping = True
        grace = float(self.plan.get("stop_grace", 5.0))
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if self.died is not None:
            # The logs are the only record of why a broker died: keep them, and say so to the owner.
            log.warning("%s; keeping %s for its logs", self.died, self.plan["workdir"])
            with contextlib.suppress(OSError):
                (Path(self.plan["workdir"]) / DIED_FILE).write_text(self.died + "\n")
        elif self.plan.get("keep_workdir") is not True:
            shutil.rmtree(self.plan["workdir"], ignore_errors=True)
        state = self.plan.get("state_file")
        if state:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(state)

    def watch(self) -> str:
        """Block until it is time to stop; returns why."""
        reason: list[str] = []

        def on_signal(signum: int, _frame: Any) -> None:
            reason.append(signal.Signals(signum).name)

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, on_signal)
        selector = selectors.DefaultSelector()
        if not self.plan.get("detached"):
            selector.register(sys.stdin, selectors.EVENT_READ)
        pending = b""
        while not reason:
            if self.plan.get("detached"):
                time.sleep(0.5)
            else:
                for _key, _ in selector.select(timeout=0.5):
                    chunk = sys.stdin.buffer.read1(4096)  # type: ignore[union-attr]  # a BufferedReader
                    if not chunk:
                        reason.append("owner gone (stdin closed)")
                        break
                    pending += chunk
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        _report(self.command(line.decode(errors="replace")))
            for index, (node, proc) in enumerate(zip(self.plan["nodes"], self.procs)):
                if index not in self.down and proc.poll() is not None and not reason:
                    self.died = f"node {node.get('node_id', '?')} exited with code {proc.returncode}"
                    reason.append(self.died)
        return reason[0]


def _report(payload: dict[str, Any]) -> None:
    try:
        sys.stdout.write(json.dumps(payload) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):  # a detached starter may already be gone
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    plan = json.loads(Path(args[0]).read_text())
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s supervisor: %(message)s",
        filename=str(Path(plan["workdir"]) / "supervisor.log"),
    )
    supervisor = Supervisor(plan)
    # A signal during start-up must still stop what has been started.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        report = supervisor.start()
    except (BrokerUnavailable, KeyboardInterrupt, OSError, subprocess.TimeoutExpired) as exc:
        message = str(exc) if isinstance(exc, BrokerUnavailable) else f"{type(exc).__name__}: {exc}"
        _report({"ready": False, "error": message})
        supervisor.stop()
        return 1
    state = plan.get("state_file")
    if state:
        Path(state).write_text(
            json.dumps(
                {
                    **plan.get("describe", {}),
                    **report,
                    "workdir": plan["workdir"],
                    "probe": plan.get("probe"),
                    "logs": [n["log"] for n in plan["nodes"]],
                }
            )
        )
        Path(state).chmod(0o600)  # a secured cluster's state names its users' passwords
    _report(report)
    if plan.get("detached"):
        # Nobody reads on: an open stdout would hold a starter's output capture open. An owner
        # keeps reading it for the answers to its commands.
        with contextlib.suppress(OSError):
            sys.stdout.close()
    why = supervisor.watch()
    log.info("stopping: %s", why)
    supervisor.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
