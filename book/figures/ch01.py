"""Figures of chapter 1's page, *Queries, keys and values: attention pooling*."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from attention_course.reference.ch01 import (
    attention_weights,
    boxcar_kernel,
    epanechnikov_kernel,
    gaussian_kernel,
    loo_cv_error,
    nadaraya_watson,
    pairwise_sq_dists,
)
from attention_course.regression import RegressionData, make_regression_data
from figures.describe import finding
from figures.i18n import _, padded

#: the three kernels of the chapter, by the names ``nadaraya_watson`` takes
KERNELS = {"gaussian": gaussian_kernel, "boxcar": boxcar_kernel, "epanechnikov": epanechnikov_kernel}


def _kernel(name: str) -> str:
    """A kernel's name as the figures write it."""
    return {"gaussian": _("Gaussian"), "boxcar": _("boxcar"), "epanechnikov": _("Epanechnikov")}[name]


def _legend_below(fig, ax) -> None:
    """One legend for the whole figure, under the panels, so it hides no data."""
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)


def _plot_estimate(ax, data: RegressionData, kernel: str, bandwidth: float) -> None:
    """Training points, the truth and one kernel's Nadaraya-Watson estimate on ``ax``."""
    estimate = nadaraya_watson(data.x_test, data.x_train, data.y_train, kernel=kernel, bandwidth=bandwidth)
    ax.plot(data.x_train, data.y_train, "o", color="0.6", ms=3, label=_("training data"))
    ax.plot(data.x_test, data.y_test, "--", color="k", lw=1, label=_("truth"))
    ax.plot(data.x_test, estimate, color="C3", lw=1.8, label=_("estimate"))
    ax.set_xlabel("x")


def plot_kernel_shapes(bandwidth: float = 1.0, radius: float = 3.0):
    """The three kernels as functions of the signed distance ``q - k`` (one panel each)."""
    import matplotlib.pyplot as plt

    dist = np.linspace(-radius, radius, 601)
    fig, axes = plt.subplots(1, 3, figsize=(9, 2.4), sharey=True)
    for ax, (name, fn) in zip(axes, KERNELS.items()):
        ax.plot(dist, fn(dist**2, bandwidth), color="C0")
        ax.set_title(_("{kernel} (h = {h:g})", kernel=_kernel(name), h=bandwidth))
        ax.set_xlabel("q - k")
        ax.axhline(0, color="0.8", lw=0.8, zorder=0)
    axes[0].set_ylabel("K(q, k)")
    fig.tight_layout()
    values = {name: fn(dist**2, bandwidth) for name, fn in KERNELS.items()}
    reach = {name: float(np.abs(dist[v > 0]).max()) for name, v in values.items() if name != "gaussian"}
    return finding(fig, _(
        "The Gaussian never reaches 0 (it is still {g:.2g} at distance {r:g}); the boxcar is 1 up to distance "
        "{b:.1f} and 0 beyond; the Epanechnikov falls smoothly from 1 to 0 at distance {e:.1f}.",
        g=float(values["gaussian"][-1]), r=radius, b=reach["boxcar"], e=reach["epanechnikov"]))


def plot_kernel_estimates(data: RegressionData | None = None, bandwidth: float = 0.5):
    """Each kernel's Nadaraya-Watson estimate against the truth and the training points."""
    import matplotlib.pyplot as plt

    data = data or make_regression_data()
    fig, axes = plt.subplots(1, 3, figsize=(10, 3), sharey=True)
    for ax, name in zip(axes, KERNELS):
        _plot_estimate(ax, data, name, bandwidth)
        ax.set_title(_("{kernel} (h = {h:g})", kernel=_kernel(name), h=bandwidth))
    axes[0].set_ylabel("y")
    _legend_below(fig, axes[0])
    errors = [float(np.mean((nadaraya_watson(data.x_test, data.x_train, data.y_train, kernel=name, bandwidth=bandwidth)
                             - data.y_test) ** 2)) for name in KERNELS]
    return finding(fig, _("Mean squared error of each estimate against the truth: {g:.3f} (Gaussian), {b:.3f} (boxcar), "
                          "{e:.3f} (Epanechnikov).", g=errors[0], b=errors[1], e=errors[2]))


def plot_attention_heatmaps(data: RegressionData | None = None, bandwidth: float = 0.5):
    """The attention weights ``(n_test, n_train)`` of each kernel, as heat maps."""
    from attention_course.plotting import show_heatmaps

    data = data or make_regression_data()
    sq = pairwise_sq_dists(data.x_test, data.x_train)
    maps = np.stack([attention_weights(fn(sq, bandwidth)) for fn in KERNELS.values()])
    fig = show_heatmaps(
        maps,
        xlabel=_("training inputs (keys, sorted)"),
        ylabel=_("test inputs (queries)"),
        titles=[_("{kernel} (h = {h:g})", kernel=_kernel(name), h=bandwidth) for name in KERNELS],
        figsize=(10.5, 3.2),
    )
    # the band the page describes: the share of each row's weight on keys within 2h of the query
    near = np.sqrt(sq) <= 2 * bandwidth
    share = [float((m * near).sum(-1).mean()) for m in maps]
    return finding(fig, _(
        "Each query attends to a band of keys around its own position: on average {g:.0%} (Gaussian), {b:.0%} "
        "(boxcar) and {e:.0%} (Epanechnikov) of a row's weight is on keys within {d:g} of the query.",
        g=share[0], b=share[1], e=share[2], d=2 * bandwidth))


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
        ax.set_title(_("{kernel}, h = {h:g}", kernel=_kernel(kernel), h=h))
    np.atleast_1d(axes)[0].set_ylabel("y")
    _legend_below(fig, np.atleast_1d(axes)[0])
    errors = [float(np.mean((nadaraya_watson(data.x_test, data.x_train, data.y_train, kernel=kernel, bandwidth=h)
                             - data.y_test) ** 2)) for h in bandwidths]
    each = ", ".join(_("{error:.3f} at h = {h:g}", error=e, h=h) for e, h in zip(errors, bandwidths))
    return finding(fig, _("Mean squared error against the truth, by bandwidth: {errors}.", errors=each))


def far_query(scores, kernel_values, weights) -> str:
    """The page's printout for a query far from every key: its scores, their exponentials (the
    kernel values) and their softmax, one labelled line each."""
    return "\n".join(f"{padded(label, 22)} {values}" for label, values in (
        (_("scores:"), scores), (_("kernel values:"), kernel_values), (_("softmax of the scores:"), weights)))


def plot_loo_curve(data: RegressionData | None = None, bandwidths: Sequence[float] | None = None):
    """Leave-one-out error against the bandwidth, for each kernel, with each minimum marked.

    Returns ``(figure, best)`` where ``best`` maps each kernel name to its chosen bandwidth.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

    data = data or make_regression_data()
    bandwidths = np.geomspace(0.03, 3.0, 60) if bandwidths is None else np.asarray(bandwidths)
    fig, ax = plt.subplots(figsize=(6, 3.4))
    best, lowest = {}, {}
    for i, name in enumerate(KERNELS):
        errors = np.array([loo_cv_error(data.x_train, data.y_train, h, kernel=name) for h in bandwidths])
        j = int(np.argmin(errors))
        best[name] = float(bandwidths[j])
        # what the page says of each curve: high on both sides of a clear minimum, which sits a
        # little above the noise variance 0.25 (the error of the true function)
        assert 0 < j < len(bandwidths) - 1 and errors[j] < 0.8 * min(errors[0], errors[-1]), (name, errors)
        assert 0.25 < errors[j] < 0.35, (name, errors[j])
        # a line style each as well as a colour: the curves stay apart in greyscale
        ax.plot(bandwidths, errors, color=f"C{i}", linestyle=("-", "--", ":")[i],
                label=_("{kernel} (best h = {h:.2g})", kernel=_kernel(name), h=bandwidths[j]))
        ax.plot(bandwidths[j], errors[j], "o", color=f"C{i}")
        lowest[name] = float(errors[j])
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis, ticks in ((ax.xaxis, (0.03, 0.1, 0.3, 1, 3)), (ax.yaxis, (0.3, 0.5, 1, 2, 4))):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(FormatStrFormatter("%g"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(_("bandwidth h"))
    ax.set_ylabel(_("leave-one-out MSE"))
    ax.legend(loc="upper center", fontsize=8)
    fig.tight_layout()
    each = ", ".join(_("{error:.3f} ({kernel})", error=lowest[n], kernel=_kernel(n)) for n in KERNELS)
    finding(fig, _("Each curve is high at both ends with a clear minimum between; the minima, {errors}, lie a little "
                   "above the noise variance 0.25.", errors=each))
    return fig, best
