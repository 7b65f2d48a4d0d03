"""Words for an alignment figure, computed from the same weights the figure draws.

A page that says "the year looks at the end of the source" would go stale the day the
model is trained on another machine or seed; these helpers print what this build's
weights show, next to the figure.
"""

import numpy as np

from figures.describe import finding
from figures.i18n import _


def _as_array(weights) -> np.ndarray:
    if hasattr(weights, "detach"):
        weights = weights.detach().cpu().numpy()
    return np.asarray(weights, dtype=float)


def _field_ends(source: str) -> set[int]:
    """Positions that end a run of digits or of letters ("11" in "11/03", "h" in "28th")."""
    ends = set()
    for i, char in enumerate(source):
        following = source[i + 1] if i + 1 < len(source) else ""
        if char.isalnum() and not (following.isalnum() and following.isdigit() == char.isdigit()):
            ends.add(i)
    return ends


def strongest_sources(weights, source: str, translation: str) -> list[tuple[str, int, float, int]]:
    """For each output character, the source position it weighs most.

    ``weights`` is ``(T, S)`` (one attention) or ``(h, T, S)`` (heads, averaged first); the
    rows are the output characters of ``translation`` then ``<eos>``, the columns the
    characters of ``source`` (padding beyond ``len(source)`` is ignored). Returns one tuple
    per output character: ``(output character, source position, mean weight there, number
    of heads whose own largest weight is at that position)`` (``1`` for a single attention).
    """
    w = _as_array(weights)
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3:
        raise ValueError(f"weights must be (T, S) or (h, T, S), got shape {w.shape}")
    if w.shape[1] < len(translation) or w.shape[2] < len(source):
        raise ValueError(f"weights of shape {w.shape} do not cover {len(translation)} output and "
                         f"{len(source)} source characters")
    w = w[:, : len(translation), : len(source)]
    mean = w.mean(axis=0)
    rows = []
    for t, char in enumerate(translation):
        position = int(mean[t].argmax())
        agreeing = int((w[:, t].argmax(axis=-1) == position).sum())
        rows.append((char, position, float(mean[t, position]), agreeing))
    return rows


MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")


def _runs(source: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every run of digits or of letters in ``source`` (end exclusive)."""
    ends = sorted(_field_ends(source))
    runs, start = [], None
    for i, char in enumerate(source):
        if char.isalnum() and start is None:
            start = i
        if i in ends:
            runs.append((start, i + 1))
            start = None
    return runs


def date_fields(source: str, iso: str) -> dict[str, set[int]]:
    """Which source positions hold the year, the month, the day and the weekday of the date
    ``iso`` (``yyyy-mm-dd``, the translation): a run of digits whose value is the field's
    (the year also as its last two digits; the month only when no run of letters names it),
    a day's ordinal suffix with it, a run of letters that begins a month's name, a run of letters ending in "day". A field that cannot be
    told apart (the day and the month of ``03/03/98``) gets every run that could hold it.
    Empty sets when ``iso`` is not a date."""
    fields = {"year": set(), "month": set(), "day": set(), "weekday": set()}
    try:
        year, month, day = (int(part) for part in iso.split("-"))
    except ValueError:
        return fields
    runs = _runs(source)
    named_month = any(len(source[start:end]) >= 3 and MONTHS[month - 1].startswith(source[start:end].lower())
                      for start, end in runs)
    for k, (start, end) in enumerate(runs):
        text = source[start:end].lower()
        span = set(range(start, end))
        if text.isdigit():
            value = int(text)
            if (len(text) == 4 and value == year) or (len(text) == 2 and value == year % 100 and k == len(runs) - 1):
                fields["year"] |= span
            if len(text) <= 2 and value == month and not named_month:
                fields["month"] |= span
            if len(text) <= 2 and value == day:
                fields["day"] |= span
                if k + 1 < len(runs) and runs[k + 1][0] == end and source[end:runs[k + 1][1]] in ("st", "nd", "rd", "th"):
                    fields["day"] |= set(range(*runs[k + 1]))
        elif len(text) >= 3 and MONTHS[month - 1].startswith(text):
            fields["month"] |= span
        elif text.endswith("day"):
            fields["weekday"] |= span
    return fields


def field_alignment(weights, sources, translations) -> dict:
    """For the output characters of the year (``yyyy``), the month and the day of each
    translation, whether the source position they weigh most (heads averaged) lies in the
    source field that holds the same part of the date (:func:`date_fields`); and the share
    of all the weight that falls on a weekday, next to the share that evenly spread weights
    would give it. Returns ``{"in_field": {field: (hits, total)}, "weekday_share": float or
    None, "weekday_even": float or None}`` (``None`` when no source has a weekday)."""
    counts = {field: [0, 0] for field in ("year", "month", "day")}
    outputs = {"year": range(0, 4), "month": range(5, 7), "day": range(8, 10)}
    weekday_weight, weekday_rows, weekday_even = 0.0, 0, 0.0
    for w, source, translation in zip(weights, sources, translations):
        fields = date_fields(source, translation)
        rows = strongest_sources(w, source, translation)
        for field, positions in outputs.items():
            for t in positions:
                if t < len(rows):
                    counts[field][0] += rows[t][1] in fields[field]
                    counts[field][1] += 1
        if fields["weekday"]:
            mean = _as_array(w)
            mean = (mean if mean.ndim == 2 else mean.mean(axis=0))[: len(translation) + 1, : len(source)]
            weekday_weight += float(mean[:, sorted(fields["weekday"])].sum())
            weekday_rows += mean.shape[0]
            weekday_even += mean.shape[0] * len(fields["weekday"]) / len(source)
    return {"in_field": {field: tuple(c) for field, c in counts.items()},
            "weekday_share": weekday_weight / weekday_rows if weekday_rows else None,
            "weekday_even": weekday_even / weekday_rows if weekday_rows else None}


def describe_fields(weights, sources, translations, at_least: float = 0.5) -> str:
    """Lines that count what :func:`field_alignment` finds, and a check that the page's
    words still hold: at least ``at_least`` of the year, month and day characters together
    weigh most in their own source field (raises ``AssertionError`` otherwise, which stops
    the book's build)."""
    result = field_alignment(weights, sources, translations)
    lines = []
    for field, (hits, total) in result["in_field"].items():
        if field == "year":
            lines.append(_("year : {hits} of {total} characters weigh most in the source's year field",
                           hits=hits, total=total))
        elif field == "month":
            lines.append(_("month: {hits} of {total} characters weigh most in the source's month field",
                           hits=hits, total=total))
        else:
            lines.append(_("day  : {hits} of {total} characters weigh most in the source's day field",
                           hits=hits, total=total))
    if result["weekday_share"] is not None:
        lines.append(_("weekday: {share:.1%} of the weight (evenly spread: {even:.1%})",
                       share=result["weekday_share"], even=result["weekday_even"]))
    hits = sum(h for h, _total in result["in_field"].values())
    total = sum(t for _hits, t in result["in_field"].values())
    assert total and hits >= at_least * total, (
        f"only {hits} of {total} date characters weigh most in their own source field: the page's "
        f"description of the alignment no longer holds")
    return "\n".join(lines)


def describe_alignment(weights, sources, translations) -> str:
    """A few lines per example: which source character each output character weighs most,
    and how many of those are the last character of a source field (digits or letters).

    ``weights`` holds one ``(T, S)`` or ``(h, T, S)`` array per example, in the order of
    ``sources`` and ``translations``.
    """
    lines = []
    for w, source, translation in zip(weights, sources, translations):
        rows = strongest_sources(w, source, translation)
        heads = _as_array(w).shape[0] if _as_array(w).ndim == 3 else 1
        cells = []
        for char, position, weight, agreeing in rows:
            if heads > 1:
                cells.append(_("{char}←{source!r}@{position} ({weight:.2f}, {agreeing}/{heads} heads)", char=char,
                               source=source[position], position=position, weight=weight, agreeing=agreeing,
                               heads=heads))
            else:
                cells.append(f"{char}←{source[position]!r}@{position} ({weight:.2f})")
        lines.append(f"{source!r} → {translation}")
        lines.append("    " + "  ".join(cells))
    at_end, total = field_end_count(weights, sources, translations)
    lines.append(_("{at_end} of {total} output characters weigh most the last character of a "
                   "source field (a run of digits or of letters)", at_end=at_end, total=total))
    return "\n".join(lines)


def field_end_count(weights, sources, translations) -> tuple[int, int]:
    """How many output characters weigh most (:func:`strongest_sources`) the last character of a
    source field, and of how many output characters."""
    at_end = total = 0
    for w, source, translation in zip(weights, sources, translations):
        ends = _field_ends(source)
        for _char, position, _weight, _agreeing in strongest_sources(w, source, translation):
            at_end += position in ends
            total += 1
    return at_end, total


def alignment_finding(fig, weights, sources, translations):
    """Give ``fig``, an alignment figure of ``weights`` (one map, or one per head, per example),
    the finding its page prints under it (:func:`describe_alignment`, :func:`describe_fields`):
    how many characters of the year, the month and the day weigh most in their own source field,
    and how many output characters weigh most the last character of a field. Returns ``fig``."""
    in_field = field_alignment(weights, sources, translations)["in_field"]
    at_end, total = field_end_count(weights, sources, translations)
    (year, years), (month, months), (day, days) = in_field["year"], in_field["month"], in_field["day"]
    return finding(fig, _("Of the characters written, {year} of {years} of the year, {month} of {months} of the month "
                          "and {day} of {days} of the day weigh most in the source field that holds them; {at_end} "
                          "of {total} output characters weigh most the last character of a source field.",
                          year=year, years=years, month=month, months=months, day=day, days=days, at_end=at_end,
                          total=total))


def plot_alignment(weights, sources, translations):
    """``attention_course.seq2seq.plot_alignment``'s figure (one heat map per example), with the
    finding the page prints under it (:func:`alignment_finding`)."""
    from attention_course.seq2seq import plot_alignment as plot

    return alignment_finding(plot(weights, sources, translations), weights, sources, translations)
