"""Words for an alignment figure, computed from the same weights the figure draws.

A page that says "the year looks at the end of the source" would go stale the day the
model is trained on another machine or seed; these helpers print what this build's
weights show, next to the figure.
"""

import numpy as np


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


def describe_alignment(weights, sources, translations) -> str:
    """A few lines per example: which source character each output character weighs most,
    and how many of those are the last character of a source field (digits or letters).

    ``weights`` holds one ``(T, S)`` or ``(h, T, S)`` array per example, in the order of
    ``sources`` and ``translations``.
    """
    lines, at_end, total = [], 0, 0
    for w, source, translation in zip(weights, sources, translations):
        rows = strongest_sources(w, source, translation)
        heads = _as_array(w).shape[0] if _as_array(w).ndim == 3 else 1
        ends = _field_ends(source)
        cells = []
        for char, position, weight, agreeing in rows:
            agree = f", {agreeing}/{heads} heads" if heads > 1 else ""
            cells.append(f"{char}←{source[position]!r}@{position} ({weight:.2f}{agree})")
            at_end += position in ends
            total += 1
        lines.append(f"{source!r} → {translation}")
        lines.append("    " + "  ".join(cells))
    lines.append(f"{at_end} of {total} output characters weigh most the last character of a "
                 f"source field (a run of digits or of letters)")
    return "\n".join(lines)
