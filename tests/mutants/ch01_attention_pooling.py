"""Mutants of chapter 1 (attention pooling, NumPy).

``WRONG``: plausible mistakes; each must fail at least one graded test cell.
``CORRECT``: differently written right answers; each must pass every test cell.
"""

from textwrap import dedent

from mutant_source import right_choice, wrong_choices


def _src(text: str) -> str:
    return dedent(text).strip("\n") + "\n"


# ---------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------

WRONG = {}
CORRECT = {}

WRONG["softmax"] = {
    "no_max_shift": _src("""
        def softmax(x, axis=-1):
            e = np.exp(x)
            return e / e.sum(axis=axis, keepdims=True)
    """),
    "global_max_shift": _src("""
        def softmax(x, axis=-1):
            e = np.exp(x - np.max(x))
            return e / e.sum(axis=axis, keepdims=True)
    """),
    "mean_shift": _src("""
        def softmax(x, axis=-1):
            e = np.exp(x - np.mean(x, axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)
    """),
    "always_axis_0": _src("""
        def softmax(x, axis=-1):
            e = np.exp(x - x.max(axis=0, keepdims=True))
            return e / e.sum(axis=0, keepdims=True)
    """),
    "ignores_axis": _src("""
        def softmax(x, axis=-1):
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
    """),
    "no_keepdims": _src("""
        def softmax(x, axis=-1):
            e = np.exp(x - x.max(axis=axis))
            return e / e.sum(axis=axis)
    """),
    "casts_to_float64": _src("""
        def softmax(x, axis=-1):
            x = np.asarray(x, dtype=np.float64)
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)
    """),
    "divides_by_max": _src("""
        def softmax(x, axis=-1):
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.max(axis=axis, keepdims=True)
    """),
    "log_softmax": _src("""
        def softmax(x, axis=-1):
            m = x.max(axis=axis, keepdims=True)
            return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    """),
}

CORRECT["softmax"] = {
    "moveaxis_loop": _src("""
        def softmax(x, axis=-1):
            x = np.moveaxis(np.asarray(x), axis, -1)
            out = np.empty_like(x)
            for idx in np.ndindex(*x.shape[:-1]):
                row = x[idx]
                e = np.exp(row - row.max())
                out[idx] = e / e.sum()
            return np.moveaxis(out, -1, axis)
    """),
    "logsumexp": _src("""
        def softmax(x, axis=-1):
            m = np.max(x, axis=axis, keepdims=True)
            lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
            return np.exp(x - lse)
    """),
    "apply_along_axis": _src("""
        def softmax(x, axis=-1):
            def one(row):
                e = np.exp(row - np.max(row))
                return e / np.sum(e)
            return np.apply_along_axis(one, axis, np.asarray(x))
    """),
}

# ---------------------------------------------------------------------------
# pairwise_sq_dists
# ---------------------------------------------------------------------------

_CHECK = """
    q = np.asarray(queries)
    k = np.asarray(keys)
    if q.ndim == 1:
        q = q[:, None]
    if k.ndim == 1:
        k = k[:, None]
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"shapes {np.shape(queries)} and {np.shape(keys)} differ in d")
"""


def _pd(body: str) -> str:
    return "def pairwise_sq_dists(queries, keys):\n" + dedent(_CHECK).strip("\n").replace("\n", "\n    ").join(
        ["    ", "\n"]
    ) + dedent(body).strip("\n").replace("\n", "\n    ").join(["    ", "\n"])


WRONG["pairwise_sq_dists"] = {
    "not_squared": _pd("""
        return np.sqrt(((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1))
    """),
    "transposed": _pd("""
        return ((k[..., :, None, :] - q[..., None, :, :]) ** 2).sum(-1)
    """),
    "expansion_not_clipped": _pd("""
        qq = (q * q).sum(-1)[..., :, None]
        kk = (k * k).sum(-1)[..., None, :]
        return qq + kk - 2 * q @ np.swapaxes(k, -1, -2)
    """),
    "einsum_expansion_not_clipped": _pd("""
        qq = np.einsum("...nd,...nd->...n", q, q)[..., :, None]
        kk = np.einsum("...md,...md->...m", k, k)[..., None, :]
        return qq + kk - 2 * np.einsum("...nd,...md->...nm", q, k)
    """),
    "mean_not_sum": _pd("""
        return ((q[..., :, None, :] - k[..., None, :, :]) ** 2).mean(-1)
    """),
    "no_batch_dims": _pd("""
        qq = (q ** 2).sum(1)[:, None]
        kk = (k ** 2).sum(1)[None, :]
        return np.maximum(qq + kk - 2 * q @ k.T, 0)
    """),
    "1d_is_one_point": _src("""
        def pairwise_sq_dists(queries, keys):
            q = np.atleast_2d(queries)
            k = np.atleast_2d(keys)
            if q.shape[-1] != k.shape[-1]:
                raise ValueError(f"shapes {q.shape} and {k.shape} differ in d")
            return ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1)
    """),
    "no_1d_support": _src("""
        def pairwise_sq_dists(queries, keys):
            q, k = np.asarray(queries), np.asarray(keys)
            if q.shape[-1] != k.shape[-1]:
                raise ValueError(f"shapes {q.shape} and {k.shape} differ in d")
            return ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1)
    """),
    "no_shape_check": _src("""
        def pairwise_sq_dists(queries, keys):
            q = np.asarray(queries)
            k = np.asarray(keys)
            if q.ndim == 1:
                q = q[:, None]
            if k.ndim == 1:
                k = k[:, None]
            return ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1)
    """),
    "error_names_one_shape": _src("""
        def pairwise_sq_dists(queries, keys):
            q = np.asarray(queries)
            k = np.asarray(keys)
            if q.ndim == 1:
                q = q[:, None]
            if k.ndim == 1:
                k = k[:, None]
            if q.shape[-1] != k.shape[-1]:
                raise ValueError(f"keys must have {q.shape[-1]} features, got shape {k.shape}")
            return ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1)
    """),
    "casts_to_float64": _pd("""
        q, k = q.astype(np.float64), k.astype(np.float64)
        return ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1)
    """),
}

CORRECT["pairwise_sq_dists"] = {
    "expansion_clipped": _pd("""
        qq = np.sum(q ** 2, axis=-1, keepdims=True)
        kk = np.expand_dims(np.sum(k ** 2, axis=-1), -2)
        return np.clip(qq - 2 * np.matmul(q, np.swapaxes(k, -1, -2)) + kk, 0, None)
    """),
    "einsum_of_differences": _pd("""
        diff = np.expand_dims(q, -2) - np.expand_dims(k, -3)
        return np.einsum("...d,...d->...", diff, diff)
    """),
    "loops_over_batch": _pd("""
        out = np.zeros(q.shape[:-1] + (k.shape[-2],), dtype=np.result_type(q, k))
        for idx in np.ndindex(*q.shape[:-2]):
            for i in range(q.shape[-2]):
                for j in range(k.shape[-2]):
                    diff = q[idx + (i,)] - k[idx + (j,)]
                    out[idx + (i, j)] = diff @ diff
        return out
    """),
}

# ---------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------


def _kern(name: str, body: str, check: str = "if bandwidth <= 0:") -> str:
    head = f"def {name}(sq_dists, bandwidth=1.0):\n"
    guard = f"    {check}\n        raise ValueError('bandwidth must be positive')\n" if check else ""
    return head + guard + "    sq = np.asarray(sq_dists)\n" + dedent(body).strip("\n").replace(
        "\n", "\n    "
    ).join(["    ", "\n"])


WRONG["gaussian_kernel"] = {
    "ignores_bandwidth": _kern("gaussian_kernel", "return np.exp(-sq / 2)"),
    "h_not_squared": _kern("gaussian_kernel", "return np.exp(-sq / (2 * bandwidth))"),
    "missing_half": _kern("gaussian_kernel", "return np.exp(-sq / bandwidth ** 2)"),
    "squares_again": _kern("gaussian_kernel", "return np.exp(-sq ** 2 / (2 * bandwidth ** 2))"),
    "takes_distances": _kern("gaussian_kernel", "return np.exp(-np.sqrt(sq) / (2 * bandwidth ** 2))"),
    "positive_exponent": _kern("gaussian_kernel", "return np.exp(sq / (2 * bandwidth ** 2))"),
    "no_bandwidth_check": _kern("gaussian_kernel", "return np.exp(-sq / (2 * bandwidth ** 2))", check=""),
    "checks_only_zero": _kern(
        "gaussian_kernel", "return np.exp(-sq / (2 * bandwidth ** 2))", check="if bandwidth == 0:"
    ),
    "casts_to_float64": _kern("gaussian_kernel", "return np.exp(-sq.astype(float) / (2 * bandwidth ** 2))"),
}

CORRECT["gaussian_kernel"] = {
    "other_order": _kern("gaussian_kernel", "return np.exp(-0.5 * sq / bandwidth / bandwidth)"),
    "power": _kern("gaussian_kernel", "return np.power(np.e, -sq / (2.0 * bandwidth * bandwidth))"),
}

WRONG["boxcar_kernel"] = {
    "strict_inequality": _kern("boxcar_kernel", "return (sq < bandwidth ** 2).astype(sq.dtype)"),
    "compares_sq_with_h": _kern("boxcar_kernel", "return (sq <= bandwidth).astype(sq.dtype)"),
    "returns_bool": _kern("boxcar_kernel", "return sq <= bandwidth ** 2"),
    "returns_int": _kern("boxcar_kernel", "return (sq <= bandwidth ** 2).astype(int)"),
    "casts_to_float64": _kern("boxcar_kernel", "return (sq <= bandwidth ** 2).astype(float)"),
    "inverted": _kern("boxcar_kernel", "return (sq > bandwidth ** 2).astype(sq.dtype)"),
    "no_bandwidth_check": _kern("boxcar_kernel", "return (sq <= bandwidth ** 2).astype(sq.dtype)", check=""),
    "checks_only_zero": _kern(
        "boxcar_kernel", "return (sq <= bandwidth ** 2).astype(sq.dtype)", check="if bandwidth == 0:"
    ),
}

CORRECT["boxcar_kernel"] = {
    "sqrt_where": _kern("boxcar_kernel", "return np.where(np.sqrt(sq) <= bandwidth, 1, 0).astype(sq.dtype)"),
    "ones_like": _kern(
        "boxcar_kernel",
        """
        out = np.zeros_like(sq)
        out[sq <= bandwidth * bandwidth] = 1
        return out
        """,
    ),
}

WRONG["epanechnikov_kernel"] = {
    "not_clamped": _kern("epanechnikov_kernel", "return 1 - sq / bandwidth ** 2"),
    "h_not_squared": _kern("epanechnikov_kernel", "return np.maximum(1 - sq / bandwidth, 0)"),
    "takes_distances": _kern("epanechnikov_kernel", "return np.maximum(1 - np.sqrt(sq) / bandwidth, 0)"),
    "normalised_three_quarters": _kern("epanechnikov_kernel", "return 0.75 * np.maximum(1 - sq / bandwidth ** 2, 0)"),
    "casts_to_float64": _kern("epanechnikov_kernel", "return np.maximum(1 - sq / bandwidth ** 2, 0).astype(float)"),
    "no_bandwidth_check": _kern("epanechnikov_kernel", "return np.maximum(1 - sq / bandwidth ** 2, 0)", check=""),
    "checks_only_zero": _kern(
        "epanechnikov_kernel", "return np.maximum(1 - sq / bandwidth ** 2, 0)", check="if bandwidth == 0:"
    ),
}

CORRECT["epanechnikov_kernel"] = {
    "clip": _kern("epanechnikov_kernel", "return np.clip(1 - sq / (bandwidth * bandwidth), 0, None)"),
    "where": _kern(
        "epanechnikov_kernel",
        """
        u = sq / bandwidth ** 2
        return np.where(u < 1, 1 - u, 0).astype(sq.dtype)
        """,
    ),
}

# ---------------------------------------------------------------------------
# attention_weights
# ---------------------------------------------------------------------------


def _aw(body: str) -> str:
    return "def attention_weights(kernel_values):\n    k = np.asarray(kernel_values)\n" + dedent(body).strip(
        "\n"
    ).replace("\n", "\n    ").join(["    ", "\n"])


WRONG["attention_weights"] = {
    "softmax_of_kernel": _aw("""
        e = np.exp(k - k.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    """),
    "wrong_axis": _aw("""
        s = k.sum(axis=-2, keepdims=True)
        return np.divide(k, s, out=np.zeros_like(k), where=s > 0)
    """),
    "nan_on_empty_rows": _aw("return k / k.sum(axis=-1, keepdims=True)"),
    "warns_on_empty_rows": _aw("return np.nan_to_num(k / k.sum(axis=-1, keepdims=True))"),
    "epsilon_in_denominator": _aw("return k / (k.sum(axis=-1, keepdims=True) + 1e-12)"),
    "divides_by_max": _aw("""
        m = k.max(axis=-1, keepdims=True)
        return np.divide(k, m, out=np.zeros_like(k), where=m > 0)
    """),
    "no_keepdims": _aw("""
        s = k.sum(axis=-1)
        return np.divide(k, s, out=np.zeros_like(k), where=s > 0)
    """),
    "divides_by_grand_total": _aw("return k / k.sum()"),
    "casts_to_float64": _aw("""
        k = k.astype(np.float64)
        s = k.sum(axis=-1, keepdims=True)
        return np.divide(k, s, out=np.zeros_like(k), where=s > 0)
    """),
}

CORRECT["attention_weights"] = {
    "errstate_nan_to_num": _aw("""
        with np.errstate(invalid="ignore", divide="ignore"):
            w = k / k.sum(axis=-1, keepdims=True)
        return np.nan_to_num(w, nan=0.0)
    """),
    "loop_over_rows": _aw("""
        out = np.zeros_like(k)
        for idx in np.ndindex(*k.shape[:-1]):
            total = k[idx].sum()
            if total > 0:
                out[idx] = k[idx] / total
        return out
    """),
    "divide_where": _aw("""
        s = np.sum(k, axis=-1)[..., None]
        return np.divide(k, s, out=np.zeros(k.shape, dtype=k.dtype), where=(s != 0))
    """),
}

# ---------------------------------------------------------------------------
# nadaraya_watson
# ---------------------------------------------------------------------------

_NW_HEAD = '''def nadaraya_watson(queries, keys, values, kernel="gaussian", bandwidth=1.0):
    kernels = {"gaussian": gaussian_kernel, "boxcar": boxcar_kernel, "epanechnikov": epanechnikov_kernel}
    if kernel not in kernels:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {sorted(kernels)}")
    values = np.asarray(values)
'''


def _nw(body: str, head: str = _NW_HEAD) -> str:
    return head + dedent(body).strip("\n").replace("\n", "\n    ").join(["    ", "\n"])


WRONG["nadaraya_watson"] = {
    "unnormalised": _nw("return kernels[kernel](pairwise_sq_dists(queries, keys), bandwidth) @ values"),
    "softmax_of_kernel": _nw("return softmax(kernels[kernel](pairwise_sq_dists(queries, keys), bandwidth)) @ values"),
    "kernel_of_distances": _nw("""
        w = attention_weights(kernels[kernel](np.sqrt(pairwise_sq_dists(queries, keys)), bandwidth))
        return w @ values
    """),
    "normalised_over_queries": _nw("""
        K = kernels[kernel](pairwise_sq_dists(queries, keys), bandwidth)
        return np.swapaxes(attention_weights(np.swapaxes(K, -1, -2)), -1, -2) @ values
    """),
    "ignores_kernel": _nw("return attention_weights(gaussian_kernel(pairwise_sq_dists(queries, keys), bandwidth)) @ values"),
    "ignores_bandwidth": _nw("return attention_weights(kernels[kernel](pairwise_sq_dists(queries, keys))) @ values"),
    "unknown_kernel_falls_back": _nw(
        """
        f = kernels.get(kernel, gaussian_kernel)
        return attention_weights(f(pairwise_sq_dists(queries, keys), bandwidth)) @ values
        """,
        head='def nadaraya_watson(queries, keys, values, kernel="gaussian", bandwidth=1.0):\n'
        '    kernels = {"gaussian": gaussian_kernel, "boxcar": boxcar_kernel, "epanechnikov": epanechnikov_kernel}\n'
        "    values = np.asarray(values)\n",
    ),
    "error_without_choices": _nw(
        "return attention_weights(kernels[kernel](pairwise_sq_dists(queries, keys), bandwidth)) @ values",
        head='def nadaraya_watson(queries, keys, values, kernel="gaussian", bandwidth=1.0):\n'
        '    kernels = {"gaussian": gaussian_kernel, "boxcar": boxcar_kernel, "epanechnikov": epanechnikov_kernel}\n'
        "    if kernel not in kernels:\n"
        '        raise ValueError(f"unknown kernel {kernel!r}")\n'
        "    values = np.asarray(values)\n",
    ),
    "nan_for_no_neighbour": _nw("""
        K = kernels[kernel](pairwise_sq_dists(queries, keys), bandwidth)
        return (K / K.sum(axis=-1, keepdims=True)) @ values
    """),
    "only_1d_values": _nw("""
        w = attention_weights(kernels[kernel](pairwise_sq_dists(queries, keys), bandwidth))
        return (w * values.reshape(1, -1)).sum(axis=-1)
    """),
    "casts_to_float64": _nw("""
        w = attention_weights(kernels[kernel](pairwise_sq_dists(queries, keys), bandwidth))
        return w.astype(np.float64) @ values.astype(np.float64)
    """),
}

CORRECT["nadaraya_watson"] = {
    "explicit_formulas_einsum": _src('''
        def nadaraya_watson(queries, keys, values, kernel="gaussian", bandwidth=1.0):
            formulas = {
                "gaussian": lambda sq, h: np.exp(-sq / (2 * h * h)),
                "boxcar": lambda sq, h: (sq <= h * h).astype(sq.dtype),
                "epanechnikov": lambda sq, h: np.maximum(1 - sq / (h * h), 0),
            }
            if kernel not in formulas:
                raise ValueError(f"kernel must be one of {list(formulas)}, got {kernel!r}")
            q = np.asarray(queries)
            k = np.asarray(keys)
            q = q.reshape(len(q), -1)
            k = k.reshape(len(k), -1)
            sq = ((q[:, None, :] - k[None, :, :]) ** 2).sum(-1)
            K = formulas[kernel](sq, bandwidth)
            total = K.sum(axis=1, keepdims=True)
            w = np.where(total > 0, K / np.where(total > 0, total, 1), 0).astype(K.dtype)
            return np.einsum("nm,m...->n...", w, np.asarray(values))
    '''),
    "loop_over_queries": _src('''
        def nadaraya_watson(queries, keys, values, kernel="gaussian", bandwidth=1.0):
            choices = ("gaussian", "boxcar", "epanechnikov")
            if kernel not in choices:
                raise ValueError(f"unknown kernel {kernel}: expected gaussian, boxcar or epanechnikov")
            fn = {"gaussian": gaussian_kernel, "boxcar": boxcar_kernel, "epanechnikov": epanechnikov_kernel}[kernel]
            values = np.asarray(values)
            sq = pairwise_sq_dists(queries, keys)
            out = np.zeros((sq.shape[0],) + values.shape[1:], dtype=np.result_type(sq, values))
            for i in range(sq.shape[0]):
                w = fn(sq[i], bandwidth)
                if w.sum() > 0:
                    out[i] = np.tensordot(w / w.sum(), values, axes=1)
            return out
    '''),
    "scores_for_gaussian": _nw("""
        if kernel == "gaussian":  # the score form: softmax of -sq / (2 h^2)
            return softmax(-pairwise_sq_dists(queries, keys) / (2 * bandwidth ** 2)) @ values
        return attention_weights(kernels[kernel](pairwise_sq_dists(queries, keys), bandwidth)) @ values
    """),
}

# ---------------------------------------------------------------------------
# gaussian_scores
# ---------------------------------------------------------------------------


def _gs(body: str, check: str = "if bandwidth <= 0:") -> str:
    head = "def gaussian_scores(queries, keys, bandwidth=1.0):\n"
    guard = f"    {check}\n        raise ValueError('bandwidth must be positive')\n" if check else ""
    return head + guard + dedent(body).strip("\n").replace("\n", "\n    ").join(["    ", "\n"])


WRONG["gaussian_scores"] = {
    "positive_sign": _gs("return pairwise_sq_dists(queries, keys) / (2 * bandwidth ** 2)"),
    "missing_half": _gs("return -pairwise_sq_dists(queries, keys) / bandwidth ** 2"),
    "h_not_squared": _gs("return -pairwise_sq_dists(queries, keys) / (2 * bandwidth)"),
    "returns_kernel_values": _gs("return np.exp(-pairwise_sq_dists(queries, keys) / (2 * bandwidth ** 2))"),
    "log_of_kernel": _gs("return np.log(gaussian_kernel(pairwise_sq_dists(queries, keys), bandwidth))"),
    "takes_distances": _gs("return -np.sqrt(pairwise_sq_dists(queries, keys)) / (2 * bandwidth ** 2)"),
    "dot_product_only": _gs("""
        q, k = np.asarray(queries), np.asarray(keys)
        q = q[:, None] if q.ndim == 1 else q
        k = k[:, None] if k.ndim == 1 else k
        return q @ np.swapaxes(k, -1, -2) / bandwidth ** 2
    """),
    "transposed": _gs("return -np.swapaxes(pairwise_sq_dists(queries, keys), -1, -2) / (2 * bandwidth ** 2)"),
    "no_bandwidth_check": _gs("return -pairwise_sq_dists(queries, keys) / (2 * bandwidth ** 2)", check=""),
    "casts_to_float64": _gs("return -pairwise_sq_dists(queries, keys).astype(np.float64) / (2 * bandwidth ** 2)"),
}

CORRECT["gaussian_scores"] = {
    "expansion": _gs("""
        q, k = np.asarray(queries), np.asarray(keys)
        q = q[:, None] if q.ndim == 1 else q
        k = k[:, None] if k.ndim == 1 else k
        qk = q @ np.swapaxes(k, -1, -2)
        qq = (q ** 2).sum(-1)[..., :, None]
        kk = (k ** 2).sum(-1)[..., None, :]
        return (qk - qq / 2 - kk / 2) / bandwidth ** 2
    """),
    "other_order": _gs("return pairwise_sq_dists(queries, keys) * (-0.5 / bandwidth / bandwidth)"),
}

# ---------------------------------------------------------------------------
# loo_cv_error
# ---------------------------------------------------------------------------

_LOO_HEAD = '''def loo_cv_error(x, y, bandwidth, kernel="gaussian"):
    kernels = {"gaussian": gaussian_kernel, "boxcar": boxcar_kernel, "epanechnikov": epanechnikov_kernel}
    y = np.asarray(y)
    K = kernels[kernel](pairwise_sq_dists(x, x), bandwidth)
'''


def _loo(body: str) -> str:
    return _LOO_HEAD + dedent(body).strip("\n").replace("\n", "\n    ").join(["    ", "\n"])


WRONG["loo_cv_error"] = {
    "includes_the_point": _loo("return float(np.mean((y - attention_weights(K) @ y) ** 2))"),
    "root_mean_squared": _loo("""
        np.fill_diagonal(K, 0)
        return float(np.sqrt(np.mean((y - attention_weights(K) @ y) ** 2)))
    """),
    "sum_not_mean": _loo("""
        np.fill_diagonal(K, 0)
        return float(np.sum((y - attention_weights(K) @ y) ** 2))
    """),
    "mean_absolute": _loo("""
        np.fill_diagonal(K, 0)
        return float(np.mean(np.abs(y - attention_weights(K) @ y)))
    """),
    "zeroed_after_normalising": _loo("""
        W = attention_weights(K)
        np.fill_diagonal(W, 0)
        return float(np.mean((y - W @ y) ** 2))
    """),
    "leaves_out_the_neighbour": _loo("""
        K = K * (1 - np.eye(len(K), k=1))
        return float(np.mean((y - attention_weights(K) @ y) ** 2))
    """),
    "ignores_kernel": _src('''
        def loo_cv_error(x, y, bandwidth, kernel="gaussian"):
            y = np.asarray(y)
            K = gaussian_kernel(pairwise_sq_dists(x, x), bandwidth)
            np.fill_diagonal(K, 0)
            return float(np.mean((y - attention_weights(K) @ y) ** 2))
    '''),
    "ignores_bandwidth": _src('''
        def loo_cv_error(x, y, bandwidth, kernel="gaussian"):
            kernels = {"gaussian": gaussian_kernel, "boxcar": boxcar_kernel, "epanechnikov": epanechnikov_kernel}
            y = np.asarray(y)
            K = kernels[kernel](pairwise_sq_dists(x, x))
            np.fill_diagonal(K, 0)
            return float(np.mean((y - attention_weights(K) @ y) ** 2))
    '''),
    "nan_for_isolated_points": _loo("""
        np.fill_diagonal(K, 0)
        return float(np.mean((y - (K / K.sum(axis=1, keepdims=True)) @ y) ** 2))
    """),
    "mean_over_points_only": _loo("""
        np.fill_diagonal(K, 0)
        err = (y - attention_weights(K) @ y) ** 2
        return float(np.mean(err.reshape(len(err), -1).sum(axis=1)))
    """),
}

CORRECT["loo_cv_error"] = {
    "loop_with_delete": _src('''
        def loo_cv_error(x, y, bandwidth, kernel="gaussian"):
            x, y = np.asarray(x), np.asarray(y)
            errors = []
            for i in range(len(x)):
                keep = np.arange(len(x)) != i
                pred = nadaraya_watson(x[i:i + 1], x[keep], y[keep], kernel=kernel, bandwidth=bandwidth)
                errors.append((y[i] - pred[0]) ** 2)
            return float(np.mean(errors))
    '''),
    "infinite_self_distance": _src('''
        def loo_cv_error(x, y, bandwidth, kernel="gaussian"):
            kernels = {"gaussian": gaussian_kernel, "boxcar": boxcar_kernel, "epanechnikov": epanechnikov_kernel}
            sq = pairwise_sq_dists(x, x)
            sq[np.diag_indices_from(sq)] = np.inf
            with np.errstate(invalid="ignore"):
                W = attention_weights(kernels[kernel](sq, bandwidth))
            residual = np.asarray(y) - W @ np.asarray(y)
            return float((residual ** 2).mean())
    '''),
    "mask_with_eye": _loo("""
        W = attention_weights(np.where(np.eye(len(K), dtype=bool), 0.0, K))
        return np.mean(np.square(y - W @ y))
    """),
}

# ---------------------------------------------------------------------------
# the conceptual questions: every wrong letter fails; case and spaces do not matter
# ---------------------------------------------------------------------------

for _topic in ("bandwidth_limits", "no_mass", "leave_one_out"):
    _name = f"answer_{_topic}"
    WRONG[_name] = wrong_choices("ch01_attention_pooling", _name)
    WRONG[_name]["not_a_letter"] = f'{_name} = "e"\n'
    CORRECT[_name] = {"upper_case": right_choice("ch01_attention_pooling", _name, " {upper} ")}

# Mistakes whose failure message must name them (check_close's likely=).
MESSAGES = {
    "attention_weights": {"epsilon_in_denominator": "an epsilon is added to the denominator"},
}
