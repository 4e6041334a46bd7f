"""The one harness of the scripts that time code (issue 48, item 3).

What every speed script needs, once: pieces timed in interleaved rounds (the median per
piece and the ratio of two pieces per round, so a load change hits both alike), the host
and load a timing ran under, Markdown tables with ratio cells, the JSON + Markdown pair
written whole (with :func:`privrl_jax.provenance`, through ``_results.dump_json``), the
compiled-HLO op count and XLA memory of a compiled program, peak RSS, pinned cores, and
the one-JSON-line protocol of scripts that time each run in its own subprocess.

It imports jax only where a function needs it (``ledger_check_speed.py`` times no jax).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from _results import dump_json, write_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
ORDERS = ("shuffle", "alternate", "fixed")


def _block(x: Any) -> Any:
    """Waits for ``x`` when it holds jax arrays (jax already imported), else returns
    it."""
    jax = sys.modules.get("jax")
    return jax.block_until_ready(x) if jax is not None else x


@dataclasses.dataclass
class Timings:
    """Seconds per call of each piece, by round, and the load at each round's start.

    Attributes:
      seconds: piece -> one list per round of per-call seconds (one value per round
        when the round's calls were timed as one block).
      loads: the 1-minute load average when each round began.
    """

    seconds: dict[str, list[list[float]]]
    loads: list[float]

    def flat(self, name: str) -> list[float]:
        """Every per-call time of ``name``, round after round."""
        return [t for r in self.seconds[name] for t in r]

    def round_means(self, name: str) -> list[float]:
        """The mean per-call time of ``name`` in each round."""
        return [statistics.fmean(r) for r in self.seconds[name]]

    def median(self, name: str) -> float:
        """The median of all per-call times of ``name``."""
        return statistics.median(self.flat(name))

    def fastest(self, name: str) -> float:
        """The fastest call of ``name``."""
        return min(self.flat(name))

    def ratios(self, num: str, den: str) -> list[float]:
        """``num / den`` of the round means, per round (the two ran side by side)."""
        return [a / b for a, b in zip(self.round_means(num), self.round_means(den))]

    def protocol(self) -> str:
        """``median of R interleaved rounds x K; host ...``: how the table was timed."""
        reps = len(next(iter(self.seconds.values()))[0]) if self.seconds else 0
        return (
            f"median of {len(self.loads)} interleaved rounds x {reps}; "
            f"{host_line(self.loads)}"
        )

    def ms(self) -> dict[str, dict[str, Any]]:
        """``{"median_ms", "min_ms", "times_s"}``, each piece -> its value(s): what a
        results JSON stores of the timings."""
        return {
            "median_ms": {k: 1e3 * self.median(k) for k in self.seconds},
            "min_ms": {k: 1e3 * self.fastest(k) for k in self.seconds},
            "times_s": {k: self.flat(k) for k in self.seconds},
        }

    def ratio_table(
        self,
        base: str,
        vs: str,
        extra: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> str:
        """The Markdown table of every piece: median ms, median / ``base``'s median,
        fastest ms, and the ``extra`` columns (heading -> piece -> cell).

        Args:
          base: the piece the ratios divide by.
          vs: the ratio column's heading after "vs ".
          extra: more columns, heading -> piece -> cell.

        Returns:
          The table, one row per piece in timing order.
        """
        extra = extra or {}
        b = self.median(base)
        head = ("piece", "ms (median)", f"vs {vs}", "ms (fastest)", *extra)
        rows = [
            (
                k,
                f"{1e3 * self.median(k):.1f}",
                f"{self.median(k) / b:.2f}x",
                f"{1e3 * self.fastest(k):.1f}",
                *(col[k] for col in extra.values()),
            )
            for k in self.seconds
        ]
        return markdown_table(head, rows)


def interleave(
    fns: Mapping[str, Callable[[], Any]],
    *,
    rounds: int,
    reps: int = 1,
    order: str = "shuffle",
    seed: int = 0,
    warmup: int = 1,
    per_call: bool = True,
    on_round: Callable[[int], None] | None = None,
) -> Timings:
    """Times every piece ``reps`` times per round, the pieces interleaved each round.

    Args:
      fns: piece name -> a call to time (its result is waited for).
      rounds: how many rounds.
      reps: calls of a piece per round, back to back.
      order: ``shuffle`` (a new random order each round, no fixed neighbour),
        ``alternate`` (forward, then reversed, ...) or ``fixed``.
      seed: the shuffle's seed.
      warmup: untimed calls of each piece before the first round (compiles).
      per_call: wait for and time each call; else time the ``reps`` calls as one block
        (the device may pipeline them) and record the block's time / ``reps``.
      on_round: called with the round's index after each round (progress lines).

    Returns:
      The :class:`Timings`.

    Raises:
      ValueError: an unknown ``order`` or fewer than one round or rep.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}; got {order!r}.")
    if rounds < 1 or reps < 1:
        raise ValueError(f"rounds and reps must be >= 1; got {rounds}, {reps}.")
    for fn in fns.values():
        for _ in range(warmup):
            _block(fn())
    names = list(fns)
    rng = random.Random(seed)
    out = Timings({k: [] for k in names}, [])
    for r in range(rounds):
        out.loads.append(os.getloadavg()[0])
        if order == "shuffle":
            now = rng.sample(names, len(names))
        elif order == "alternate":
            now = names if r % 2 == 0 else names[::-1]
        else:
            now = names
        for k in now:
            fn = fns[k]
            if per_call:
                got = []
                for _ in range(reps):
                    t = time.perf_counter()
                    _block(fn())
                    got.append(time.perf_counter() - t)
            else:
                t = time.perf_counter()
                for _ in range(reps):
                    res = fn()
                _block(res)
                got = [(time.perf_counter() - t) / reps]
            out.seconds[k].append(got)
        if on_round is not None:
            on_round(r)
    return out


def timing_args(
    parser: argparse.ArgumentParser,
    *,
    rounds: int = 5,
    reps: int = 3,
    threads: int | None = None,
) -> argparse.ArgumentParser:
    """Adds the flags of :func:`interleave`'s protocol: ``--rounds``, ``--reps`` and,
    given a default, ``--threads`` (cores to pin, :func:`pin_threads`).

    Args:
      parser: the script's parser.
      rounds: ``--rounds``' default.
      reps: ``--reps``' default.
      threads: ``--threads``' default; None adds no ``--threads``.

    Returns:
      ``parser``.
    """
    parser.add_argument("--rounds", type=int, default=rounds, help="interleaved rounds")
    parser.add_argument("--reps", type=int, default=reps, help="calls per round")
    if threads is not None:
        parser.add_argument("--threads", type=int, default=threads, help="cores")
    return parser


def best_of(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    """The fastest of ``repeats`` timed calls of ``fn`` after ``warmup`` untimed
    ones."""
    return interleave({"f": fn}, rounds=repeats, warmup=warmup).fastest("f")


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()``'s result (waited for) and its wall seconds."""
    t = time.perf_counter()
    out = _block(fn())
    return out, time.perf_counter() - t


def load_now() -> str:
    """The three load averages, ``"1.00 0.80 0.50"``."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def host_line(loads: Sequence[float] = ()) -> str:
    """``host NAME (N CPUs, 1-min load lo-hi); jax V``: what a timing ran on."""
    load = (
        f"{min(loads):.1f}-{max(loads):.1f}" if loads else f"{os.getloadavg()[0]:.1f}"
    )
    jax = sys.modules.get("jax")
    return f"host {platform.node()} ({os.cpu_count()} CPUs, 1-min load {load})" + (
        f"; jax {jax.__version__}" if jax is not None else ""
    )


def spread(values: Sequence[float]) -> dict[str, float]:
    """``{"median", "min", "max"}`` of ``values`` (ratios over rounds)."""
    return {
        "median": float(statistics.median(values)),
        "min": float(min(values)),
        "max": float(max(values)),
    }


def ratio_cell(values: Sequence[float], fmt: str = "{:.2f}x") -> str:
    """Each round's ratio and their median, ``"1.10x / 1.20x (1.15x)"``; ``-`` for
    none."""
    if not values:
        return "-"
    each = " / ".join(fmt.format(v) for v in values)
    return f"{each} ({fmt.format(statistics.median(values))})"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table: ``header`` and one line per row (cells already formatted)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_outputs(
    stem: str | Path, payload: Any, md: str | None = None, *, indent: int = 2
) -> None:
    """Writes ``stem.json`` (``payload`` with provenance, ``_results.dump_json``) and,
    given ``md``, ``stem.md``; each file whole (a killed run leaves the previous
    one)."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    dump_json(stem.with_name(stem.name + ".json"), payload, indent=indent)
    if md is not None:
        write_text(stem.with_name(stem.name + ".md"), md.rstrip("\n") + "\n")


# ------------------------------------------------------------------ compiled programs

# HLO ops that launch no kernel of their own: bookkeeping of buffers and tuples.
_FREE_OPS = frozenset(
    {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all"}
)


HLO_COUNTS = ("ops", "ops_all_branches", "fused", "while_loops")


def hlo_op_count(hlo_text: str) -> dict[str, int]:
    """Counts the ops of a compiled XLA module (``compiled.as_text()``).

    ``ops``: instructions of the computations that run op by op (the entry computation,
    while bodies and conditions, called computations, and of each conditional the
    branch with the most ops: one branch runs), without those that launch nothing
    (parameters, constants, tuples, bitcasts). A fusion counts as one op and what is
    fused into it (and a reduction's reducer) is not counted: on a GPU each counted op
    is about one kernel launch. ``ops_all_branches``: the same with every branch of
    every conditional counted (the count before conditionals were told apart).
    ``fused``: the instructions inside fusions. ``while_loops``: how many while loops
    the module has.

    Args:
      hlo_text: the optimized module's text.

    Returns:
      ``{"ops", "ops_all_branches", "fused", "while_loops"}``.
    """
    comps: dict[str, list[str]] = {}
    name = None
    for line in hlo_text.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if head and not line.startswith(" "):
            name = head.group(1)
            comps[name] = []
        elif name is not None and line.startswith("  ") and " = " in line:
            comps[name].append(line)
    inlined = set()  # computations run inside one op: fusion bodies, reducers
    branch_sets = []  # the branches of each conditional
    for lines in comps.values():
        for line in lines:
            inlined.update(re.findall(r"(?:calls|to_apply)=%?([\w.\-]+)", line))
            branches = re.search(r"branch_computations=\{([^}]*)\}", line)
            if branches:
                branch_sets.append(re.findall(r"%?([\w.\-]+)", branches.group(1)))
            else:
                pair = re.findall(r"(?:true|false)_computation=%?([\w.\-]+)", line)
                if pair:
                    branch_sets.append(pair)
    ops = fused = loops = 0
    per_comp: dict[str, int] = {}
    for name, lines in comps.items():
        for line in lines:
            op = re.search(r" = [^ ]+(?: [^ ]+)*? ([a-z][a-z0-9\-]*)\(", line)
            op = op.group(1) if op else "?"
            if name in inlined:
                fused += 1
            elif op not in _FREE_OPS:
                ops += 1
                per_comp[name] = per_comp.get(name, 0) + 1
                loops += op == "while"
    not_run = sum(
        sum(per_comp.get(b, 0) for b in bs) - max(per_comp.get(b, 0) for b in bs)
        for bs in branch_sets
    )
    return {
        "ops": ops - not_run,
        "ops_all_branches": ops,
        "fused": fused,
        "while_loops": loops,
    }


def compiled_stats(compiled: Any) -> dict[str, Any]:
    """What XLA says of a compiled program (``jax.jit(f).lower(...).compile()``).

    Args:
      compiled: the compiled program.

    Returns:
      :func:`hlo_op_count`'s counts, plus ``xla_temp_mb`` (temporaries) and
      ``xla_step_mb`` (arguments + outputs + temporaries; both None where the backend
      gives no memory plan), ``gflop`` and ``mb_accessed`` (cost analysis; 0 where it
      gives none).
    """
    out: dict[str, Any] = dict(hlo_op_count(compiled.as_text()))
    mem = compiled.memory_analysis()
    out["xla_temp_mb"] = mem.temp_size_in_bytes / 2**20 if mem else None
    out["xla_step_mb"] = (
        (mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes)
        / 2**20
        if mem
        else None
    )
    cost = compiled.cost_analysis()
    cost = (cost[0] if isinstance(cost, list) else cost) or {}
    out["gflop"] = cost.get("flops", 0) / 1e9
    out["mb_accessed"] = cost.get("bytes accessed", 0) / 1e6
    return out


def num_params(tree: Any) -> int:
    """How many numbers a parameter tree holds."""
    import jax  # noqa: PLC0415

    return int(sum(x.size for x in jax.tree_util.tree_leaves(tree)))


# ----------------------------------------------------------- process: cores and memory


def pin_threads(threads: int) -> list[int]:
    """Pins this process to its first ``threads`` allowed cores (call before any
    framework starts its thread pools); returns them."""
    cores = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cores)
    return cores


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (``ru_maxrss``), MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def status_mb(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmHWM``, ``VmRSS``), MiB.

    Raises:
      KeyError: the field is not there.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


def reset_peak_rss() -> bool:
    """Resets VmHWM to the current RSS (Linux >= 4.0), so later peaks exclude what ran
    before (compilation); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# ------------------------------------------------- one measurement per subprocess


def emit(result: Mapping[str, Any]) -> None:
    """A worker's result: one JSON line, the last of its stdout."""
    print(json.dumps(result), flush=True)


def run_worker(args: Sequence[str], script: str | Path) -> tuple[dict | None, str]:
    """Runs ``python SCRIPT ARGS`` in a fresh process (its own peak memory and
    compiles), with the repository on ``PYTHONPATH``.

    Args:
      args: the worker's command-line arguments.
      script: the script to run (the caller's ``__file__``).

    Returns:
      The dict of the worker's last stdout line (:func:`emit`), or None when it failed;
      and the tail of its stderr.
    """
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode:
        return None, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr[-2000:]
