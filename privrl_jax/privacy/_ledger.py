"""The privacy ledger: a tamper-evident record of every DP release of a run.

It comes with a budget guard.

The ledger is a JSON file (``ledger.json``) written atomically beside a run's
checkpoints. Each entry is a batch of identical releases (a dp-accounting event,
serialised, and how many times it happened, what it released, the mechanism's parameters
and when). Entries are only ever appended, and each is chained to the one before by a
SHA-256 hash over its content and the previous hash; the header (dataset, size, budget)
starts the chain. The newest hash, the *head*, is also stored in every checkpoint and in
the metadata of every released file, so:

- an edited entry (a count lowered, a sigma raised) breaks the chain at that entry;
- an event that disagrees with its recorded parameters is refused (the event is
  recomputed from them);
- a truncated or replaced ledger no longer contains the head that a checkpoint or a
  release holds;
- a missing ledger is never replaced by an empty one while checkpoints or a release
  exist.

What it does not protect against: someone who rewrites the ledger *and* every checkpoint
and release consistently (the hash has no secret key), or who deletes the whole run
directory. It guards against mistakes and casual edits, not against the data owner's own
adversarial tampering.

Total epsilon is computed by dp-accounting over the composition of all entries
(consecutive identical events grouped), under RDP and PLD.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attr
import dp_accounting

from privrl_jax.privacy import _accounting, _plan

LEDGER_FILE = "ledger.json"
_FORMAT = "privrl_jax.ledger/2"
# The fields of DPPlan.describe() that define a plan (the rest are derived from them).
_PLAN_KEYS = (
    "sampling",
    "neighboring",
    "dataset_size",
    "sampling_rate",
    "capacity",
    "steps",
    "l2_clip_norms",
    "noise_multipliers",
    "mechanism",
    "l2_sensitivity",
    "noise_multiplier",
)


# The advice of a BudgetExceededError to a Python API user (pipelines pass their own).
BUDGET_HINT = (
    "Raise the noise multiplier (DPPlan(noise_multiplier=...), or calibrate to a "
    "larger target epsilon), take fewer steps (DPPlan(steps=...)) or a smaller "
    "sampling rate (the sampler's sampling_rate), or start a new run directory with a "
    "larger budget."
)


class BudgetExceededError(RuntimeError):
    """A release would take the run past its (epsilon, delta) or rho budget.

    Nothing was released.
    """


class LedgerError(ValueError):
    """A ledger file is corrupt, or belongs to another dataset or budget."""


def event_to_dict(event: dp_accounting.DpEvent) -> dict[str, Any]:
    """Serialises a dp-accounting event (an attrs class tree) to plain JSON types.

    Args:
      event: any dp-accounting event, composed ones included.

    Returns:
      ``{"type": <event class name>, <field>: <value>, ...}``, with nested events
      serialised the same way: what the ledger stores and reads back.
    """
    out: dict[str, Any] = {"type": type(event).__name__}
    for field in attr.fields(type(event)):
        value = getattr(event, field.name)
        if isinstance(value, dp_accounting.DpEvent):
            value = event_to_dict(value)
        elif isinstance(value, (list, tuple)):
            value = [
                event_to_dict(v) if isinstance(v, dp_accounting.DpEvent) else v
                for v in value
            ]
        out[field.name] = value
    return out


def event_from_dict(data: dict[str, Any]) -> dp_accounting.DpEvent:
    """Inverse of :func:`event_to_dict`.

    Raises :class:`LedgerError` for unknown event types.
    """
    data = dict(data)
    name = data.pop("type", None)
    cls = getattr(dp_accounting, str(name), None)
    # Events dp-accounting does not export at its top level (RepeatAndSelectDpEvent).
    cls = cls or getattr(dp_accounting.dp_event, str(name), None)
    # Ours: the pointwise max of a heterogeneous selection's candidates.
    cls = cls or {"PointwiseMaxDpEvent": _accounting.PointwiseMaxDpEvent}.get(str(name))
    if not (isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)):
        raise LedgerError(f"unknown dp-accounting event type {name!r} in the ledger.")
    kwargs = {}
    for key, value in data.items():
        if isinstance(value, dict) and "type" in value:
            value = event_from_dict(value)
        elif isinstance(value, list):
            value = [
                event_from_dict(v) if isinstance(v, dict) and "type" in v else v
                for v in value
            ]
        kwargs[key] = value
    return cls(**kwargs)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Release:
    """``count`` identical releases of one event.

    Chained to the entry before by ``prev``/``hash``.
    """

    event: dict[str, Any]
    count: int
    what: str
    params: dict[str, Any]
    time: str
    prev: str
    hash: str

    def payload(self) -> dict[str, Any]:
        """What the hash covers (everything but the hash itself)."""
        return {
            "event": self.event,
            "count": self.count,
            "what": self.what,
            "params": self.params,
            "time": self.time,
        }

    def dp_event(self) -> dp_accounting.DpEvent:
        single = event_from_dict(self.event)
        return (
            single
            if self.count == 1
            else dp_accounting.SelfComposedDpEvent(single, self.count)
        )


def _digest(prev: str, payload: dict[str, Any]) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256((prev + text).encode()).hexdigest()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _atomic_write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class Ledger:
    """The record of a run's DP releases and its budget.

    Create or reopen it with :meth:`open`; ``record`` persists before it returns, so a
    crash after a release can never lose it. ``check`` raises *before* a release that
    would exceed the budget. Loading verifies the hash chain and every event against its
    parameters.

    The budget is (epsilon, delta), or a zCDP budget ``rho_budget`` (e.g. POOL's): then
    ``check`` also refuses a release that would take :meth:`rho` past it, and the
    stored epsilon budget is the rho budget's (:func:`zcdp_epsilon`), so reopening with
    another rho budget is refused like any other budget change.
    """

    def __init__(
        self,
        path: Path,
        *,
        dataset_id: str,
        dataset_size: int,
        target_epsilon: float,
        target_delta: float,
        releases: list[Release] | None = None,
        not_private: str | None = None,
        rho_budget: float | None = None,
    ):
        self.path = Path(path)
        self.dataset_id = dataset_id
        self.dataset_size = int(dataset_size)
        self.target_epsilon = float(target_epsilon)
        self.target_delta = float(target_delta)
        self.releases: list[Release] = list(releases or [])
        self.not_private = None if not_private is None else str(not_private)
        # Not in the header (the genesis of a rho-budget run is an epsilon run's): the
        # header's target_epsilon is this budget's epsilon, which pins it on reopen.
        self.rho_budget = None if rho_budget is None else float(rho_budget)
        # Accounting caches, content-keyed (an event, never a position in the chain), so
        # an edited chain can only miss them; a ledger loaded from disk starts empty and
        # recomputes.
        self._pld_cache = _accounting.PLDCache()
        self._epsilons: dict[str, _accounting.EpsilonReport] = {}

    # ------------------------------------------------------------------ the chain
    def _header(self) -> dict[str, Any]:
        header = {
            "format": _FORMAT,
            "dataset_id": self.dataset_id,
            "dataset_size": self.dataset_size,
            "target_epsilon": self.target_epsilon,
            "target_delta": self.target_delta,
        }
        # Only present when set, so the genesis of a private run is what it always was;
        # when set, it is hashed with the header: the mark cannot be removed without
        # breaking the chain.
        if self.not_private is not None:
            header["not_private"] = self.not_private
        return header

    @property
    def genesis(self) -> str:
        """The hash of the header: where the chain starts."""
        return _digest("", self._header())

    @property
    def head(self) -> str:
        """The newest hash of the chain (the genesis when nothing was released)."""
        return self.releases[-1].hash if self.releases else self.genesis

    def contains(self, head: str) -> bool:
        """Whether ``head`` (from a checkpoint or a release) is a hash of this chain."""
        return head == self.genesis or any(r.hash == head for r in self.releases)

    def require_head(self, head: str, where: str) -> None:
        """Raises :class:`LedgerError` unless ``head`` is in the chain.

        ``where`` names the file that recorded ``head``.
        """
        if not self.contains(head):
            raise LedgerError(
                f"{where} was written after ledger entry {head[:12]}..., which "
                f"{self.path} does not "
                "hold: the ledger was truncated or replaced, so the run's privacy "
                "spend is unknown. "
                "Restore the original ledger.json or start a new run directory."
            )

    def require_plan(self, what: str, params: dict[str, Any]) -> None:
        """Raises :class:`LedgerError` unless ``what``'s last entry has plan ``params``.

        ``params`` is ``DPPlan.describe()``: a run directory resumes, or is rerun, only
        under its own plan, never mixing two sigmas (or samplers, clip norms, step
        counts...) in one model.

        The error is one line naming each field that differs, as recorded -> now.
        Nothing is checked when the ledger holds no entry of ``what``.
        """
        recorded = next(
            (r.params for r in reversed(self.releases) if r.what == what), None
        )
        if recorded is None:
            return
        now = json.loads(json.dumps(dict(params)))  # plain JSON types, as recorded
        keys = [k for k in _PLAN_KEYS if recorded.get(k) != now.get(k)]
        # Derived fields (noise stds, sensitivities...) only where no primary differs.
        keys = keys or sorted(
            k for k in recorded.keys() | now.keys() if recorded.get(k) != now.get(k)
        )
        if keys:
            diff = ", ".join(f"{k} {recorded.get(k)} -> {now.get(k)}" for k in keys)
            raise LedgerError(
                f"{self.path.parent} was run under another plan ({diff}); a run "
                f"directory resumes only under the plan its ledger records for "
                f"{what!r}. Rerun with the recorded plan or use a new run directory."
            )

    # ------------------------------------------------------------------ persistence
    @classmethod
    def open(
        cls,
        run_dir: str | os.PathLike,
        *,
        dataset_id: str,
        dataset_size: int,
        target_epsilon: float | None = None,
        target_delta: float,
        rho_budget: float | None = None,
        artifacts: Sequence[str | os.PathLike] = (),
        not_private: str | None = None,
    ) -> Ledger:
        """Opens the ledger of ``run_dir``, creating it if absent.

        Args:
          run_dir: the run's directory (the ledger is ``run_dir/ledger.json``).
          dataset_id: identifies the sensitive dataset (by its source, never by a hash
            of its content); a ledger of another dataset is refused, since its budget
            says nothing about this one.
          dataset_size: number of privacy units N (for the delta >= 1/N warning).
          target_epsilon: the run's epsilon budget; must equal the stored budget on
            reopen.
          target_delta: the run's delta; must equal the stored budget on reopen.
          rho_budget: a zCDP budget instead of ``target_epsilon`` (inf for none): the
            stored epsilon budget is its epsilon at ``target_delta``
            (:func:`zcdp_epsilon`), and :meth:`check` also holds :meth:`rho` to it.
          artifacts: paths whose existence proves that releases happened (checkpoints of
            a DP phase, released files): while any exists, a missing ledger is an error,
            never a new one.
          not_private: why this run's releases are not private although accounted (e.g.
            the noise is fixed by a public seed); stored in the hashed header and shown
            by :meth:`report`.

        Raises:
          LedgerError: the file is missing while artifacts exist, corrupt, edited, or
            belongs to another dataset or budget.
        """
        if rho_budget is not None:
            if target_epsilon is not None:
                raise ValueError("pass target_epsilon or rho_budget, not both.")
            if not (_accounting._is_real(rho_budget) and rho_budget > 0):
                raise ValueError(
                    f"rho_budget must be > 0 (inf for no budget); got {rho_budget!r}."
                )
            target_epsilon = _accounting.zcdp_epsilon(rho_budget, target_delta)
        if not (_accounting._is_real(target_epsilon) and target_epsilon > 0):
            raise ValueError(
                "target_epsilon must be > 0 (inf for no budget); got "
                f"{target_epsilon!r}."
            )
        _accounting.validate_delta(target_delta, dataset_size=dataset_size)
        path = Path(run_dir) / LEDGER_FILE
        if not path.exists():
            found = [str(a) for a in artifacts if Path(a).exists()]
            if found:
                raise LedgerError(
                    f"{path} is missing, but this run directory holds "
                    f"{', '.join(found)}: releases "
                    "happened and their privacy spend is unknown. Restore the original "
                    "ledger.json "
                    "or start a new run directory (a new empty ledger would "
                    "under-report epsilon)."
                )
            ledger = cls(
                path,
                dataset_id=dataset_id,
                dataset_size=dataset_size,
                target_epsilon=target_epsilon,
                target_delta=target_delta,
                not_private=not_private,
                rho_budget=rho_budget,
            )
            ledger.save()
            return ledger
        ledger = cls.load(path)
        ledger.rho_budget = None if rho_budget is None else float(rho_budget)
        if ledger.dataset_id != dataset_id:
            raise LedgerError(
                f"{path} belongs to dataset {ledger.dataset_id!r}, not {dataset_id!r}: "
                "a run directory "
                "holds the ledger of one sensitive dataset. Use a new run directory "
                "for this dataset."
            )
        if ledger.dataset_size != int(dataset_size):
            raise LedgerError(
                f"{path} was opened with dataset_size={ledger.dataset_size}, now "
                f"{dataset_size}: a run directory accounts one set of privacy units. "
                f"Pass dataset_size={ledger.dataset_size} or use a new run directory."
            )
        if (ledger.target_epsilon, ledger.target_delta) != (
            float(target_epsilon),
            float(target_delta),
        ):
            raise LedgerError(
                f"{path} was opened with budget (epsilon={ledger.target_epsilon}, "
                f"delta={ledger.target_delta}), now (epsilon={target_epsilon}, "
                f"delta={target_delta}); "
                "a budget cannot change mid-run. Use a new run directory."
            )
        if ledger.not_private != (None if not_private is None else str(not_private)):
            raise LedgerError(
                f"{path} was written by a run that was "
                f"{'not ' if ledger.not_private else ''}private, "
                f"this one is {'not ' if not_private else ''}private "
                "(privacy.noise_seed differs); "
                "a run directory holds one kind of run. Use a new run directory."
            )
        return ledger

    @classmethod
    def load(cls, path: str | os.PathLike) -> Ledger:
        """Reads and verifies a ledger file.

        Raises:
          LedgerError: missing, not a privrl_jax ledger, corrupt, or edited (a hash that
            does not match its entry, or an event that does not match its recorded
            parameters).
        """
        path = Path(path)
        if path.is_dir():
            path = path / LEDGER_FILE
        try:
            data = json.loads(path.read_text())
            if data.get("format") != _FORMAT:
                raise KeyError(f"format {data.get('format')!r}, expected {_FORMAT!r}")
            releases = [Release(**r) for r in data["releases"]]
            ledger = cls(
                path,
                dataset_id=data["dataset_id"],
                dataset_size=data["dataset_size"],
                target_epsilon=data["target_epsilon"],
                target_delta=data["target_delta"],
                releases=releases,
                not_private=data.get("not_private"),
            )
            stored_genesis = data["genesis"]
        except FileNotFoundError:
            raise LedgerError(
                f"no ledger at {path}: this is not a privrl_jax run directory."
            ) from None
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise LedgerError(
                f"the ledger {path} is corrupt ({type(e).__name__}: {e}). Do not edit "
                "it by hand; if the "
                "run's releases are unknown, its privacy spend is unknown: start a new "
                "run directory."
            ) from e
        ledger._verify(stored_genesis)
        return ledger

    def _verify(self, stored_genesis: str) -> None:
        def edited(what: str) -> LedgerError:
            return LedgerError(
                f"the ledger {self.path} was edited: {what}. Its privacy spend cannot "
                "be trusted; "
                "restore the original file or start a new run directory."
            )

        if stored_genesis != self.genesis:
            raise edited("its header (dataset, size or budget) does not match its hash")
        prev = self.genesis
        for i, r in enumerate(self.releases):
            if r.prev != prev:
                raise edited(f"entry {i} ({r.what}) does not follow entry {i - 1}")
            if r.hash != _digest(prev, r.payload()):
                raise edited(f"entry {i} ({r.what}) does not match its hash")
            if isinstance(r.count, bool) or not isinstance(r.count, int) or r.count < 1:
                raise edited(f"entry {i} has count {r.count!r}")
            try:
                r.dp_event()  # the recorded event must parse
                expected = _plan.event_from_description(r.params)
            except (TypeError, ValueError, KeyError) as e:
                raise edited(f"entry {i} ({r.what}) cannot be read ({e})") from e
            if expected is not None and event_to_dict(expected) != r.event:
                raise edited(
                    f"entry {i} ({r.what}) records {r.event} but its parameters give "
                    f"{event_to_dict(expected)}"
                )
            prev = r.hash

    def save(self) -> None:
        _atomic_write_json(
            self.path,
            {
                **self._header(),
                "genesis": self.genesis,
                "releases": [dataclasses.asdict(r) for r in self.releases],
            },
        )

    # ------------------------------------------------------------------ accounting
    @property
    def num_releases(self) -> int:
        """Total number of releases (DP-SGD steps count one each)."""
        return sum(r.count for r in self.releases)

    def groups(self) -> list[dict[str, Any]]:
        """Consecutive entries with the same event, description and parameters, merged.

        Their counts are summed.
        """
        out: list[dict[str, Any]] = []
        for r in self.releases:
            if out and (out[-1]["event"], out[-1]["what"], out[-1]["params"]) == (
                r.event,
                r.what,
                r.params,
            ):
                out[-1]["count"] += r.count
            else:
                out.append(
                    {
                        "what": r.what,
                        "count": r.count,
                        "event": r.event,
                        "params": r.params,
                    }
                )
        return out

    def event(
        self, extra: Sequence[tuple[dp_accounting.DpEvent, int]] = ()
    ) -> dp_accounting.DpEvent:
        """The composition of all recorded releases (plus ``extra`` planned ones)."""
        events = []
        for g in self.groups():
            single = event_from_dict(g["event"])
            events.append(
                single
                if g["count"] == 1
                else dp_accounting.SelfComposedDpEvent(single, g["count"])
            )
        events += [
            e if n == 1 else dp_accounting.SelfComposedDpEvent(e, n) for e, n in extra
        ]
        return dp_accounting.ComposedDpEvent(events)

    def epsilon(
        self, accountant: _accounting.Accountant = "rdp", *, extra=()
    ) -> _accounting.EpsilonReport:
        """Total epsilon at the budget's delta (0 when nothing was released).

        The same bits as ``compute_epsilon(self.event(extra), ...)``: each step's PLD is
        built once per ledger object and each composed event's epsilon is remembered
        (both keyed on content), so a checkpoint's check costs one composition instead
        of a rebuild of every PLD of the chain.
        """
        event = self.event(extra)
        if not event.events:
            return _accounting.EpsilonReport(
                epsilon=0.0,
                delta=self.target_delta,
                accountant=accountant,
                neighboring="-",
            )
        key = json.dumps(
            [accountant, self.target_delta, event_to_dict(event)], sort_keys=True
        )
        hit = self._epsilons.get(key)
        if hit is None:
            hit = self._compute_epsilon(event, accountant)
            if (
                len(self._epsilons) >= 64
            ):  # bounded: the newest chains are the ones asked
                self._epsilons.pop(next(iter(self._epsilons)))
            self._epsilons[key] = hit
        return hit

    def _compute_epsilon(
        self, event: dp_accounting.DpEvent, accountant: _accounting.Accountant
    ) -> _accounting.EpsilonReport:
        try:
            return _accounting.compute_epsilon(
                event,
                self.target_delta,
                accountant=accountant,
                pld_cache=self._pld_cache,
            )
        except ValueError:
            if accountant == "rdp":  # e.g. truncated Poisson, which only PLD supports
                return _accounting.compute_epsilon(
                    event,
                    self.target_delta,
                    accountant="pld",
                    pld_cache=self._pld_cache,
                )
            raise

    def rho(self) -> float:
        """The zCDP rho of the recorded releases.

        The sum of :func:`zcdp_rho` over the entries.

        Raises:
          LedgerError: an entry has no exact zCDP guarantee (e.g. a subsampled DP-SGD
            step), so a rho budget cannot account it.
        """
        total = 0.0
        for r in self.releases:
            try:
                total += _accounting.zcdp_rho(r.dp_event())
            except ValueError as e:
                raise LedgerError(
                    f"{self.path} holds a release of {r.what!r} that a rho budget "
                    f"cannot account ({e})."
                ) from None
        return total

    def _check_rho(self, event: dp_accounting.DpEvent, count: int) -> None:
        assert self.rho_budget is not None  # called only with a rho budget
        spent = self.rho()
        new = count * _accounting.zcdp_rho(event)
        after = spent + new
        if after > self.rho_budget * (1 + 1e-9):
            raise BudgetExceededError(
                f"{count} more release(s) (rho={new:.4g}) would bring rho to "
                f"{after:.4g} > "
                f"the rho budget {self.rho_budget:g} ({spent:.4g} spent in "
                f"{self.path.parent}). Nothing was released. Add noise (a smaller "
                "rho per release) or start a new run directory with its own budget."
            )

    def check(
        self,
        event: dp_accounting.DpEvent,
        count: int = 1,
        *,
        accountant="rdp",
        hint: str | None = None,
    ) -> float:
        """Epsilon after ``count`` more ``event`` releases.

        Raises if it exceeds the budget (or, with a ``rho_budget``, if their rho does).

        ``hint`` is the error's advice, in the caller's own terms (a CLI names its
        config keys); by default it names the Python API's parameters.

        Raises:
          BudgetExceededError: nothing has been released; the message says what is left.
          ValueError: a rho budget and an event with no exact zCDP guarantee.
        """
        if self.rho_budget is not None:
            self._check_rho(event, count)
        # count 0 (a finished run rerun): the spend so far, without a 0-fold event.
        after = self.epsilon(
            accountant, extra=[(event, count)] if count else []
        ).epsilon
        if after > self.target_epsilon * (1 + 1e-9):
            spent = self.epsilon(accountant).epsilon
            raise BudgetExceededError(
                f"{count} more release(s) of {type(event).__name__} would bring "
                f"epsilon to {after:.4g} > "
                f"budget {self.target_epsilon:g} (delta={self.target_delta:g}; spent "
                f"so far {spent:.4g} "
                f"over {self.num_releases} releases, {accountant.upper()}). Nothing "
                f"was released. {hint or BUDGET_HINT}"
            )
        return after

    def record(
        self,
        event: dp_accounting.DpEvent,
        *,
        what: str,
        count: int = 1,
        params: dict | None = None,
    ) -> None:
        """Appends ``count`` releases of ``event`` as one chained entry.

        The ledger is saved atomically.

        ``params`` describe the mechanism (``DPPlan.describe()``,
        ``GaussianMechanism.describe()``); when they do, loading recomputes the event
        from them and refuses a mismatch.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be an int >= 1; got {count!r}.")
        params = json.loads(
            json.dumps(dict(params or {}))
        )  # plain JSON types, as reloaded
        ev = event_to_dict(event)
        expected = _plan.event_from_description(params)
        if expected is not None and event_to_dict(expected) != ev:
            raise ValueError(f"the event {ev} does not match its parameters {params}.")
        payload: dict[str, Any] = {
            "event": ev,
            "count": count,
            "what": what,
            "params": params,
            "time": _now(),
        }
        self.releases.append(
            Release(**payload, prev=self.head, hash=_digest(self.head, payload))
        )
        self.save()

    def report(self) -> dict[str, Any]:
        """What was spent, under RDP and PLD, as a JSON-ready dict.

        Flags an exceeded budget. With a ``rho_budget``, or when every entry has an
        exact zCDP guarantee, also ``zcdp``: the spent rho (:meth:`rho`) beside the rho
        budget, which then flags ``over_budget`` too.
        """
        out: dict[str, Any] = {
            "dataset_id": self.dataset_id,
            "dataset_size": self.dataset_size,
            "budget": {"epsilon": self.target_epsilon, "delta": self.target_delta},
            "num_releases": self.num_releases,
            "releases": self.groups(),
            "chain_head": self.head,
            "verified": True,
            "not_private": self.not_private,
        }
        over = False
        for acc in ("rdp", "pld"):
            try:
                out[acc] = self.epsilon(acc).to_dict()
                over |= out[acc]["epsilon"] > self.target_epsilon * (1 + 1e-9)
            except ValueError as e:
                out[acc] = {"error": str(e)}
        try:
            rho = self.rho()
            out["zcdp"] = {"rho": rho, "rho_budget": self.rho_budget}
            if self.rho_budget is not None:
                over |= rho > self.rho_budget * (1 + 1e-9)
        except LedgerError as e:
            # A subsampled step has no exact rho: say so only where a rho budget
            # was asked for, so epsilon-budget reports keep their shape.
            if self.rho_budget is not None:
                out["zcdp"] = {"error": str(e), "rho_budget": self.rho_budget}
        out["over_budget"] = bool(over)
        return out
