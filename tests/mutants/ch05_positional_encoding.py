"""Mutants of chapter 5 (self-attention and positional encoding).

``WRONG``: plausible mistakes, each must fail at least one graded test cell.
``CORRECT``: differently written right answers, each must pass every test.
"""

from textwrap import dedent, indent

from mutant_source import class_cell as _class
from mutant_source import function_cell as _function


SINUSOID = "def sinusoidal_positional_encoding(max_len, d_model):"
SHIFT = "def relative_shift_matrix(k, d_model):"
PATCHES = "def image_to_patches(image, patch_size):"
COSTS = "def layer_costs(n, d, k=3):"


def _table(angles: str, fill: str = "") -> str:
    """A table built from ``angles`` (max_len, ceil(d/2)) with sin in even, cos in odd columns."""
    fill = fill or """
        P = torch.zeros(max_len, d_model, dtype=torch.float64)
        P[:, 0::2] = torch.sin(angles)
        P[:, 1::2] = torch.cos(angles[:, : d_model // 2])
        return P.float()
        """
    start = """
    t = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_j = torch.arange(0, d_model, 2, dtype=torch.float64)
    """
    return _function(SINUSOID, dedent(start) + dedent(angles) + dedent(fill))


def _pe(init: str, forward: str) -> str:
    return _class(
        "PositionalEncoding", "def __init__(self, d_model, max_len=5000, dropout=0.0):", init, {"def forward(self, X):": forward}
    )


_INIT = """
self.d_model, self.max_len = d_model, max_len
self.dropout = nn.Dropout(dropout)
self.register_buffer("P", sinusoidal_positional_encoding(max_len, d_model))
"""

_CHECKS = """
T = X.shape[-2]
if X.shape[-1] != self.d_model:
    raise ValueError(f"width of {tuple(X.shape)} is not d_model={self.d_model}")
if T > self.max_len:
    raise ValueError(f"length {T} > max_len={self.max_len}")
"""


def _forward(body: str, checks: str = _CHECKS) -> str:
    return dedent(checks) + dedent(body)


def _shift(block: str, check: str = "if d_model % 2:\n    raise ValueError(f'odd d_model={d_model}')\n") -> str:
    return _function(
        SHIFT,
        dedent(check)
        + """
M = torch.zeros(d_model, d_model)
for j in range(d_model // 2):
"""
        + indent(dedent(block).strip("\n"), "    ")
        + "\nreturn M\n",
    )


_PATCH_CHECK = """
if image.dim() not in (3, 4):
    raise ValueError(f"bad shape {tuple(image.shape)}")
C, H, W = image.shape[-3:]
p = patch_size
if H % p or W % p:
    raise ValueError(f"{H}x{W} not divisible by {p}")
lead = image.shape[:-3]
"""


def _patches(body: str, check: str = _PATCH_CHECK) -> str:
    return _function(PATCHES, dedent(check) + dedent(body))


WRONG = {
    "sinusoidal_positional_encoding": {
        "sin_cos_swapped": _table(
            "angles = t / 10000 ** (two_j / d_model)\n",
            """
            P = torch.zeros(max_len, d_model, dtype=torch.float64)
            P[:, 0::2] = torch.cos(angles)
            P[:, 1::2] = torch.sin(angles[:, : d_model // 2])
            return P.float()
            """,
        ),
        "exponent_j_not_2j": _table("angles = t / 10000 ** ((two_j / 2) / d_model)\n"),
        "exponent_of_own_column_index": _function(
            SINUSOID,
            """
            t = torch.arange(max_len, dtype=torch.float64)[:, None]
            cols = torch.arange(d_model, dtype=torch.float64)
            angles = t / 10000 ** (cols / d_model)
            P = torch.where(cols.long() % 2 == 0, torch.sin(angles), torch.cos(angles))
            return P.float()
            """,
        ),
        "base_1000": _table("angles = t / 1000 ** (two_j / d_model)\n"),
        "divides_by_half_d_model": _table("angles = t / 10000 ** (two_j / (d_model // 2 or 1))\n"),
        "multiplies_instead_of_divides": _table("angles = t * 10000 ** (two_j / d_model)\n"),
        "positions_from_1": _table("angles = (t + 1) / 10000 ** (two_j / d_model)\n"),
        "returns_float64": _table(
            "angles = t / 10000 ** (two_j / d_model)\n",
            """
            P = torch.zeros(max_len, d_model, dtype=torch.float64)
            P[:, 0::2] = torch.sin(angles)
            P[:, 1::2] = torch.cos(angles[:, : d_model // 2])
            return P
            """,
        ),
        "sin_first_half_cos_second_half": _table(
            "angles = t / 10000 ** (two_j / d_model)\n",
            """
            half = (d_model + 1) // 2
            return torch.cat([torch.sin(angles), torch.cos(angles[:, : d_model - half])], dim=1).float()
            """,
        ),
        "odd_d_model_breaks": _function(
            SINUSOID,
            """
            t = torch.arange(max_len, dtype=torch.float64)[:, None]
            two_j = torch.arange(0, d_model, 2, dtype=torch.float64)
            angles = t / 10000 ** (two_j / d_model)
            return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).reshape(max_len, -1).float()
            """,
        ),
        "odd_d_model_exponent_over_d_plus_1": _function(
            SINUSOID,
            """
            dd = d_model + d_model % 2
            t = torch.arange(max_len, dtype=torch.float64)[:, None]
            two_j = torch.arange(0, dd, 2, dtype=torch.float64)
            angles = t / 10000 ** (two_j / dd)
            P = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).reshape(max_len, dd)
            return P[:, :d_model].float()
            """,
        ),
    },
    "PositionalEncoding": {
        "table_as_parameter": _pe(
            """
            self.d_model, self.max_len = d_model, max_len
            self.dropout = nn.Dropout(dropout)
            self.P = nn.Parameter(sinusoidal_positional_encoding(max_len, d_model))
            """,
            _forward("return self.dropout(X + self.P[:T])"),
        ),
        "table_as_plain_attribute": _pe(
            """
            self.d_model, self.max_len = d_model, max_len
            self.dropout = nn.Dropout(dropout)
            self.P = sinusoidal_positional_encoding(max_len, d_model)
            """,
            _forward("return self.dropout(X + self.P[:T].to(X.device))"),
        ),
        "non_persistent_buffer": _pe(
            """
            self.d_model, self.max_len = d_model, max_len
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("P", sinusoidal_positional_encoding(max_len, d_model), persistent=False)
            """,
            _forward("return self.dropout(X + self.P[:T])"),
        ),
        "buffer_named_pe": _pe(
            """
            self.d_model, self.max_len = d_model, max_len
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))
            """,
            _forward("return self.dropout(X + self.pe[:T])"),
        ),
        "recomputes_instead_of_using_buffer": _pe(
            _INIT,
            _forward("return self.dropout(X + sinusoidal_positional_encoding(T, self.d_model).to(X.device))"),
        ),
        "dropout_missing": _pe(_INIT, _forward("return X + self.P[:T]")),
        "dropout_before_adding": _pe(_INIT, _forward("return self.dropout(X) + self.P[:T]")),
        "dropout_on_table_only": _pe(_INIT, _forward("return X + self.dropout(self.P[:T])")),
        "forgets_slice_to_T": _pe(
            _INIT, _forward("return self.dropout(X + self.P[: X.shape[1]] if X.dim() == 3 else X + self.P)")
        ),
        "slices_with_batch_axis": _pe(_INIT, _forward("return self.dropout(X + self.P[: X.shape[0]])")),
        "same_row_for_every_position": _pe(_INIT, _forward("return self.dropout(X + self.P[T - 1])")),
        "no_length_check": _pe(
            _INIT,
            _forward(
                "return self.dropout(X + self.P[:T])",
                checks="""
                T = X.shape[-2]
                if X.shape[-1] != self.d_model:
                    raise ValueError(f"width of {tuple(X.shape)} is not d_model={self.d_model}")
                """,
            ),
        ),
        "length_error_names_only_T": _pe(
            _INIT,
            _forward(
                "return self.dropout(X + self.P[:T])",
                checks="""
                T = X.shape[-2]
                if X.shape[-1] != self.d_model:
                    raise ValueError(f"width of {tuple(X.shape)} is not d_model={self.d_model}")
                if T > self.max_len:
                    raise ValueError(f"the sequence is too long: {T}")
                """,
            ),
        ),
        "no_width_check": _pe(
            _INIT,
            _forward(
                "return self.dropout(X + self.P[:T])",
                checks="""
                T = X.shape[-2]
                if T > self.max_len:
                    raise ValueError(f"length {T} > max_len={self.max_len}")
                """,
            ),
        ),
        "casts_output_to_float32": _pe(_INIT, _forward("return self.dropout(X.float() + self.P[:T])")),
        "table_arguments_swapped": _pe(
            """
            self.d_model, self.max_len = d_model, max_len
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("P", sinusoidal_positional_encoding(d_model, max_len).T)
            """,
            _forward("return self.dropout(X + self.P[:T])"),
        ),
        "scales_X_by_sqrt_d_model": _pe(_INIT, _forward("return self.dropout(X * math.sqrt(self.d_model) + self.P[:T])")),
        "table_with_batch_axis": _pe(
            """
            self.d_model, self.max_len = d_model, max_len
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("P", sinusoidal_positional_encoding(max_len, d_model)[None])
            """,
            _forward("return self.dropout(X + self.P[:, :T])"),
        ),
    },
    "relative_shift_matrix": {
        "rotation_transposed": _shift(
            """
            a = k / 10000 ** (2 * j / d_model)
            M[2 * j, 2 * j], M[2 * j, 2 * j + 1] = math.cos(a), math.sin(a)
            M[2 * j + 1, 2 * j], M[2 * j + 1, 2 * j + 1] = -math.sin(a), math.cos(a)
            """
        ),
        "frequency_j_not_2j": _shift(
            """
            a = k / 10000 ** (j / d_model)
            M[2 * j, 2 * j], M[2 * j, 2 * j + 1] = math.cos(a), -math.sin(a)
            M[2 * j + 1, 2 * j], M[2 * j + 1, 2 * j + 1] = math.sin(a), math.cos(a)
            """
        ),
        "angle_without_k": _shift(
            """
            a = 1 / 10000 ** (2 * j / d_model)
            M[2 * j, 2 * j], M[2 * j, 2 * j + 1] = math.cos(a), -math.sin(a)
            M[2 * j + 1, 2 * j], M[2 * j + 1, 2 * j + 1] = math.sin(a), math.cos(a)
            """
        ),
        "shift_by_minus_k": _shift(
            """
            a = -k / 10000 ** (2 * j / d_model)
            M[2 * j, 2 * j], M[2 * j, 2 * j + 1] = math.cos(a), -math.sin(a)
            M[2 * j + 1, 2 * j], M[2 * j + 1, 2 * j + 1] = math.sin(a), math.cos(a)
            """
        ),
        "cos_sin_places_swapped": _shift(
            """
            a = k / 10000 ** (2 * j / d_model)
            M[2 * j, 2 * j], M[2 * j, 2 * j + 1] = math.sin(a), -math.cos(a)
            M[2 * j + 1, 2 * j], M[2 * j + 1, 2 * j + 1] = math.cos(a), math.sin(a)
            """
        ),
        "float64_result": _function(
            SHIFT,
            """
            if d_model % 2:
                raise ValueError(f"odd d_model={d_model}")
            M = torch.zeros(d_model, d_model, dtype=torch.float64)
            for j in range(d_model // 2):
                a = k / 10000 ** (2 * j / d_model)
                M[2 * j, 2 * j], M[2 * j, 2 * j + 1] = math.cos(a), -math.sin(a)
                M[2 * j + 1, 2 * j], M[2 * j + 1, 2 * j + 1] = math.sin(a), math.cos(a)
            return M
            """,
        ),
        "no_error_for_odd_d_model": _shift(
            """
            a = k / 10000 ** (2 * j / d_model)
            M[2 * j, 2 * j], M[2 * j, 2 * j + 1] = math.cos(a), -math.sin(a)
            M[2 * j + 1, 2 * j], M[2 * j + 1, 2 * j + 1] = math.sin(a), math.cos(a)
            """,
            check="",
        ),
    },
    "image_to_patches": {
        "column_major_grid": _patches(
            """
            x = image.reshape(*lead, C, H // p, p, W // p, p)
            x = x.permute(*range(len(lead)), *(len(lead) + i for i in (3, 1, 0, 2, 4)))
            return x.reshape(*lead, (H // p) * (W // p), C * p * p)
            """
        ),
        "flattened_p_p_C": _patches(
            """
            x = image.reshape(*lead, C, H // p, p, W // p, p)
            x = x.permute(*range(len(lead)), *(len(lead) + i for i in (1, 3, 2, 4, 0)))
            return x.reshape(*lead, (H // p) * (W // p), C * p * p)
            """
        ),
        "patch_transposed_inside": _patches(
            """
            x = image.reshape(*lead, C, H // p, p, W // p, p)
            x = x.permute(*range(len(lead)), *(len(lead) + i for i in (1, 3, 0, 4, 2)))
            return x.reshape(*lead, (H // p) * (W // p), C * p * p)
            """
        ),
        "plain_reshape_no_permute": _patches(
            """
            return image.reshape(*lead, (H // p) * (W // p), C * p * p)
            """
        ),
        "unfold_not_transposed": _patches(
            """
            x = image if image.dim() == 4 else image[None]
            out = F.unfold(x.double(), p, stride=p).to(image.dtype)
            return out if image.dim() == 4 else out[0]
            """
        ),
        "overlapping_stride_1": _patches(
            """
            x = image if image.dim() == 4 else image[None]
            out = F.unfold(x.double(), p, stride=1).transpose(1, 2).to(image.dtype)
            return out if image.dim() == 4 else out[0]
            """
        ),
        "unbatched_only": _patches(
            """
            x = image.reshape(C, H // p, p, W // p, p).permute(1, 3, 0, 2, 4)
            return x.reshape((H // p) * (W // p), C * p * p)
            """
        ),
        "floor_instead_of_error": _patches(
            """
            x = image[..., : H // p * p, : W // p * p]
            x = x.reshape(*lead, C, H // p, p, W // p, p)
            x = x.permute(*range(len(lead)), *(len(lead) + i for i in (1, 3, 0, 2, 4)))
            return x.reshape(*lead, (H // p) * (W // p), C * p * p)
            """,
            check="""
            C, H, W = image.shape[-3:]
            p = patch_size
            lead = image.shape[:-3]
            """,
        ),
        "casts_to_float32": _patches(
            """
            x = image.float().reshape(*lead, C, H // p, p, W // p, p)
            x = x.permute(*range(len(lead)), *(len(lead) + i for i in (1, 3, 0, 2, 4)))
            return x.reshape(*lead, (H // p) * (W // p), C * p * p)
            """
        ),
    },
    "layer_costs": {
        "attention_n_d_d": _function(
            COSTS,
            'return {"self_attention": (n * d * d, 1, 1), "rnn": (n * d * d, n, n), "cnn": (k * n * d * d, 1, n / k)}',
        ),
        "rnn_n_n_d": _function(
            COSTS,
            'return {"self_attention": (n * n * d, 1, 1), "rnn": (n * n * d, n, n), "cnn": (k * n * d * d, 1, n / k)}',
        ),
        "rnn_path_1": _function(
            COSTS,
            'return {"self_attention": (n * n * d, 1, 1), "rnn": (n * d * d, n, 1), "cnn": (k * n * d * d, 1, n / k)}',
        ),
        "attention_sequential_n": _function(
            COSTS,
            'return {"self_attention": (n * n * d, n, 1), "rnn": (n * d * d, n, n), "cnn": (k * n * d * d, 1, n / k)}',
        ),
        "cnn_path_log_k": _function(
            COSTS,
            'return {"self_attention": (n * n * d, 1, 1), "rnn": (n * d * d, n, n), '
            '"cnn": (k * n * d * d, 1, math.log(n, k))}',
        ),
        "cnn_path_rounded_down": _function(
            COSTS,
            'return {"self_attention": (n * n * d, 1, 1), "rnn": (n * d * d, n, n), "cnn": (k * n * d * d, 1, n // k)}',
        ),
        "cnn_compute_without_k": _function(
            COSTS,
            'return {"self_attention": (n * n * d, 1, 1), "rnn": (n * d * d, n, n), "cnn": (n * d * d, 1, n / k)}',
        ),
        "attention_with_projections_counted": _function(
            COSTS,
            'return {"self_attention": (n * n * d + 3 * n * d * d, 1, 1), "rnn": (n * d * d, n, n), '
            '"cnn": (k * n * d * d, 1, n / k)}',
        ),
        "lists_not_tuples": _function(
            COSTS,
            'return {"self_attention": [n * n * d, 1, 1], "rnn": [n * d * d, n, n], "cnn": [k * n * d * d, 1, n / k]}',
        ),
    },
    "answer_why_position": {
        "a": 'answer_why_position = "a"\n',
        "c": 'answer_why_position = "c"\n',
        "d": 'answer_why_position = "d"\n',
    },
    "answer_max_path": {
        "a": 'answer_max_path = "a"\n',
        "b": 'answer_max_path = "b"\n',
        "d": 'answer_max_path = "d"\n',
    },
    "answer_cheaper": {
        "a": 'answer_cheaper = "a"\n',
        "c": 'answer_cheaper = "c"\n',
        "d": 'answer_cheaper = "d"\n',
    },
}

CORRECT = {
    "sinusoidal_positional_encoding": {
        "double_loop": _function(
            SINUSOID,
            """
            P = torch.zeros(max_len, d_model)
            for t in range(max_len):
                for i in range(0, d_model, 2):
                    angle = t / 10000 ** (i / d_model)
                    P[t, i] = math.sin(angle)
                    if i + 1 < d_model:
                        P[t, i + 1] = math.cos(angle)
            return P
            """,
        ),
        "float32_exp_log": _function(
            SINUSOID,
            """
            position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(max_len, d_model)
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)[:, : d_model // 2]
            return pe
            """,
        ),
        "stack_and_trim": _function(
            SINUSOID,
            """
            pairs = (d_model + 1) // 2
            freqs = 1.0 / torch.pow(10000.0, torch.arange(pairs, dtype=torch.float64) * 2 / d_model)
            angles = torch.outer(torch.arange(max_len, dtype=torch.float64), freqs)
            P = torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(max_len, 2 * pairs)
            return P[:, :d_model].to(torch.float32)
            """,
        ),
    },
    "PositionalEncoding": {
        "add_table_to_x_dtype_einsum_free": _pe(
            """
            self.d_model = d_model
            self.max_len = max_len
            self.drop = nn.Dropout(p=dropout)
            table = sinusoidal_positional_encoding(max_len, d_model)
            self.register_buffer("P", table, persistent=True)
            """,
            """
            *_, T, width = X.shape
            if width != self.d_model or T > self.max_len:
                raise ValueError(f"X of shape {tuple(X.shape)} (T={T}) does not fit d_model={self.d_model}, max_len={self.max_len}")
            return self.drop(self.P[:T].type_as(X) + X)
            """,
        ),
        "narrow_and_functional_dropout": _pe(
            """
            self.d_model, self.max_len, self.p = d_model, max_len, dropout
            self.register_buffer("P", sinusoidal_positional_encoding(max_len, d_model).clone())
            """,
            """
            T = X.size(-2)
            if X.size(-1) != self.d_model:
                raise ValueError(f"expected width {self.d_model}, got X of shape {list(X.shape)}")
            if T > self.max_len:
                raise ValueError(f"T = {T} exceeds max_len = {self.max_len}")
            return F.dropout(X + self.P.narrow(0, 0, T), p=self.p, training=self.training)
            """,
        ),
    },
    "relative_shift_matrix": {
        "block_diag": _function(
            SHIFT,
            """
            if d_model % 2 == 1:
                raise ValueError(f"d_model = {d_model} is odd")
            blocks = []
            for j in range(d_model // 2):
                w = 1.0 / (10000 ** (2 * j / d_model))
                c, s = math.cos(w * k), math.sin(w * k)
                blocks.append(torch.tensor([[c, -s], [s, c]]))
            return torch.block_diag(*blocks)
            """,
        ),
        "vectorised_float32": _function(
            SHIFT,
            """
            if d_model % 2:
                raise ValueError(f"relative_shift_matrix needs an even d_model, got {d_model}")
            w = 1.0 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
            c, s = torch.cos(w * k), torch.sin(w * k)
            idx = torch.arange(0, d_model, 2)
            M = torch.zeros(d_model, d_model)
            M[idx, idx] = c
            M[idx, idx + 1] = -s
            M[idx + 1, idx] = s
            M[idx + 1, idx + 1] = c
            return M
            """,
        ),
    },
    "image_to_patches": {
        "unfold": _patches(
            """
            x = image if image.dim() == 4 else image.unsqueeze(0)
            out = F.unfold(x.double(), kernel_size=p, stride=p).transpose(1, 2).to(image.dtype)
            return out if image.dim() == 4 else out.squeeze(0)
            """
        ),
        "tensor_unfold_method": _patches(
            """
            x = image.unfold(-2, p, p).unfold(-2, p, p)  # (..., C, H/p, W/p, p, p)
            x = x.movedim(-5, -3)  # (..., H/p, W/p, C, p, p)
            return x.reshape(*lead, (H // p) * (W // p), C * p * p)
            """
        ),
        "explicit_loops": _patches(
            """
            tokens = []
            for r in range(H // p):
                for c in range(W // p):
                    tokens.append(image[..., r * p:(r + 1) * p, c * p:(c + 1) * p].reshape(*lead, C * p * p))
            return torch.stack(tokens, dim=-2)
            """
        ),
        "einops_style_permute": _patches(
            """
            batched = image.dim() == 4
            x = image if batched else image[None]
            B = x.shape[0]
            x = x.reshape(B, C, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5).contiguous()
            x = x.view(B, -1, C * p * p)
            return x if batched else x[0]
            """
        ),
    },
    "layer_costs": {
        "floats_and_powers": _function(
            COSTS,
            """
            n, d, k = float(n), float(d), float(k)
            return {
                "rnn": (n * d**2, n, n),
                "cnn": (k * n * d**2, 1.0, n / k),
                "self_attention": (n**2 * d, 1.0, 1.0),
            }
            """,
        ),
    },
    "answer_why_position": {"upper_case": 'answer_why_position = "B"\n'},
    "answer_max_path": {"padded": 'answer_max_path = " c "\n'},
}
