"""The privacy ledger: a persisted record of every DP release of a run, with a budget guard.

The ledger is a JSON file (``ledger.json``) written atomically beside a run's checkpoints. Each entry
is one kind of release (a dp-accounting event, serialised), how many times it happened, what it
released and when. Consecutive identical releases (the steps of one DP-SGD run) are kept as one entry
with a count, so a million steps stay one line while the count is exact. Total epsilon is computed by
dp-accounting over the composition of all entries, under RDP and PLD.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import attr
import dp_accounting

from privrl_jax.privacy import _accounting

LEDGER_FILE = "ledger.json"
_FORMAT = "privrl_jax.ledger/1"


class BudgetExceededError(RuntimeError):
    """A release would take the run past its (epsilon, delta) budget; nothing was released."""


class LedgerError(ValueError):
    """A ledger file is corrupt, or belongs to another dataset or budget."""


def event_to_dict(event: dp_accounting.DpEvent) -> dict[str, Any]:
    """Serialises a dp-accounting event (an attrs class tree) to plain JSON types."""
    out: dict[str, Any] = {"type": type(event).__name__}
    for field in attr.fields(type(event)):
        value = getattr(event, field.name)
        if isinstance(value, dp_accounting.DpEvent):
            value = event_to_dict(value)
        elif isinstance(value, (list, tuple)):
            value = [event_to_dict(v) if isinstance(v, dp_accounting.DpEvent) else v for v in value]
        out[field.name] = value
    return out


def event_from_dict(data: dict[str, Any]) -> dp_accounting.DpEvent:
    """Inverse of :func:`event_to_dict`; raises :class:`LedgerError` for unknown event types."""
    data = dict(data)
    name = data.pop("type", None)
    cls = getattr(dp_accounting, str(name), None)
    if not (isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)):
        raise LedgerError(f"unknown dp-accounting event type {name!r} in the ledger.")
    kwargs = {}
    for key, value in data.items():
        if isinstance(value, dict) and "type" in value:
            value = event_from_dict(value)
        elif isinstance(value, list):
            value = [event_from_dict(v) if isinstance(v, dict) and "type" in v else v for v in value]
        kwargs[key] = value
    return cls(**kwargs)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Release:
    """One kind of DP release and how many times it happened."""

    event: dict[str, Any]
    count: int
    what: str
    params: dict[str, Any]
    first_time: str
    last_time: str

    def dp_event(self) -> dp_accounting.DpEvent:
        single = event_from_dict(self.event)
        return single if self.count == 1 else dp_accounting.SelfComposedDpEvent(single, self.count)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


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

    Create or reopen it with :meth:`open`; ``record`` persists before it returns, so a crash after a
    release can never lose it. ``check`` raises *before* a release that would exceed the budget.
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
    ):
        self.path = Path(path)
        self.dataset_id = dataset_id
        self.dataset_size = int(dataset_size)
        self.target_epsilon = float(target_epsilon)
        self.target_delta = float(target_delta)
        self.releases: list[Release] = list(releases or [])

    # ------------------------------------------------------------------ persistence
    @classmethod
    def open(
        cls,
        run_dir: str | os.PathLike,
        *,
        dataset_id: str,
        dataset_size: int,
        target_epsilon: float,
        target_delta: float,
    ) -> "Ledger":
        """Opens the ledger of ``run_dir``, creating it if absent.

        Args:
          run_dir: the run's directory (the ledger is ``run_dir/ledger.json``).
          dataset_id: identifies the sensitive dataset (e.g. a content hash); a ledger of another
            dataset is refused, since its budget says nothing about this one.
          dataset_size: number of privacy units N (for the delta >= 1/N warning).
          target_epsilon, target_delta: the run's budget; must equal the stored budget on reopen.

        Raises:
          LedgerError: the file is corrupt or belongs to another dataset or budget.
        """
        if not (isinstance(target_epsilon, (int, float)) and target_epsilon > 0):
            raise ValueError(f"target_epsilon must be > 0 (inf for no budget); got {target_epsilon!r}.")
        _accounting.validate_delta(target_delta, dataset_size=dataset_size)
        path = Path(run_dir) / LEDGER_FILE
        if not path.exists():
            ledger = cls(
                path,
                dataset_id=dataset_id,
                dataset_size=dataset_size,
                target_epsilon=target_epsilon,
                target_delta=target_delta,
            )
            ledger.save()
            return ledger
        ledger = cls.load(path)
        if ledger.dataset_id != dataset_id:
            raise LedgerError(
                f"{path} belongs to dataset {ledger.dataset_id!r}, not {dataset_id!r}: a run directory "
                "holds the ledger of one sensitive dataset. Use a new run directory for this dataset."
            )
        if (ledger.target_epsilon, ledger.target_delta) != (float(target_epsilon), float(target_delta)):
            raise LedgerError(
                f"{path} was opened with budget (epsilon={ledger.target_epsilon}, "
                f"delta={ledger.target_delta}), now (epsilon={target_epsilon}, delta={target_delta}); "
                "a budget cannot change mid-run. Use a new run directory."
            )
        return ledger

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Ledger":
        """Reads a ledger file; :class:`LedgerError` if it is not a valid privrl_jax ledger."""
        path = Path(path)
        if path.is_dir():
            path = path / LEDGER_FILE
        try:
            data = json.loads(path.read_text())
            if data.get("format") != _FORMAT:
                raise KeyError("format")
            releases = [Release(**r) for r in data["releases"]]
            for r in releases:
                if not isinstance(r.count, int) or r.count < 1:
                    raise ValueError(f"release count {r.count!r}")
                r.dp_event()
            return cls(
                path,
                dataset_id=data["dataset_id"],
                dataset_size=data["dataset_size"],
                target_epsilon=data["target_epsilon"],
                target_delta=data["target_delta"],
                releases=releases,
            )
        except FileNotFoundError:
            raise LedgerError(f"no ledger at {path}: this is not a privrl_jax run directory.") from None
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise LedgerError(
                f"the ledger {path} is corrupt ({type(e).__name__}: {e}). Do not edit it by hand; if the "
                "run's releases are unknown, its privacy spend is unknown: start a new run directory."
            ) from e

    def save(self) -> None:
        _atomic_write_json(
            self.path,
            {
                "format": _FORMAT,
                "dataset_id": self.dataset_id,
                "dataset_size": self.dataset_size,
                "target_epsilon": self.target_epsilon,
                "target_delta": self.target_delta,
                "releases": [dataclasses.asdict(r) for r in self.releases],
            },
        )

    # ------------------------------------------------------------------ accounting
    @property
    def num_releases(self) -> int:
        """Total number of releases (DP-SGD steps count one each)."""
        return sum(r.count for r in self.releases)

    def event(self, extra: list[tuple[dp_accounting.DpEvent, int]] = ()) -> dp_accounting.DpEvent:
        """The composition of all recorded releases (plus ``extra`` planned ones)."""
        events = [r.dp_event() for r in self.releases]
        events += [e if n == 1 else dp_accounting.SelfComposedDpEvent(e, n) for e, n in extra]
        return dp_accounting.ComposedDpEvent(events)

    def epsilon(
        self, accountant: _accounting.Accountant = "rdp", *, extra=()
    ) -> _accounting.EpsilonReport:
        """Total epsilon at the budget's delta (0 when nothing was released)."""
        event = self.event(extra)
        if not event.events:
            return _accounting.EpsilonReport(
                epsilon=0.0, delta=self.target_delta, accountant=accountant, neighboring="-"
            )
        try:
            return _accounting.compute_epsilon(event, self.target_delta, accountant=accountant)
        except ValueError:
            if accountant == "rdp":  # e.g. truncated Poisson, which only PLD supports
                return _accounting.compute_epsilon(event, self.target_delta, accountant="pld")
            raise

    def check(self, event: dp_accounting.DpEvent, count: int = 1, *, accountant="rdp") -> float:
        """Epsilon after ``count`` more ``event`` releases; raises if it exceeds the budget.

        Raises:
          BudgetExceededError: nothing has been released; the message says what is left.
        """
        after = self.epsilon(accountant, extra=[(event, count)]).epsilon
        if after > self.target_epsilon * (1 + 1e-9):
            spent = self.epsilon(accountant).epsilon
            raise BudgetExceededError(
                f"{count} more release(s) of {type(event).__name__} would bring epsilon to {after:.4g} > "
                f"budget {self.target_epsilon:g} (delta={self.target_delta:g}; spent so far {spent:.4g} "
                f"over {self.num_releases} releases, {accountant.upper()}). Raise the noise multiplier, "
                "take fewer steps or a smaller sampling rate, or start a run with a larger budget."
            )
        return after

    def record(
        self, event: dp_accounting.DpEvent, *, what: str, count: int = 1, params: dict | None = None
    ) -> None:
        """Appends ``count`` releases of ``event`` and saves atomically.

        Consecutive releases with the same event, description and parameters are merged into one
        entry whose count grows, so the file stays small.
        """
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be an int >= 1; got {count!r}.")
        ev = event_to_dict(event)
        params = dict(params or {})
        now = _now()
        last = self.releases[-1] if self.releases else None
        if last is not None and (last.event, last.what, last.params) == (ev, what, params):
            self.releases[-1] = dataclasses.replace(last, count=last.count + count, last_time=now)
        else:
            self.releases.append(
                Release(event=ev, count=count, what=what, params=params, first_time=now, last_time=now)
            )
        self.save()

    def report(self) -> dict[str, Any]:
        """What was spent, under RDP and PLD, as a JSON-ready dict."""
        out: dict[str, Any] = {
            "dataset_id": self.dataset_id,
            "dataset_size": self.dataset_size,
            "budget": {"epsilon": self.target_epsilon, "delta": self.target_delta},
            "num_releases": self.num_releases,
            "releases": [
                {"what": r.what, "count": r.count, "event": r.event, "params": r.params}
                for r in self.releases
            ],
        }
        for acc in ("rdp", "pld"):
            try:
                out[acc] = self.epsilon(acc).to_dict()
            except ValueError as e:
                out[acc] = {"error": str(e)}
        return out
