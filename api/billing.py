"""Prices and bills: the operator's versioned price book, what usage costs, invoices.

Usage is metered in base quantities (:mod:`spate.scheduler.metering`: SCU-seconds,
GiB-seconds, rows); a bill shows billing units — SCU-hours, GiB-months, millions
of events — each at the price of the price-book version in effect when the usage
happened. A version takes effect at a midnight (UTC), so a day of usage has one
price. A month (UTC) is a billing period; once it is over and :data:`CLOSE_GRACE`
has passed (for the meter's last readings to land), its invoice is computed once,
stored and never changes again.

The price book is operator configuration (``SPATE_PRICE_BOOK``, JSON): a list of
versions, each ``{"version", "effective_from" (a date), "currency", "prices":
{dimension: price per billing unit}}``; without it, :data:`DEFAULT_PRICE_BOOK`.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError, field_validator

#: Time after a period's end before its invoice closes.
CLOSE_GRACE = timedelta(hours=1)


@dataclass(frozen=True)
class BillingUnit:
    """How a dimension is billed: its unit's name, and base quantities per unit."""

    name: str
    per_unit: float


#: Each priced dimension's billing unit (dimensions not here are metered, not priced).
BILLING_UNITS: dict[str, BillingUnit] = {
    "compute_unit_seconds": BillingUnit("SCU-hour", 3600.0),
    "state_gb_seconds": BillingUnit("GiB-month", 730 * 3600.0),
    "events_in": BillingUnit("million events read", 1e6),
    "events_out": BillingUnit("million events written", 1e6),
    "preview_seconds": BillingUnit("preview hour", 3600.0),
    "bytes_in": BillingUnit("GiB read", 1024 ** 3),
    "bytes_out": BillingUnit("GiB written", 1024 ** 3),
}


class PriceBookVersion(BaseModel):
    """One version of the price book, in effect from a date until the next version's."""

    version: str = Field(min_length=1, max_length=40)
    effective_from: date
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    #: Price per billing unit (see :data:`BILLING_UNITS`); a dimension left out is free.
    prices: dict[str, float]

    @field_validator("prices")
    @classmethod
    def _known_dimensions(cls, prices: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(prices) - set(BILLING_UNITS))
        if unknown:
            raise ValueError(f"no such priced dimension: {', '.join(unknown)} (priced: "
                             f"{', '.join(BILLING_UNITS)})")
        if any(price < 0 for price in prices.values()):
            raise ValueError("prices cannot be negative")
        return prices

    @property
    def starts(self) -> datetime:
        return datetime.combine(self.effective_from, datetime.min.time(), UTC)


DEFAULT_PRICE_BOOK = [PriceBookVersion(
    version="2026-11", effective_from=date(2026, 1, 1), currency="USD",
    prices={"compute_unit_seconds": 0.12, "state_gb_seconds": 0.10, "events_in": 0.01,
            "events_out": 0.01, "preview_seconds": 0.0, "bytes_in": 0.0,
            "bytes_out": 0.0})]

_VERSIONS = TypeAdapter(list[PriceBookVersion])


class PriceBookError(ValueError):
    """The operator's price book cannot be used; says why."""


class PriceBook:
    """The versions of the price book, oldest first."""

    def __init__(self, versions: list[PriceBookVersion]) -> None:
        if not versions:
            raise PriceBookError("the price book needs at least one version")
        self.versions = sorted(versions, key=lambda version: version.effective_from)
        if len({version.currency for version in self.versions}) != 1:
            raise PriceBookError("every price-book version must use the same currency")
        if len({version.version for version in self.versions}) != len(self.versions):
            raise PriceBookError("price-book version names must be unique")

    @classmethod
    def parse(cls, text: str) -> PriceBook:
        """The price book in ``text`` (JSON; empty: the default)."""
        if not text.strip():
            return cls(list(DEFAULT_PRICE_BOOK))
        try:
            return cls(_VERSIONS.validate_python(json.loads(text)))
        except (ValueError, ValidationError) as error:
            raise PriceBookError(f"SPATE_PRICE_BOOK is not a valid price book: {error}"
                                 ) from None

    @property
    def currency(self) -> str:
        return self.versions[0].currency

    def at(self, moment: datetime) -> PriceBookVersion:
        """The version in effect at ``moment`` (before the first: the first)."""
        current = self.versions[0]
        for version in self.versions:
            if version.starts <= moment:
                current = version
        return current

    def spans(self, start: datetime, end: datetime) -> list[tuple[PriceBookVersion, datetime,
                                                                  datetime]]:
        """The versions in effect over ``[start, end)``, each with its part of it."""
        parts = []
        for index, version in enumerate(self.versions):
            begins = start if index == 0 else max(start, version.starts)
            ends = (end if index + 1 == len(self.versions)
                    else min(end, self.versions[index + 1].starts))
            if begins < ends:
                parts.append((version, begins, ends))
        return parts

    def cost(self, dimension: str, quantity: float, moment: datetime) -> float:
        """What ``quantity`` (base units) of ``dimension`` used at ``moment`` costs."""
        unit = BILLING_UNITS.get(dimension)
        if unit is None:
            return 0.0
        return quantity / unit.per_unit * self.at(moment).prices.get(dimension, 0.0)


def period_of(moment: datetime) -> str:
    return f"{moment.year:04d}-{moment.month:02d}"


def period_bounds(period: str) -> tuple[datetime, datetime]:
    """``[start, end)`` of a ``YYYY-MM`` period; ValueError for anything else."""
    try:
        start = datetime.strptime(period, "%Y-%m").replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"{period!r} is not a period: write YYYY-MM, e.g. 2026-11") from None
    end = (start + timedelta(days=32)).replace(day=1)
    return start, end


def is_closed(period: str, now: datetime) -> bool:
    return period_bounds(period)[1] + CLOSE_GRACE <= now


@dataclass(frozen=True)
class UsageSum:
    """Base quantity of one dimension one pipeline (None: previews) used in a span."""

    pipeline_id: str | None
    pipeline_name: str | None
    dimension: str
    quantity: float


def invoice_lines(book: PriceBook, parts: list[tuple[PriceBookVersion, list[UsageSum]]]
                  ) -> list[dict[str, Any]]:
    """An invoice's lines: per price-book version, pipeline and priced dimension."""
    lines = []
    for version, sums in parts:
        for item in sums:
            unit = BILLING_UNITS.get(item.dimension)
            if unit is None:
                continue
            quantity = item.quantity / unit.per_unit
            price = version.prices.get(item.dimension, 0.0)
            lines.append({
                "pipeline_id": item.pipeline_id, "pipeline_name": item.pipeline_name,
                "dimension": item.dimension, "unit": unit.name,
                "quantity": round(quantity, 6), "unit_price": price,
                "amount": round(quantity * price, 6), "price_book_version": version.version})
    return sorted(lines, key=lambda line: (line["pipeline_name"] or "", line["pipeline_id"]
                                           or "", line["dimension"],
                                           line["price_book_version"]))


def invoice_body(tenant_id: str, period: str, book: PriceBook, lines: list[dict[str, Any]],
                 state: str, closed_at: datetime | None) -> dict[str, Any]:
    """The invoice as the API returns it."""
    total = round(sum(line["amount"] for line in lines), 2)
    return {"tenant_id": tenant_id, "period": period, "state": state,
            "currency": book.currency,
            "closed_at": closed_at.isoformat() if closed_at is not None else None,
            "price_book_versions": sorted({line["price_book_version"] for line in lines}),
            "lines": lines, "total": total}


CSV_COLUMNS = ("period", "pipeline_id", "pipeline_name", "dimension", "unit", "quantity",
               "unit_price", "amount", "currency", "price_book_version")


def invoice_csv(body: dict[str, Any]) -> str:
    """The invoice's lines as CSV, with a closing total line."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for line in body["lines"]:
        writer.writerow([body["period"], line["pipeline_id"] or "",
                         line["pipeline_name"] or "(previews)", line["dimension"],
                         line["unit"], line["quantity"], line["unit_price"], line["amount"],
                         body["currency"], line["price_book_version"]])
    writer.writerow([body["period"], "", "", "total", "", "", "", body["total"],
                     body["currency"], ""])
    return out.getvalue()
