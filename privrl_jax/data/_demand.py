"""Daily demand series for the inventory simulator (POOL, pool.txt Sec. 5.1).

POOL's experiments use synthetic demand and the Rossmann store-sales data (Kaggle
"Rossmann Store Sales", train.csv: Store, DayOfWeek, Date, Sales, Customers, Open,
Promo, StateHoliday, SchoolHoliday). Nothing is downloaded: :func:`load_rossmann`
reads a file the user has; :func:`synthetic_demand` is the deterministic default
with weekly seasonality. Both return a [T, w] float array whose day 0 is weekday
0, scaled by :func:`scale_demand` into capacity units (mean ``target_mean`` per
product). The series parameterise the simulator (its demand law); they are not
the private episodes.

:func:`write_synthetic_rossmann_csv` writes a small CSV in Rossmann's format from a
documented synthetic process (no real data), so that the loader path can be run
end to end by anyone; results on it are "synthetic in Rossmann format", never
"Rossmann".
"""

from __future__ import annotations

import csv
import datetime as _dt
import os
from pathlib import Path

import numpy as np

# Relative demand Monday..Sunday: a retail week that peaks on Friday/Saturday.
WEEKLY_PROFILE = (0.85, 0.9, 0.95, 1.0, 1.2, 1.35, 0.75)
ROSSMANN_COLUMNS = ("Store", "Date", "Sales")


def synthetic_demand(
    num_days: int = 364,
    num_products: int = 1,
    *,
    noise: float = 0.25,
    seed: int = 0,
    target_mean: float = 0.4,
) -> np.ndarray:
    """Deterministic synthetic daily demand: a weekly profile times lognormal noise.

    Product i gets ``WEEKLY_PROFILE`` rotated by i days (so products peak on
    different days) and a mild upward trend of 10% over the series.

    Args:
      num_days: length T of the series in days; day 0 is weekday 0 (Monday).
      num_products: number of products w (columns).
      noise: standard deviation of the log of the multiplicative noise (its mean
        is 1).
      seed: NumPy seed of the noise.
      target_mean: mean of each column after scaling, in capacity units.

    Returns:
      [num_days, num_products] float32 demand, each column with mean
      ``target_mean``.

    Raises:
      ValueError: ``num_days < 7`` or ``num_products < 1``.
    """
    if num_days < 7 or num_products < 1:
        raise ValueError("synthetic_demand needs num_days >= 7 and num_products >= 1")
    rng = np.random.default_rng(seed)
    days = np.arange(num_days)
    cols = []
    for i in range(num_products):
        profile = np.roll(np.asarray(WEEKLY_PROFILE), i)[days % 7]
        trend = 1.0 + 0.1 * days / num_days
        eps = rng.lognormal(-0.5 * noise**2, noise, num_days)
        cols.append(profile * trend * eps)
    return scale_demand(np.stack(cols, 1), target_mean)


def scale_demand(series: np.ndarray, target_mean: float = 0.4) -> np.ndarray:
    """Divides each column by its mean and multiplies it by ``target_mean``.

    Args:
      series: [T, w] nonnegative demand.
      target_mean: mean of each column after scaling, in capacity units.

    Returns:
      [T, w] float32 series, each column with mean ``target_mean``.

    Raises:
      ValueError: a column's mean is <= 0.
    """
    series = np.asarray(series, np.float64)
    mean = series.mean(0, keepdims=True)
    if np.any(mean <= 0):
        raise ValueError("a demand series has mean <= 0; it cannot be scaled")
    return (series / mean * target_mean).astype(np.float32)


def load_rossmann(
    path: str | os.PathLike,
    stores: tuple[int, ...] | list[int] = (1,),
    *,
    open_days_only: bool = True,
    target_mean: float = 0.4,
) -> np.ndarray:
    """Reads the daily sales of some stores from a Rossmann train.csv, scaled.

    Days are aligned so that day 0 is a Monday (weekday 0, ``WEEKLY_PROFILE``'s
    order) and only dates every store has are kept; with ``open_days_only``,
    dates on which any chosen store was closed (Open = 0, or Sales = 0 without an
    Open column) are dropped -- then "weekday h mod 7" counts open days.

    Args:
      path: the CSV file; its header must have the columns Store, Date and Sales
        (Open is used when present).
      stores: Rossmann store ids; one column per distinct id, in increasing order.
      open_days_only: drop the dates on which any chosen store was closed.
      target_mean: mean of each column after scaling, in capacity units.

    Returns:
      [T, w] float32 demand (w distinct stores), each column with mean ``target_mean``;
      T >= 7 usable days.

    Raises:
      ValueError: one line saying what is wrong with the file and how to fix it.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"no Rossmann CSV at {path}; pass the path of train.csv from the "
            "Kaggle 'Rossmann Store Sales' data"
        )
    wanted = {int(s) for s in stores}
    if not wanted:
        raise ValueError("choose at least one store (env.stores)")
    sales: dict[int, dict[_dt.date, float]] = {s: {} for s in wanted}
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [
                c for c in ROSSMANN_COLUMNS if c not in (reader.fieldnames or [])
            ]
            if missing:
                raise ValueError(
                    f"{path} lacks the column(s) {missing}; a Rossmann train.csv has "
                    f"{', '.join(ROSSMANN_COLUMNS)}, ... in its header row"
                )
            for i, row in enumerate(reader, start=2):
                try:
                    store = int(row["Store"])
                    if store not in wanted:
                        continue
                    day = _dt.date.fromisoformat(row["Date"])
                    value = float(row["Sales"])
                    is_open = row.get("Open")
                    closed = (is_open is not None and is_open.strip() == "0") or (
                        is_open is None and value == 0
                    )
                except (TypeError, ValueError) as e:
                    raise ValueError(
                        f"{path} line {i} is not a Rossmann row (Store int, Date "
                        "YYYY-MM-DD, "
                        f"Sales number): {e}"
                    ) from None
                if value < 0:
                    raise ValueError(f"{path} line {i}: negative Sales {value}")
                if open_days_only and closed:
                    sales[store][day] = np.nan
                else:
                    sales[store][day] = value
    except UnicodeDecodeError:
        raise ValueError(
            f"{path} is not a text CSV file; pass Rossmann's train.csv"
        ) from None
    empty = sorted(s for s, d in sales.items() if not d)
    if empty:
        raise ValueError(
            f"{path} has no rows for store(s) {empty}; choose stores it holds"
        )
    dates = sorted(set.intersection(*(set(d) for d in sales.values())))
    while dates and dates[0].weekday() != 0:  # start on a Monday
        dates = dates[1:]
    table = np.array([[sales[s][d] for s in sorted(wanted)] for d in dates], np.float64)
    table = table[~np.isnan(table).any(1)] if len(table) else table
    if table.shape[0] < 7:
        raise ValueError(
            f"{path} gives only {table.shape[0]} usable days for stores "
            f"{sorted(wanted)}; at least 7 are needed"
        )
    return scale_demand(table, target_mean)


ROSSMANN_HEADER = (
    "Store",
    "DayOfWeek",
    "Date",
    "Sales",
    "Customers",
    "Open",
    "Promo",
    "StateHoliday",
    "SchoolHoliday",
)
# Fixed-date public holidays (month, day) with Rossmann's StateHoliday codes:
# a = public holiday, c = Christmas. Stores are closed on them.
_HOLIDAYS = {(1, 1): "a", (5, 1): "a", (10, 3): "a", (12, 25): "c", (12, 26): "c"}


def write_synthetic_rossmann_csv(
    path: str | os.PathLike,
    num_stores: int = 3,
    *,
    start: str = "2014-01-06",
    num_days: int = 364,
    seed: int = 0,
) -> Path:
    """Writes a SYNTHETIC sales table in the Rossmann train.csv format.

    Not real data. The process, per store s and date t (all draws from ``seed``):

    * base level B_s ~ 5000 lognormal(0, 0.3); a store-specific weekday profile
      (Monday 1.15, Tuesday-Friday 1.0 +- 0.05, Saturday 0.9 +- 0.05) --
      Sundays closed (Open = 0, Sales = 0, as most Rossmann stores);
    * promotions: Promo = 1 Monday-Friday of every other week (store-specific
      phase), sales x (1.2 + 0.2 u_s), u_s ~ U(0, 1);
    * public holidays (1 Jan, 1 May, 3 Oct, 25-26 Dec): closed, StateHoliday a/c;
      the open day before one sells 20% more;
    * school holidays (15 July-31 August, 22-31 December): SchoolHoliday = 1, x 1.05;
      December before Christmas x 1.25;
    * noise: x lognormal(0, 0.12); Customers = Sales / basket, basket ~ 9 +- 0.5.

    Rows are written newest date first, as in Kaggle's file.

    Args:
      path: the CSV file to write; its parent directories are created.
      num_stores: number of stores, with ids 1..num_stores.
      start: first date, ISO format (YYYY-MM-DD).
      num_days: number of consecutive days per store.
      seed: NumPy seed of every draw.

    Returns:
      ``path`` as a `Path`.

    Raises:
      ValueError: ``num_stores < 1`` or ``num_days < 7``.
    """
    if num_stores < 1 or num_days < 7:
        raise ValueError(
            "write_synthetic_rossmann_csv needs num_stores >= 1, num_days >= 7"
        )
    rng = np.random.default_rng(seed)
    first = _dt.date.fromisoformat(start)
    dates = [first + _dt.timedelta(days=i) for i in range(num_days)]
    rows = []
    for store in range(1, num_stores + 1):
        base = 5000.0 * rng.lognormal(0.0, 0.3)
        profile = np.array(
            [
                1.15,
                *(1.0 + 0.05 * rng.uniform(-1, 1, 4)),
                0.9 + 0.05 * rng.uniform(-1, 1),
                0.0,
            ]
        )
        promo_gain = 1.2 + 0.2 * rng.uniform()
        phase = int(rng.integers(2))
        basket = 9.0 + 0.5 * rng.uniform(-1, 1)
        for d in dates:
            wd = d.weekday()
            holiday = _HOLIDAYS.get((d.month, d.day), "0")
            school = int(
                (d.month, d.day) >= (7, 15)
                and d.month <= 8
                or (d.month == 12 and d.day >= 22)
            )
            promo = int(wd < 5 and ((d.isocalendar()[1] + phase) % 2 == 0))
            is_open = int(wd != 6 and holiday == "0")
            sales = 0.0
            if is_open:
                sales = base * profile[wd] * rng.lognormal(0.0, 0.12)
                sales *= promo_gain if promo else 1.0
                sales *= 1.05 if school else 1.0
                sales *= 1.25 if d.month == 12 and d.day < 25 else 1.0
                nxt = d + _dt.timedelta(days=1)
                sales *= 1.2 if (nxt.month, nxt.day) in _HOLIDAYS else 1.0
            customers = round(sales / basket)
            rows.append(
                (
                    store,
                    wd + 1,
                    d.isoformat(),
                    round(sales),
                    customers,
                    is_open,
                    promo,
                    holiday,
                    school,
                )
            )
    rows.sort(key=lambda r: (r[2], -r[0]), reverse=True)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(ROSSMANN_HEADER)
        writer.writerows(rows)
    return path
