"""Local multi-process launches: N cooperating copies of a command on this machine."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from privrl_jax.pipelines._rundir import LOCK_FILE, lock_holder
from privrl_jax.privacy import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID


def free_port() -> int:
    """A free TCP port on the loopback interface (for a local coordinator)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ProcessFailedError(RuntimeError):
    """A process of a local multi-process run exited with an error.

    The others were stopped.
    """


# Runs in each worker before the command (Linux): asks the kernel to SIGKILL the worker
# when the launcher dies, however it dies (SIGKILL included), then execs the command.
# SIGKILL, not SIGTERM: jax.distributed.initialize installs a SIGTERM handler (XLA's
# preemption notifier) that keeps the process running, and a worker's writes survive a
# kill (atomic files, the ledger before each release, the lock released by the kernel).
# The request survives exec; the check of the parent closes the race of a launcher
# that died before it. A wrapper rather than ``preexec_fn``: Python code between fork
# and exec can deadlock in a multithreaded (JAX) parent.
_DIE_WITH_THE_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGKILL)  # "
    "PR_SET_PDEATHSIG\n"
    "except (OSError, AttributeError):\n"
    "    pass  # not Linux: the launcher's own clean-up still stops the workers\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(143)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def launch_local(
    command: Sequence[str],
    num_processes: int,
    *,
    devices_per_process: int | None = None,
    env: Mapping[str, str] | None = None,
    poll_s: float = 0.2,
    run_dir: str | os.PathLike | None = None,
    grace_s: float = 5.0,
) -> None:
    """Runs ``command`` as ``num_processes`` cooperating processes on this machine.

    Each copy gets ``PRIVRL_COORDINATOR`` (a free loopback port),
    ``PRIVRL_NUM_PROCESSES`` and its ``PRIVRL_PROCESS_ID``; with
    ``devices_per_process``, that many forced CPU devices. When one process fails, the
    others are stopped (they would otherwise wait in a collective until the heartbeat
    times out) and :class:`ProcessFailedError` says which one; the run directory keeps
    its last checkpoint and ledger, so rerunning the same command resumes it. When the
    launcher dies, however it dies, the kernel kills the processes.

    Args:
      command: the command each process runs (argv).
      num_processes: how many processes to start (>= 1).
      devices_per_process: that many forced CPU devices in each process (None: the
        platform's own).
      env: the processes' environment (None: this process's).
      poll_s: how often the processes are polled, in seconds.
      run_dir: the command's run directory, if it has one: a failure while another
        live process holds its lock says so, instead of offering a resume.
      grace_s: how long a stopped process may take to exit after SIGTERM before it is
        killed (jax.distributed's processes ignore SIGTERM).

    Raises:
      ProcessFailedError: a process exited with an error.
    """
    if num_processes < 1:
        raise ValueError(f"the number of processes must be >= 1; got {num_processes}.")
    base = dict(os.environ if env is None else env)
    base[ENV_COORDINATOR] = f"127.0.0.1:{free_port()}"
    base[ENV_NUM_PROCESSES] = str(num_processes)
    if devices_per_process is not None:
        flags = base.get("XLA_FLAGS", "")
        base["XLA_FLAGS"] = (
            f"{flags} --xla_force_host_platform_device_count={devices_per_process}"
        ).strip()
        base.setdefault("JAX_PLATFORMS", "cpu")
    procs = []
    for pid in range(num_processes):
        child = dict(base, **{ENV_PROCESS_ID: str(pid)})
        wrapped = [
            sys.executable,
            "-c",
            _DIE_WITH_THE_LAUNCHER,
            str(os.getpid()),
            *command,
        ]
        procs.append(subprocess.Popen(wrapped, env=child, start_new_session=True))
    # A SIGTERM to the launcher (kill, a scheduler) runs the clean-up below, as Ctrl-C
    # does.
    on_main = threading.current_thread() is threading.main_thread()
    previous = (
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
        if on_main
        else None
    )
    failed: tuple[int, int] | None = None
    try:
        while failed is None and any(p.poll() is None for p in procs):
            for pid, p in enumerate(procs):
                if p.poll() not in (None, 0):
                    failed = (pid, p.returncode)
                    break
            time.sleep(poll_s)
        if failed is None:
            failed = next(
                ((i, p.returncode) for i, p in enumerate(procs) if p.returncode), None
            )
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if on_main:
            signal.signal(signal.SIGTERM, previous)
    if failed is not None:
        pid, code = failed
        # Every process of ours has exited: a lock still held is another run's.
        holder = None if run_dir is None else lock_holder(run_dir)
        if holder is not None:
            raise ProcessFailedError(
                f"process {pid} of {num_processes} exited with code {code}: {run_dir} "
                f"is in use by another running process ({holder} holds "
                f"{Path(run_dir) / LOCK_FILE}); wait for it to finish or choose "
                "another --out directory."
            )
        raise ProcessFailedError(
            f"process {pid} of {num_processes} exited with code {code}; the others "
            "were stopped. "
            "Rerun the same command to resume from the last checkpoint (steps already "
            "in the "
            f"ledger are not spent again)."
        )
