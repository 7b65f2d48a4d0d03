"""The toy regression data of chapter 1 (NumPy): noisy samples of ``2 sin(x) + x^0.8``.

Chapter 1's estimators (Nadaraya-Watson kernel regression, the learner's exercise) try to
recover :func:`true_function` from :func:`make_regression_data`'s noisy training pairs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["RegressionData", "true_function", "make_regression_data"]


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
