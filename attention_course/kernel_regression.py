"""Chapter 1: attention pooling as Nadaraya-Watson kernel regression (NumPy).

This module holds the chapter's reference implementations (the same functions the
exercise notebook asks for, so that the book and the grader agree), the chapter's
synthetic regression data, and the functions that draw the book's figures.

Conventions, as in the whole course: row vectors, batch first. ``queries`` is ``(n, d)``,
``keys`` is ``(m, d)``, ``values`` is ``(m,)`` or ``(m, v)``; a score or weight matrix is
``(n, m)``: one row per query, one column per key. A 1-D ``queries`` or ``keys`` array
holds ``n`` (or ``m``) points of dimension ``d = 1``.

Every kernel here is *unnormalised* and takes **squared** distances, so that one distance
matrix feeds all three kernels.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

__all__ = [
    "softmax",
    "pairwise_sq_dists",
    "gaussian_kernel",
    "boxcar_kernel",
    "epanechnikov_kernel",
    "KERNELS",
    "attention_weights",
    "nadaraya_watson",
    "gaussian_scores",
    "loo_cv_error",
    "RegressionData",
    "true_function",
    "make_regression_data",
    "plot_kernel_shapes",
    "plot_kernel_estimates",
    "plot_attention_heatmaps",
    "plot_bandwidth_effect",
    "plot_loo_curve",
]


# ---------------------------------------------------------------------------
# Reference implementations of the chapter's exercises
# ---------------------------------------------------------------------------


def _float_array(x) -> np.ndarray:
    """``x`` as an array of a floating dtype (float arrays are kept as they are)."""
    x = np.asarray(x)
    return x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64)


def _check_bandwidth(bandwidth: float) -> None:
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be positive, got {bandwidth!r}")


def softmax(x, axis: int = -1) -> np.ndarray:
    """Softmax of ``x`` along ``axis``: ``exp(x_i) / sum_j exp(x_j)``.

    Numerically stable: the maximum along ``axis`` is subtracted first, which leaves the
    result unchanged (softmax is invariant to adding a constant to every entry) and keeps
    every exponent ``<= 0``, so ``x + 1000`` neither overflows nor gives NaN. Entries equal
    to ``-inf`` get weight 0, as long as their slice holds at least one finite entry.

    Args:
        x: array of any shape (float dtype kept; integers become float64).
        axis: the axis that is normalised.

    Returns:
        An array of the shape and float dtype of ``x`` whose slices along ``axis`` are
        non-negative and sum to 1.
    """
    x = _float_array(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def pairwise_sq_dists(queries, keys) -> np.ndarray:
    """Squared Euclidean distances between every query and every key.

    ``out[..., i, j] = sum_k (queries[..., i, k] - keys[..., j, k]) ** 2``.

    Args:
        queries: ``(n, d)``, or ``(n,)`` for ``d = 1``, or ``(..., n, d)`` with leading
            batch dims.
        keys: ``(m, d)``, or ``(m,)`` for ``d = 1``, or ``(..., m, d)`` with the same
            leading batch dims.

    Returns:
        ``(n, m)`` (``(..., n, m)`` with batch dims), non-negative, in the float dtype of
        the inputs.

    Raises:
        ValueError: when the feature sizes ``d`` differ; the message names both shapes.
    """
    q = _float_array(queries)
    k = _float_array(keys)
    if q.ndim == 1:
        q = q[:, None]
    if k.ndim == 1:
        k = k[:, None]
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same feature size d (last axis): "
            f"queries have shape {np.shape(queries)}, keys have shape {np.shape(keys)}"
        )
    # ||q - k||^2 = ||q||^2 + ||k||^2 - 2 q.k ; rounding can leave tiny negatives
    q_sq = np.sum(q * q, axis=-1)[..., :, None]
    k_sq = np.sum(k * k, axis=-1)[..., None, :]
    cross = q @ np.swapaxes(k, -1, -2)
    return np.maximum(q_sq + k_sq - 2 * cross, 0)


def gaussian_kernel(sq_dists, bandwidth: float = 1.0) -> np.ndarray:
    """Unnormalised Gaussian kernel of **squared** distances: ``exp(-sq / (2 h^2))``.

    Args:
        sq_dists: squared distances, any shape (float dtype kept).
        bandwidth: ``h > 0``, the width of the kernel (the standard deviation).

    Returns:
        Kernel values in ``(0, 1]``, same shape and float dtype as ``sq_dists``.

    Raises:
        ValueError: if ``bandwidth <= 0``.
    """
    _check_bandwidth(bandwidth)
    sq = _float_array(sq_dists)
    return np.exp(-sq / (2 * bandwidth**2)).astype(sq.dtype, copy=False)


def boxcar_kernel(sq_dists, bandwidth: float = 1.0) -> np.ndarray:
    """Unnormalised boxcar (uniform) kernel of **squared** distances.

    ``1.0`` where the distance is at most ``h`` (``sq <= h^2``, the boundary included),
    ``0.0`` elsewhere.

    Args:
        sq_dists: squared distances, any shape (float dtype kept).
        bandwidth: ``h > 0``, the radius of the box.

    Returns:
        A float array of 0s and 1s, same shape and float dtype as ``sq_dists``.

    Raises:
        ValueError: if ``bandwidth <= 0``.
    """
    _check_bandwidth(bandwidth)
    sq = _float_array(sq_dists)
    return (sq <= bandwidth**2).astype(sq.dtype)


def epanechnikov_kernel(sq_dists, bandwidth: float = 1.0) -> np.ndarray:
    """Unnormalised Epanechnikov kernel of **squared** distances: ``max(0, 1 - sq / h^2)``.

    Args:
        sq_dists: squared distances, any shape (float dtype kept).
        bandwidth: ``h > 0``; the kernel is 0 from distance ``h`` on.

    Returns:
        Kernel values in ``[0, 1]``, same shape and float dtype as ``sq_dists``.

    Raises:
        ValueError: if ``bandwidth <= 0``.
    """
    _check_bandwidth(bandwidth)
    sq = _float_array(sq_dists)
    return np.maximum(1 - sq / bandwidth**2, 0).astype(sq.dtype, copy=False)


KERNELS = {
    "gaussian": gaussian_kernel,
    "boxcar": boxcar_kernel,
    "epanechnikov": epanechnikov_kernel,
}
"""The chapter's kernels by name, as ``nadaraya_watson`` and ``loo_cv_error`` accept them."""


def attention_weights(kernel_values) -> np.ndarray:
    """Normalise non-negative kernel values along the last axis (the keys).

    ``w[..., i, j] = K[..., i, j] / sum_l K[..., i, l]``. Every row with positive total
    mass, however small, sums to 1. A row with no mass (all zeros) gets all-zero weights:
    no NaN, no warning.

    Args:
        kernel_values: ``(..., n, m)`` non-negative array (float dtype kept).

    Returns:
        Weights of the same shape and float dtype.
    """
    k = _float_array(kernel_values)
    total = np.sum(k, axis=-1, keepdims=True)
    out = np.zeros_like(k)
    np.divide(k, total, out=out, where=total > 0)
    return out


def _kernel(name: str):
    try:
        return KERNELS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown kernel {name!r}; choose one of {', '.join(repr(k) for k in KERNELS)}"
        ) from None


def nadaraya_watson(queries, keys, values, kernel: str = "gaussian", bandwidth: float = 1.0) -> np.ndarray:
    """Nadaraya-Watson kernel regression: attention pooling with a fixed kernel.

    ``f(q_i) = sum_j w_ij v_j`` with ``w_ij = K(q_i, k_j) / sum_l K(q_i, k_l)``.

    Args:
        queries: ``(n, d)`` or ``(n,)``.
        keys: ``(m, d)`` or ``(m,)``.
        values: ``(m,)`` or ``(m, v)``.
        kernel: ``"gaussian"``, ``"boxcar"`` or ``"epanechnikov"``.
        bandwidth: ``h > 0``.

    Returns:
        ``(n,)`` for 1-D values, ``(n, v)`` for 2-D values. A query with no key within
        reach (possible with the boxcar and Epanechnikov kernels) has all-zero weights
        and so predicts 0.

    Raises:
        ValueError: for an unknown kernel (the message lists the choices), a bandwidth
            ``<= 0``, or mismatched feature sizes.
    """
    weights = attention_weights(_kernel(kernel)(pairwise_sq_dists(queries, keys), bandwidth))
    return weights @ _float_array(values)


def gaussian_scores(queries, keys, bandwidth: float = 1.0) -> np.ndarray:
    """Attention scores of the Gaussian kernel: ``-||q - k||^2 / (2 h^2)``.

    ``softmax(gaussian_scores(q, k, h))`` equals ``attention_weights(gaussian_kernel(...))``
    (the kernel is ``exp`` of the score), but stays finite and well defined for far-apart
    points where the kernel itself underflows to 0.

    Args:
        queries: ``(..., n, d)`` or ``(n,)``.
        keys: ``(..., m, d)`` or ``(m,)``.
        bandwidth: ``h > 0``.

    Returns:
        ``(..., n, m)`` scores (all ``<= 0``) in the float dtype of the inputs.

    Raises:
        ValueError: if ``bandwidth <= 0`` or the feature sizes differ.
    """
    _check_bandwidth(bandwidth)
    return -pairwise_sq_dists(queries, keys) / (2 * bandwidth**2)


def loo_cv_error(x, y, bandwidth: float, kernel: str = "gaussian") -> float:
    """Mean squared leave-one-out error of Nadaraya-Watson regression.

    Each training point ``i`` is predicted from all the *other* points (its own key is
    left out), and ``mean_i (y_i - f_{-i}(x_i))^2`` is returned (for ``y`` of shape
    ``(n, v)`` the mean runs over points and value columns). A point with no other point
    within reach predicts 0, as ``nadaraya_watson`` does.

    Args:
        x: ``(n,)`` or ``(n, d)`` inputs (the keys, and the queries).
        y: ``(n,)`` or ``(n, v)`` targets (the values).
        bandwidth: ``h > 0``.
        kernel: ``"gaussian"``, ``"boxcar"`` or ``"epanechnikov"``.

    Returns:
        The error, a float.
    """
    k = _kernel(kernel)(pairwise_sq_dists(x, x), bandwidth)
    k = k * (1 - np.eye(k.shape[-1], dtype=k.dtype))  # leave each point out
    y = _float_array(y)
    predictions = attention_weights(k) @ y
    return float(np.mean((y - predictions) ** 2))


# ---------------------------------------------------------------------------
# The chapter's data
# ---------------------------------------------------------------------------


class RegressionData(NamedTuple):
    """The toy regression problem: noisy training pairs and a noise-free test grid."""

    x_train: np.ndarray  #: ``(n_train,)`` sorted inputs in ``[0, 5)``
    y_train: np.ndarray  #: ``(n_train,)`` noisy targets
    x_test: np.ndarray  #: ``(n_test,)`` evenly spaced inputs over ``[0, 5]``
    y_test: np.ndarray  #: ``(n_test,)`` the true function on ``x_test`` (no noise)


def true_function(x) -> np.ndarray:
    """The function the chapter's estimators try to recover: ``2 sin(x) + x^0.8``."""
    x = np.asarray(x, dtype=np.float64)
    return 2 * np.sin(x) + x**0.8


def make_regression_data(
    n_train: int = 50, n_test: int = 50, seed: int = 0, noise: float = 0.5
) -> RegressionData:
    """Draw the toy regression data, deterministically from ``seed``.

    ``x_train`` is uniform on ``[0, 5)`` (sorted), ``y_train = true_function(x_train) +
    noise * N(0, 1)``; ``x_test`` is ``n_test`` evenly spaced points on ``[0, 5]`` and
    ``y_test`` the noise-free truth there. All arrays are float64.
    """
    rng = np.random.default_rng(seed)
    x_train = np.sort(rng.uniform(0.0, 5.0, size=n_train))
    y_train = true_function(x_train) + noise * rng.standard_normal(n_train)
    x_test = np.linspace(0.0, 5.0, n_test)
    return RegressionData(x_train, y_train, x_test, true_function(x_test))


# ---------------------------------------------------------------------------
# Figures of the book page
# ---------------------------------------------------------------------------

_KERNEL_LABELS = {"gaussian": "Gaussian", "boxcar": "boxcar", "epanechnikov": "Epanechnikov"}


def _legend_below(fig, ax) -> None:
    """One legend for the whole figure, under the panels, so it hides no data."""
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)


def _plot_estimate(ax, data: RegressionData, kernel: str, bandwidth: float) -> None:
    """Training points, the truth and one kernel's Nadaraya-Watson estimate on ``ax``."""
    estimate = nadaraya_watson(data.x_test, data.x_train, data.y_train, kernel=kernel, bandwidth=bandwidth)
    ax.plot(data.x_train, data.y_train, "o", color="0.6", ms=3, label="training data")
    ax.plot(data.x_test, data.y_test, "--", color="k", lw=1, label="truth")
    ax.plot(data.x_test, estimate, color="C3", lw=1.8, label="estimate")
    ax.set_xlabel("x")


def plot_kernel_shapes(bandwidth: float = 1.0, radius: float = 3.0):
    """The three kernels as functions of the signed distance ``q - k`` (one panel each)."""
    import matplotlib.pyplot as plt

    dist = np.linspace(-radius, radius, 601)
    fig, axes = plt.subplots(1, 3, figsize=(9, 2.4), sharey=True)
    for ax, (name, fn) in zip(axes, KERNELS.items()):
        ax.plot(dist, fn(dist**2, bandwidth), color="C0")
        ax.set_title(f"{_KERNEL_LABELS[name]} (h = {bandwidth:g})")
        ax.set_xlabel("q - k")
        ax.axhline(0, color="0.8", lw=0.8, zorder=0)
    axes[0].set_ylabel("K(q, k)")
    fig.tight_layout()
    return fig


def plot_kernel_estimates(data: RegressionData | None = None, bandwidth: float = 0.5):
    """Each kernel's Nadaraya-Watson estimate against the truth and the training points."""
    import matplotlib.pyplot as plt

    data = data or make_regression_data()
    fig, axes = plt.subplots(1, 3, figsize=(10, 3), sharey=True)
    for ax, name in zip(axes, KERNELS):
        _plot_estimate(ax, data, name, bandwidth)
        ax.set_title(f"{_KERNEL_LABELS[name]} (h = {bandwidth:g})")
    axes[0].set_ylabel("y")
    _legend_below(fig, axes[0])
    return fig


def plot_attention_heatmaps(data: RegressionData | None = None, bandwidth: float = 0.5):
    """The attention weights ``(n_test, n_train)`` of each kernel, as heat maps."""
    from attention_course.plotting import show_heatmaps

    data = data or make_regression_data()
    sq = pairwise_sq_dists(data.x_test, data.x_train)
    maps = np.stack([attention_weights(fn(sq, bandwidth)) for fn in KERNELS.values()])
    return show_heatmaps(
        maps,
        xlabel="training inputs (keys, sorted)",
        ylabel="test inputs (queries)",
        titles=[f"{_KERNEL_LABELS[name]} (h = {bandwidth:g})" for name in KERNELS],
        figsize=(10.5, 3.2),
    )


def plot_bandwidth_effect(
    data: RegressionData | None = None,
    bandwidths: Sequence[float] = (0.05, 0.3, 3.0),
    kernel: str = "gaussian",
):
    """One kernel's estimate for a few bandwidths: too small, about right, too large."""
    import matplotlib.pyplot as plt

    data = data or make_regression_data()
    fig, axes = plt.subplots(1, len(bandwidths), figsize=(3.4 * len(bandwidths), 3), sharey=True)
    for ax, h in zip(np.atleast_1d(axes), bandwidths):
        _plot_estimate(ax, data, kernel, h)
        ax.set_title(f"{_KERNEL_LABELS[kernel]}, h = {h:g}")
    np.atleast_1d(axes)[0].set_ylabel("y")
    _legend_below(fig, np.atleast_1d(axes)[0])
    return fig


def plot_loo_curve(data: RegressionData | None = None, bandwidths: Sequence[float] | None = None):
    """Leave-one-out error against the bandwidth, for each kernel, with each minimum marked.

    Returns ``(figure, best)`` where ``best`` maps each kernel name to its chosen bandwidth.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

    data = data or make_regression_data()
    bandwidths = np.geomspace(0.03, 3.0, 60) if bandwidths is None else np.asarray(bandwidths)
    fig, ax = plt.subplots(figsize=(6, 3.4))
    best = {}
    for i, name in enumerate(KERNELS):
        errors = np.array([loo_cv_error(data.x_train, data.y_train, h, kernel=name) for h in bandwidths])
        j = int(np.argmin(errors))
        best[name] = float(bandwidths[j])
        ax.plot(bandwidths, errors, color=f"C{i}", label=f"{_KERNEL_LABELS[name]} (best h = {bandwidths[j]:.2g})")
        ax.plot(bandwidths[j], errors[j], "o", color=f"C{i}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis, ticks in ((ax.xaxis, (0.03, 0.1, 0.3, 1, 3)), (ax.yaxis, (0.3, 0.5, 1, 2, 4))):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(FormatStrFormatter("%g"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("bandwidth h")
    ax.set_ylabel("leave-one-out MSE")
    ax.legend(loc="upper center", fontsize=8)
    fig.tight_layout()
    return fig, best
