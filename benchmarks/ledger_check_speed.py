"""What the ledger's epsilon costs at each checkpoint, with its PLD cache and without.

At every commit :func:`privacy.fit` records the stretch of steps and asks the ledger
for the epsilon spent (the progress bar shows it), and on resume it checks the budget
of the remaining steps. Under PLD (the only accountant of truncated-Poisson sampling)
that used to rebuild the PLD of one step from scratch each time. This script runs a
loop of ``--checkpoints`` commits of ``--every`` steps on one ledger and, at each
commit, times side by side (alternating which goes first):

- ``uncached``: ``privacy.compute_epsilon(ledger.event(), delta, accountant="pld")``,
  dp-accounting's accountant built fresh (what the ledger did before);
- ``cached``: ``ledger.epsilon("pld")`` (single-step PLDs built once per ledger,
  epsilons remembered per chain).

It asserts the two epsilons are the same float at every commit, then times a resume's
budget check (``ledger.check``) both ways on a reloaded ledger.

    python benchmarks/ledger_check_speed.py [--checkpoints 8] [--every 5]

Writes benchmarks/results/ledger_check_speed.{json,md} and prints the table.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import _harness as h
import dp_accounting

from privrl_jax import privacy

DELTA = 1e-6
# The samplers of tests/pipelines/test_dp_loop.py (N = 200, q = 0.05, sigma = 1.2).
EVENTS = {
    "truncated_poisson": dp_accounting.TruncatedSubsampledGaussianDpEvent(
        dataset_size=200,
        sampling_probability=0.05,
        truncated_batch_size=8,
        noise_multiplier=1.2,
    ),
    "poisson": dp_accounting.PoissonSampledDpEvent(
        0.05, dp_accounting.GaussianDpEvent(1.2)
    ),
}


def run(name: str, checkpoints: int, every: int, tmp: Path) -> dict:
    """One sampler's loop of commits: per-commit seconds both ways and the resume
    check."""
    event = EVENTS[name]
    ledger = privacy.Ledger.open(
        tmp / name,
        dataset_id="toy",
        dataset_size=200,
        target_epsilon=1e6,
        target_delta=DELTA,
    )
    cached, uncached = [], []
    for k in range(checkpoints):
        ledger.record(event, what="toy step", count=every)

        def fresh():
            return privacy.compute_epsilon(ledger.event(), DELTA, accountant="pld")

        def mine():
            return ledger.epsilon("pld")

        first, second = (fresh, mine) if k % 2 == 0 else (mine, fresh)
        (a, ta), (b, tb) = h.timed(first), h.timed(second)
        (ref, t_ref), (got, t_got) = (
            ((a, ta), (b, tb)) if first is fresh else ((b, tb), (a, ta))
        )
        assert got.epsilon == ref.epsilon, (got.epsilon, ref.epsilon)
        uncached.append(t_ref)
        cached.append(t_got)
    # A resume: a ledger loaded from disk (empty caches) checks the remaining steps.
    loaded = privacy.Ledger.load(tmp / name)
    extra = [(event, every * checkpoints)]
    (ref, t_check_ref) = h.timed(
        lambda: privacy.compute_epsilon(loaded.event(extra), DELTA, accountant="pld")
    )
    (got, t_check) = h.timed(lambda: loaded.check(event, extra[0][1], accountant="pld"))
    assert got == ref.epsilon
    return {
        "sampler": name,
        "checkpoints": checkpoints,
        "steps_per_checkpoint": every,
        "uncached_s": uncached,
        "cached_s": cached,
        "uncached_total_s": sum(uncached),
        "cached_total_s": sum(cached),
        "resume_check_uncached_s": t_check_ref,
        "resume_check_cached_s": t_check,
        "epsilon_final": ref.epsilon,
        "bit_identical": True,
    }


def _markdown(rows: list[dict], load: str) -> str:
    cells = []
    for r in rows:
        later = r["cached_s"][1:] or [float("nan")]
        cells.append(
            (
                r["sampler"],
                f"{r['checkpoints']} x {r['steps_per_checkpoint']}",
                f"{r['uncached_total_s']:.2f}",
                f"{r['cached_total_s']:.2f}",
                f"{r['uncached_total_s'] / r['cached_total_s']:.1f}x",
                f"{r['cached_s'][0]:.2f} / {sum(later) / len(later):.2f}",
                f"{r['resume_check_uncached_s']:.2f} / "
                f"{r['resume_check_cached_s']:.2f}",
                "bit-identical" if r["bit_identical"] else "NO",
            )
        )
    head = (
        "sampler",
        "commits x steps",
        "uncached, all commits (s)",
        "cached (s)",
        "speed-up",
        "cached, first / later commits (s)",
        "resume check uncached / cached (s)",
        "epsilon equal",
    )
    return f"Load during the run: `{load}`.\n\n{h.markdown_table(head, cells)}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoints", type=int, default=8)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--samplers", nargs="+", default=list(EVENTS))
    args = parser.parse_args()
    load = h.load_now()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run(s, args.checkpoints, args.every, Path(tmp)) for s in args.samplers]
    load = f"{load} (start) -> {h.load_now()}"
    md = _markdown(rows, load)
    print(md)
    h.write_outputs(h.RESULTS / "ledger_check_speed", {"rows": rows, "load": load}, md)


if __name__ == "__main__":
    main()
