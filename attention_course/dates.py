"""The translation task of chapters 3 and 7: dates in many written forms -> ISO dates.

``"3rd of March 1998"``, ``"03/03/98"``, ``"Tuesday, March 3, 1998"``, ``"1998.03.03"``
... all become ``"1998-03-03"``. The task is small enough to train on one CPU thread in
seconds, yet it has what makes translation need attention: the output is a
*reordering* of the input (the year comes first in the output and last in most inputs),
lengths differ (8 to 29 characters in, always 10 out), and some of the input must be
ignored (the weekday) or rewritten (month names become numbers, ``98`` becomes ``1998``).

Everything is generated offline from a fixed seed with :mod:`datetime` and
:mod:`random`: no download, the same data on every machine.

* **Splits.** The *calendar days* of the year range are split, not the strings: a day of
  the held-out test split never appears in training or validation, in any format.
* **Tokens.** Characters. Each side has its own :class:`CharVocab` with ``<pad>`` = 0,
  ``<bos>`` = 1, ``<eos>`` = 2.
* **Batches.** :meth:`DateTask.batch` pads a list of pairs into tensors: ``src`` and
  ``src_mask`` (boolean, ``True`` = real token), ``tgt_in`` (``<bos>`` then the target:
  what the decoder reads) and ``labels`` (the target then ``<eos>``: what it must
  predict), the decoder's input shifted by one.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
from typing import Callable, Iterator, Sequence

import torch

from attention_course.i18n import gettext

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "FORMATS",
    "CharVocab",
    "DateTask",
    "Batch",
    "format_date",
    "make_date_task",
]

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"

_ORDINAL_SUFFIX = {1: "st", 2: "nd", 3: "rd", 21: "st", 22: "nd", 23: "rd", 31: "st"}


def _ordinal(day: int) -> str:
    return f"{day}{_ORDINAL_SUFFIX.get(day, 'th')}"


# English names, whatever the machine's locale (what strftime's %B and %A give in the C locale)
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _month(d: datetime.date) -> str:
    return _MONTHS[d.month - 1]


def _mon(d: datetime.date) -> str:
    return _month(d)[:3]


def _weekday(d: datetime.date) -> str:
    return _WEEKDAYS[d.weekday()]


# Each format: a name (for plots and tables) and a function date -> string.
FORMATS: dict[str, Callable[[datetime.date], str]] = {
    "d Month yyyy": lambda d: f"{d.day} {_month(d)} {d.year}",
    "dth of Month yyyy": lambda d: f"{_ordinal(d.day)} of {_month(d)} {d.year}",
    "the dth of Month, yyyy": lambda d: f"the {_ordinal(d.day)} of {_month(d)}, {d.year}",
    "Month d, yyyy": lambda d: f"{_month(d)} {d.day}, {d.year}",
    "Month dth, yyyy": lambda d: f"{_month(d)} {_ordinal(d.day)}, {d.year}",
    "Weekday, Month d, yyyy": lambda d: f"{_weekday(d)}, {_month(d)} {d.day}, {d.year}",
    "Weekday d Month yyyy": lambda d: f"{_weekday(d)} {d.day} {_month(d)} {d.year}",
    "Wkd, d Mon yyyy": lambda d: f"{_weekday(d)[:3]}, {d.day} {_mon(d)} {d.year}",
    "d Mon yyyy": lambda d: f"{d.day} {_mon(d)} {d.year}",
    "Mon d yyyy": lambda d: f"{_mon(d)} {d.day} {d.year}",
    "D MON YYYY": lambda d: f"{d.day:02d} {_mon(d).upper()} {d.year}",
    "dd/mm/yy": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year % 100:02d}",
    "dd/mm/yyyy": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year}",
    "d.m.yyyy": lambda d: f"{d.day}.{d.month}.{d.year}",
    "yyyy.mm.dd": lambda d: f"{d.year}.{d.month:02d}.{d.day:02d}",
    "yyyymmdd": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",
}


def format_date(date: datetime.date, fmt: str) -> str:
    """``date`` written in the format named ``fmt`` (a key of :data:`FORMATS`)."""
    return FORMATS[fmt](date)


class CharVocab:
    """A character vocabulary: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, then the
    characters in sorted order."""

    def __init__(self, chars: Sequence[str]):
        self.tokens = [PAD, BOS, EOS] + sorted(set(chars))
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self.pad_id, self.bos_id, self.eos_id = 0, 1, 2

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        """The ids of the characters of ``text``, with ``<bos>`` before / ``<eos>`` after.
        A character outside the vocabulary raises ``KeyError``."""
        ids = [self.index[c] for c in text]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids) -> str:
        """The text of a sequence of ids: stops at the first ``<eos>``, skips ``<pad>``
        and ``<bos>``."""
        out = []
        for i in (ids.tolist() if hasattr(ids, "tolist") else ids):
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            out.append(self.tokens[i])
        return "".join(out)


@dataclasses.dataclass
class Batch:
    """Padded tensors of a list of pairs (see the module's docstring)."""

    src: torch.Tensor  # (B, S) long, source ids padded with <pad>
    src_mask: torch.Tensor  # (B, S) bool, True = a real source token
    tgt_in: torch.Tensor  # (B, T) long, <bos> + target, padded
    labels: torch.Tensor  # (B, T) long, target + <eos>, padded
    sources: list[str]
    targets: list[str]

    def to(self, device) -> "Batch":
        return dataclasses.replace(
            self,
            src=self.src.to(device),
            src_mask=self.src_mask.to(device),
            tgt_in=self.tgt_in.to(device),
            labels=self.labels.to(device),
        )


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


@dataclasses.dataclass
class DateTask:
    """The data of the task: vocabularies and the three splits of ``(source, target)``
    pairs (the days of the splits are disjoint)."""

    src_vocab: CharVocab
    tgt_vocab: CharVocab
    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]
    seed: int

    def batch(self, pairs: Sequence[tuple[str, str]], device=None) -> Batch:
        """Pad ``pairs`` into a :class:`Batch` (on ``device`` when given)."""
        sources = [s for s, _ in pairs]
        targets = [t for _, t in pairs]
        src = _pad([self.src_vocab.encode(s) for s in sources], self.src_vocab.pad_id)
        tgt_in = _pad([self.tgt_vocab.encode(t, bos=True) for t in targets], self.tgt_vocab.pad_id)
        labels = _pad([self.tgt_vocab.encode(t, eos=True) for t in targets], self.tgt_vocab.pad_id)
        batch = Batch(src, src != self.src_vocab.pad_id, tgt_in, labels, sources, targets)
        return batch.to(device) if device is not None else batch

    def batches(self, split: str, batch_size: int, shuffle: bool = True, seed: int = 0,
                device=None) -> Iterator[Batch]:
        """One pass over a split in batches (shuffled with ``seed`` when ``shuffle``)."""
        pairs = list(getattr(self, split))
        if shuffle:
            random.Random(seed).shuffle(pairs)
        for start in range(0, len(pairs), batch_size):
            yield self.batch(pairs[start:start + batch_size], device)


#: The splits and source characters each set of arguments generated in this process: a second call
#: with the same arguments (a notebook run again, the tests' judge beside the student's code) gets
#: the same data without drawing it again, in lists and vocabularies of its own.
_GENERATED: dict[tuple, tuple] = {}


def make_date_task(
    num_train: int = 50_000,
    num_valid: int = 1_000,
    num_test: int = 2_000,
    first_year: int = 1950,
    last_year: int = 2049,
    seed: int = 0,
) -> DateTask:
    """Generate the task: the days from 1 January ``first_year`` to 31 December
    ``last_year`` are shuffled (seeded) and split into test, validation and training
    days; every pair is a day drawn from its split written in a format drawn uniformly
    from :data:`FORMATS`, and its ISO form. Two-digit years (``dd/mm/yy``) are read in the
    window ``first_year .. first_year + 99``, so the range must not span more than 100
    years.
    """
    key = (num_train, num_valid, num_test, first_year, last_year, seed)
    if key not in _GENERATED:
        _GENERATED[key] = _generate(*key)
    train, valid, test, src_chars = _GENERATED[key]
    return DateTask(CharVocab(src_chars), CharVocab("0123456789-"), list(train), list(valid), list(test), seed)


def _generate(num_train: int, num_valid: int, num_test: int, first_year: int, last_year: int,
              seed: int) -> tuple[tuple, tuple, tuple, frozenset]:
    """:func:`make_date_task`'s splits (tuples of pairs) and every source character."""
    if last_year - first_year >= 100:
        raise ValueError(gettext("two-digit years are ambiguous over {first}..{last}: keep it to 100 years").format(
            first=first_year, last=last_year))
    rng = random.Random(seed)
    start = datetime.date(first_year, 1, 1)
    days = [start + datetime.timedelta(n) for n in range((datetime.date(last_year, 12, 31) - start).days + 1)]
    rng.shuffle(days)
    if num_test + num_valid >= len(days):
        raise ValueError(gettext("{test} test and {valid} validation days leave none of the {days} for training").format(
            test=num_test, valid=num_valid, days=len(days)))
    test_days = days[:num_test]
    valid_days = days[num_test:num_test + num_valid]
    train_days = days[num_test + num_valid:]
    names = list(FORMATS)

    def pairs(pool, count, one_each=False):
        out = []
        for i in range(count):
            day = pool[i] if one_each else rng.choice(pool)
            out.append((format_date(day, rng.choice(names)), day.isoformat()))
        return out

    train = pairs(train_days, num_train)
    valid = pairs(valid_days, num_valid, one_each=True)
    test = pairs(test_days, num_test, one_each=True)
    # every character any format can write: all the days of a leap year (all months,
    # weekdays and ordinals) in every format, and every digit
    year_2000 = [datetime.date(2000, 1, 1) + datetime.timedelta(n) for n in range(366)]
    src_chars = {c for d in year_2000 for f in names for c in format_date(d, f)} | set("0123456789")
    return tuple(train), tuple(valid), tuple(test), frozenset(src_chars)
