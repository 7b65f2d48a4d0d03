"""Mutants of chapter 2 (attention scoring functions).

``WRONG``: plausible mistakes, each must fail at least one graded test cell.
``CORRECT``: differently written right answers, each must pass every test.
"""

from textwrap import dedent

from mutant_source import class_cell as _class
from mutant_source import function_cell as _function
from mutant_source import right_choice, wrong_choices


LENGTHS = "def lengths_to_mask(valid_lens, num_keys):"
SOFTMAX = "def masked_softmax(scores, mask=None):"
DOT = "def dot_product_scores(queries, keys):"
SDPA = "def scaled_dot_product_attention(queries, keys, values, mask=None):"
STD = "def score_std(d, num_samples=10_000, scaled=False, seed=0):"

_VALIDATE = """
if valid_lens.numel() > 0 and (int(valid_lens.min()) < 0 or int(valid_lens.max()) > num_keys):
    raise ValueError(f"lengths must lie in [0, {num_keys}]")
"""


def _lengths(body: str, validate: str = _VALIDATE) -> str:
    return _function(LENGTHS, dedent(validate) + dedent(body))


_BOOL_CHECK = """
if mask is None:
    return torch.softmax(scores, dim=-1)
if mask.dtype != torch.bool:
    raise ValueError("masks are boolean, True = may attend")
"""


def _softmax(body: str, check: str = _BOOL_CHECK) -> str:
    return _function(SOFTMAX, dedent(check) + dedent(body))


def _additive(init: str, forward: str) -> str:
    return _class(
        "AdditiveAttention",
        "def __init__(self, query_size, key_size, num_hiddens, dropout=0.0):",
        init,
        {"def forward(self, queries, keys, values, mask=None):": forward},
    )


_INIT = """
self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
self.w_v = nn.Linear(num_hiddens, 1, bias=False)
self.dropout = nn.Dropout(dropout)
"""

_FORWARD = """
features = torch.tanh(self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3))
scores = self.w_v(features).squeeze(-1)
self.attention_weights = masked_softmax(scores, mask)
return self.dropout(self.attention_weights) @ values
"""

WRONG = {
    "lengths_to_mask": {
        "less_or_equal_off_by_one": _lengths(
            """
            mask = torch.arange(num_keys, device=valid_lens.device) <= valid_lens.unsqueeze(-1)
            return mask.unsqueeze(1) if valid_lens.dim() == 1 else mask
            """
        ),
        "shape_B_m_for_1d_lengths": _lengths(
            """
            return torch.arange(num_keys, device=valid_lens.device) < valid_lens.unsqueeze(-1)
            """
        ),
        "singleton_axis_last": _lengths(
            """
            mask = torch.arange(num_keys, device=valid_lens.device) < valid_lens.unsqueeze(-1)
            return mask.unsqueeze(-1) if valid_lens.dim() == 1 else mask
            """
        ),
        "inverted_true_means_padding": _lengths(
            """
            mask = torch.arange(num_keys, device=valid_lens.device) >= valid_lens.unsqueeze(-1)
            return mask.unsqueeze(1) if valid_lens.dim() == 1 else mask
            """
        ),
        "float_mask": _lengths(
            """
            mask = (torch.arange(num_keys, device=valid_lens.device) < valid_lens.unsqueeze(-1)).float()
            return mask.unsqueeze(1) if valid_lens.dim() == 1 else mask
            """
        ),
        "no_validation": _lengths(
            """
            mask = torch.arange(num_keys, device=valid_lens.device) < valid_lens.unsqueeze(-1)
            return mask.unsqueeze(1) if valid_lens.dim() == 1 else mask
            """,
            validate="",
        ),
        "only_negative_lengths_checked": _lengths(
            """
            mask = torch.arange(num_keys, device=valid_lens.device) < valid_lens.unsqueeze(-1)
            return mask.unsqueeze(1) if valid_lens.dim() == 1 else mask
            """,
            validate="""
            if (valid_lens < 0).any():
                raise ValueError("negative length")
            """,
        ),
        "per_query_lengths_flattened": _lengths(
            """
            mask = torch.arange(num_keys, device=valid_lens.device) < valid_lens.reshape(-1, 1)
            return mask.unsqueeze(1)
            """
        ),
    },
    "masked_softmax": {
        "softmax_over_queries_axis": _softmax(
            """
            weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-2)
            return torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
            """,
            check="""
            if mask is None:
                return torch.softmax(scores, dim=-2)
            if mask.dtype != torch.bool:
                raise ValueError("masks are boolean, True = may attend")
            """,
        ),
        "softmax_over_axis_1": _softmax(
            """
            weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=1)
            return torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
            """,
            check="""
            if mask is None:
                return torch.softmax(scores, dim=1)
            if mask.dtype != torch.bool:
                raise ValueError("masks are boolean, True = may attend")
            """,
        ),
        "mask_inverted": _softmax(
            """
            weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            return torch.where((~mask).any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
            """
        ),
        "mask_after_softmax": _softmax(
            """
            return torch.softmax(scores, dim=-1) * mask
            """
        ),
        "mask_after_softmax_renormalised": _softmax(
            """
            weights = torch.softmax(scores, dim=-1) * mask
            return weights / weights.sum(dim=-1, keepdim=True).clamp_min(1e-12)
            """
        ),
        "mask_after_softmax_renormalised_nan": _softmax(
            """
            weights = torch.softmax(scores, dim=-1) * mask
            return weights / weights.sum(dim=-1, keepdim=True)
            """
        ),
        "neg_inf_fill_nan_on_fully_masked_rows": _softmax(
            """
            return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            """
        ),
        "large_negative_fill_uniform_on_fully_masked_rows": _softmax(
            """
            return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)
            """
        ),
        "zero_fill": _softmax(
            """
            weights = torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1)
            return torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
            """
        ),
        "no_max_subtraction_overflows": _function(
            SOFTMAX,
            """
            if mask is not None and mask.dtype != torch.bool:
                raise ValueError("masks are boolean, True = may attend")
            exps = torch.exp(scores)
            if mask is not None:
                exps = exps * mask
            totals = exps.sum(dim=-1, keepdim=True)
            return exps / torch.where(totals > 0, totals, torch.ones_like(totals))
            """,
        ),
        "computes_and_returns_float64": _softmax(
            """
            weights = torch.softmax(scores.double().masked_fill(~mask, float("-inf")), dim=-1)
            return weights.nan_to_num(0.0)
            """,
            check="""
            if mask is None:
                return torch.softmax(scores.double(), dim=-1)
            if mask.dtype != torch.bool:
                raise ValueError("masks are boolean, True = may attend")
            """,
        ),
        "float_mask_silently_cast_to_bool": _softmax(
            """
            mask = mask.bool()
            weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            return weights.nan_to_num(0.0)
            """,
            check="""
            if mask is None:
                return torch.softmax(scores, dim=-1)
            """,
        ),
        "float_mask_left_to_torch_runtime_error": _softmax(
            """
            weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            return weights.nan_to_num(0.0)
            """,
            check="""
            if mask is None:
                return torch.softmax(scores, dim=-1)
            """,
        ),
        "error_message_without_the_convention": _softmax(
            """
            return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)
            """,
            check="""
            if mask is None:
                return torch.softmax(scores, dim=-1)
            if mask.dtype != torch.bool:
                raise ValueError("invalid mask")
            """,
        ),
        "mask_none_not_handled": _function(
            SOFTMAX,
            """
            if mask.dtype != torch.bool:
                raise ValueError("masks are boolean, True = may attend")
            return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)
            """,
        ),
    },
    "dot_product_scores": {
        "keys_times_queries_transposed": _function(
            DOT,
            """
            if queries.shape[-1] != keys.shape[-1]:
                raise ValueError(f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)}")
            return keys @ queries.transpose(-2, -1)
            """,
        ),
        "scaled_already": _function(
            DOT,
            """
            if queries.shape[-1] != keys.shape[-1]:
                raise ValueError(f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)}")
            return queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
            """,
        ),
        "dot_T_reverses_batch_axes": _function(
            DOT,
            """
            if queries.shape[-1] != keys.shape[-1]:
                raise ValueError(f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)}")
            return queries @ keys.permute(*reversed(range(keys.dim())))
            """,
        ),
        "no_width_check": _function(
            DOT,
            """
            return queries @ keys.transpose(-2, -1)
            """,
        ),
        "assert_instead_of_value_error": _function(
            DOT,
            """
            assert queries.shape[-1] == keys.shape[-1], "widths differ"
            return queries @ keys.transpose(-2, -1)
            """,
        ),
        "message_without_shapes": _function(
            DOT,
            """
            if queries.shape[-1] != keys.shape[-1]:
                raise ValueError("queries and keys must have the same width")
            return queries @ keys.transpose(-2, -1)
            """,
        ),
        "elementwise_product_summed_over_keys": _function(
            DOT,
            """
            if queries.shape[-1] != keys.shape[-1]:
                raise ValueError(f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)}")
            return (queries.unsqueeze(-2) * keys.unsqueeze(-3)).sum(dim=-2)
            """,
        ),
    },
    "scaled_dot_product_attention": {
        "scale_missing": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys), mask)
            return weights @ values, weights
            """,
        ),
        "scale_one_over_d": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys) / queries.shape[-1], mask)
            return weights @ values, weights
            """,
        ),
        "scale_sqrt_d_v": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys) / math.sqrt(values.shape[-1]), mask)
            return weights @ values, weights
            """,
        ),
        "scale_multiplies": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys) * math.sqrt(queries.shape[-1]), mask)
            return weights @ values, weights
            """,
        ),
        "scale_after_softmax": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys), mask) / math.sqrt(queries.shape[-1])
            return weights @ values, weights
            """,
        ),
        "weights_transposed": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys) / math.sqrt(queries.shape[-1]), mask)
            return weights.transpose(-2, -1) @ values, weights
            """,
        ),
        "softmax_over_queries": _function(
            SDPA,
            """
            scores = dot_product_scores(queries, keys) / math.sqrt(queries.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-2).nan_to_num(0.0)
            return weights @ values, weights
            """,
        ),
        "mask_inverted": _function(
            SDPA,
            """
            scores = dot_product_scores(queries, keys) / math.sqrt(queries.shape[-1])
            weights = masked_softmax(scores, None if mask is None else ~mask)
            return weights @ values, weights
            """,
        ),
        "mask_ignored": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys) / math.sqrt(queries.shape[-1]))
            return weights @ values, weights
            """,
        ),
        "returns_weights_then_output": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys) / math.sqrt(queries.shape[-1]), mask)
            return weights, weights @ values
            """,
        ),
        "returns_output_only": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys) / math.sqrt(queries.shape[-1]), mask)
            return weights @ values
            """,
        ),
        "attends_to_keys_not_values": _function(
            SDPA,
            """
            weights = masked_softmax(dot_product_scores(queries, keys) / math.sqrt(queries.shape[-1]), mask)
            return weights @ keys, weights
            """,
        ),
        "nan_on_fully_masked_rows": _function(
            SDPA,
            """
            scores = dot_product_scores(queries, keys) / math.sqrt(queries.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return weights @ values, weights
            """,
        ),
    },
    "AdditiveAttention": {
        "W_q_and_W_k_swapped_in_forward": _additive(
            _INIT,
            """
            features = torch.tanh(self.W_k(queries).unsqueeze(-2) + self.W_q(keys).unsqueeze(-3))
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores, mask)
            return self.dropout(self.attention_weights) @ values
            """,
        ),
        "W_q_and_W_k_sizes_swapped": _additive(
            """
            self.W_q = nn.Linear(key_size, num_hiddens, bias=False)
            self.W_k = nn.Linear(query_size, num_hiddens, bias=False)
            self.w_v = nn.Linear(num_hiddens, 1, bias=False)
            self.dropout = nn.Dropout(dropout)
            """,
            _FORWARD,
        ),
        "bias_true": _additive(
            """
            self.W_q = nn.Linear(query_size, num_hiddens)
            self.W_k = nn.Linear(key_size, num_hiddens)
            self.w_v = nn.Linear(num_hiddens, 1)
            self.dropout = nn.Dropout(dropout)
            """,
            _FORWARD,
        ),
        "tanh_missing": _additive(
            _INIT,
            """
            features = self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3)
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores, mask)
            return self.dropout(self.attention_weights) @ values
            """,
        ),
        "relu_instead_of_tanh": _additive(
            _INIT,
            """
            features = torch.relu(self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3))
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores, mask)
            return self.dropout(self.attention_weights) @ values
            """,
        ),
        "sum_instead_of_w_v": _additive(
            _INIT,
            """
            features = torch.tanh(self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3))
            scores = features.sum(dim=-1)
            self.attention_weights = masked_softmax(scores, mask)
            return self.dropout(self.attention_weights) @ values
            """,
        ),
        "broadcast_keys_by_queries": _additive(
            _INIT,
            """
            features = torch.tanh(self.W_q(queries).unsqueeze(-3) + self.W_k(keys).unsqueeze(-2))
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores, mask)
            return self.dropout(self.attention_weights) @ values
            """,
        ),
        "dropout_on_scores_before_masking": _additive(
            _INIT,
            """
            features = torch.tanh(self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3))
            scores = self.dropout(self.w_v(features).squeeze(-1))
            self.attention_weights = masked_softmax(scores, mask)
            return self.attention_weights @ values
            """,
        ),
        "stores_weights_after_dropout": _additive(
            _INIT,
            """
            features = torch.tanh(self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3))
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = self.dropout(masked_softmax(scores, mask))
            return self.attention_weights @ values
            """,
        ),
        "dropout_never_applied": _additive(
            _INIT,
            """
            features = torch.tanh(self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3))
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores, mask)
            return self.attention_weights @ values
            """,
        ),
        "dropout_also_in_eval_mode": _additive(
            _INIT,
            """
            features = torch.tanh(self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3))
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores, mask)
            return F.dropout(self.attention_weights, self.dropout.p, training=True) @ values
            """,
        ),
        "mask_ignored": _additive(
            _INIT,
            """
            features = torch.tanh(self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3))
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores)
            return self.dropout(self.attention_weights) @ values
            """,
        ),
        "softmax_over_queries": _additive(
            _INIT,
            """
            features = torch.tanh(self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3))
            scores = self.w_v(features).squeeze(-1)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            self.attention_weights = torch.softmax(scores, dim=-2).nan_to_num(0.0)
            return self.dropout(self.attention_weights) @ values
            """,
        ),
    },
    "score_std": {
        "returns_variance": _function(
            STD,
            """
            generator = torch.Generator().manual_seed(seed)
            q = torch.randn(num_samples, d, generator=generator)
            k = torch.randn(num_samples, d, generator=generator)
            scores = (q * k).sum(-1) / (math.sqrt(d) if scaled else 1.0)
            return scores.var().item()
            """,
        ),
        "scaled_by_d_missing_sqrt": _function(
            STD,
            """
            generator = torch.Generator().manual_seed(seed)
            q = torch.randn(num_samples, d, generator=generator)
            k = torch.randn(num_samples, d, generator=generator)
            scores = (q * k).sum(-1) / (d if scaled else 1.0)
            return scores.std().item()
            """,
        ),
        "scaled_flag_ignored": _function(
            STD,
            """
            generator = torch.Generator().manual_seed(seed)
            q = torch.randn(num_samples, d, generator=generator)
            k = torch.randn(num_samples, d, generator=generator)
            return (q * k).sum(-1).std().item()
            """,
        ),
        "seed_ignored_global_rng": _function(
            STD,
            """
            q = torch.randn(num_samples, d)
            k = torch.randn(num_samples, d)
            scores = (q * k).sum(-1) / (math.sqrt(d) if scaled else 1.0)
            return scores.std().item()
            """,
        ),
        "generator_not_seeded": _function(
            STD,
            """
            generator = torch.Generator()
            generator.seed()
            q = torch.randn(num_samples, d, generator=generator)
            k = torch.randn(num_samples, d, generator=generator)
            scores = (q * k).sum(-1) / (math.sqrt(d) if scaled else 1.0)
            return scores.std().item()
            """,
        ),
        "returns_tensor": _function(
            STD,
            """
            generator = torch.Generator().manual_seed(seed)
            q = torch.randn(num_samples, d, generator=generator)
            k = torch.randn(num_samples, d, generator=generator)
            scores = (q * k).sum(-1) / (math.sqrt(d) if scaled else 1.0)
            return scores.std()
            """,
        ),
        "key_equals_query": _function(
            STD,
            """
            generator = torch.Generator().manual_seed(seed)
            q = torch.randn(num_samples, d, generator=generator)
            scores = (q * q).sum(-1) / (math.sqrt(d) if scaled else 1.0)
            return scores.std().item()
            """,
        ),
        "num_samples_ignored": _function(
            STD,
            """
            generator = torch.Generator().manual_seed(seed)
            q = torch.randn(10_000, d, generator=generator)
            k = torch.randn(10_000, d, generator=generator)
            scores = (q * k).sum(-1) / (math.sqrt(d) if scaled else 1.0)
            return scores.std().item()
            """,
        ),
        "uniform_instead_of_normal": _function(
            STD,
            """
            generator = torch.Generator().manual_seed(seed)
            q = torch.rand(num_samples, d, generator=generator)
            k = torch.rand(num_samples, d, generator=generator)
            scores = (q * k).sum(-1) / (math.sqrt(d) if scaled else 1.0)
            return scores.std().item()
            """,
        ),
        "std_over_the_d_products": _function(
            STD,
            """
            generator = torch.Generator().manual_seed(seed)
            q = torch.randn(num_samples, d, generator=generator)
            k = torch.randn(num_samples, d, generator=generator)
            products = q * k / (math.sqrt(d) if scaled else 1.0)
            return products.std().item()
            """,
        ),
    },
    **{name: wrong_choices("ch02_scoring_functions", name)
       for name in ("answer_not_a_difference", "answer_why_scale", "answer_column_form")},
}

CORRECT = {
    "lengths_to_mask": {
        "loops": _function(
            LENGTHS,
            """
            if (valid_lens < 0).any() or (valid_lens > num_keys).any():
                raise ValueError(f"valid lengths must lie in [0, {num_keys}], got {valid_lens.tolist()}")
            flat = valid_lens.reshape(-1).tolist()
            rows = torch.zeros(len(flat), num_keys, dtype=torch.bool, device=valid_lens.device)
            for r, length in enumerate(flat):
                rows[r, :length] = True
            if valid_lens.dim() == 1:
                return rows.reshape(-1, 1, num_keys)
            return rows.reshape(*valid_lens.shape, num_keys)
            """,
        ),
        "indexing_broadcast": _function(
            LENGTHS,
            """
            if valid_lens.min() < 0 or valid_lens.max() > num_keys:
                raise ValueError("every length must be between 0 and num_keys")
            lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[..., None]
            return torch.arange(num_keys, device=lens.device) < lens
            """,
        ),
    },
    "masked_softmax": {
        "finfo_min_fill_then_multiply": _softmax(
            """
            filled = torch.where(mask, scores, torch.finfo(scores.dtype).min)
            return torch.softmax(filled, dim=-1) * mask
            """
        ),
        "manual_exp_with_max_subtraction": _softmax(
            """
            filled = scores.masked_fill(~mask, float("-inf"))
            row_max = filled.amax(dim=-1, keepdim=True)
            row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
            exps = torch.exp(filled - row_max)
            totals = exps.sum(dim=-1, keepdim=True)
            return exps / totals.clamp_min(torch.finfo(scores.dtype).tiny)
            """
        ),
        "nan_to_num_after_softmax": _softmax(
            """
            return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)
            """
        ),
        "type_error_for_float_masks": _softmax(
            """
            return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)
            """,
            check="""
            if mask is None:
                return scores.softmax(-1)
            if mask.dtype is not torch.bool:
                raise TypeError(f"expected a boolean mask (True = may attend), got {mask.dtype}")
            """,
        ),
    },
    "dot_product_scores": {
        "einsum": _function(
            DOT,
            """
            if queries.shape[-1] != keys.shape[-1]:
                raise ValueError(f"width mismatch: {list(queries.shape)} vs {list(keys.shape)}")
            return torch.einsum("...id,...jd->...ij", queries, keys)
            """,
        ),
        "matmul_mT": _function(
            DOT,
            """
            if queries.size(-1) != keys.size(-1):
                raise ValueError(f"queries of shape {queries.shape} and keys of shape {keys.shape}")
            return torch.matmul(queries, keys.mT)
            """,
        ),
        "broadcast_product_and_sum": _function(
            DOT,
            """
            if queries.shape[-1] != keys.shape[-1]:
                raise ValueError(f"{tuple(queries.shape)} and {tuple(keys.shape)}")
            return (queries.unsqueeze(-2) * keys.unsqueeze(-3)).sum(dim=-1)
            """,
        ),
    },
    "scaled_dot_product_attention": {
        "scale_the_queries_first": _function(
            SDPA,
            """
            queries = queries / queries.shape[-1] ** 0.5
            weights = masked_softmax(queries @ keys.transpose(-1, -2), mask)
            return torch.matmul(weights, values), weights
            """,
        ),
        "einsum_and_own_masking": _function(
            SDPA,
            """
            scores = torch.einsum("...id,...jd->...ij", queries, keys) * (1.0 / math.sqrt(keys.shape[-1]))
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            return torch.einsum("...ij,...jv->...iv", weights, values), weights
            """,
        ),
    },
    "AdditiveAttention": {
        "loop_over_keys_and_functional_dropout": _additive(
            """
            self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
            self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
            self.w_v = nn.Linear(num_hiddens, 1, bias=False)
            self.p = dropout
            """,
            """
            q = self.W_q(queries)
            k = self.W_k(keys)
            columns = [self.w_v(torch.tanh(q + k[..., j : j + 1, :])) for j in range(k.shape[-2])]
            scores = torch.cat(columns, dim=-1)
            self.attention_weights = masked_softmax(scores, mask)
            return torch.matmul(F.dropout(self.attention_weights, self.p, self.training), values)
            """,
        ),
        "einsum_with_w_v_weight": _additive(
            _INIT,
            """
            hidden = torch.tanh(self.W_q(queries)[..., :, None, :] + self.W_k(keys)[..., None, :, :])
            scores = torch.einsum("...nmh,h->...nm", hidden, self.w_v.weight[0])
            weights = masked_softmax(scores, mask)
            self.attention_weights = weights
            return torch.einsum("...nm,...mv->...nv", self.dropout(weights), values)
            """,
        ),
    },
    "score_std": {
        "one_draw_biased_std": _function(
            STD,
            """
            g = torch.Generator()
            g.manual_seed(seed)
            pairs = torch.randn(2, num_samples, d, generator=g)
            scores = torch.einsum("nd,nd->n", pairs[0], pairs[1])
            if scaled:
                scores = scores / d ** 0.5
            return float(torch.sqrt(((scores - scores.mean()) ** 2).mean()))
            """,
        ),
        "numpy_std_of_float32_scores": _function(
            STD,
            """
            gen = torch.Generator().manual_seed(seed)
            q, k = torch.randn(num_samples, d, generator=gen), torch.randn(num_samples, d, generator=gen)
            s = (q * k).sum(dim=1).numpy()
            return float(s.std(ddof=1) / (math.sqrt(d) if scaled else 1))
            """,
        ),
    },
    "answer_not_a_difference": {
        "upper_case_with_spaces": right_choice("ch02_scoring_functions", "answer_not_a_difference", " {upper} ")},
}


# Wrong only through a side effect inside the student's own process: reseeding PyTorch's
# global generator changes no returned value, so grading (which judges what the student's
# code returns: autograder.judge) cannot see it. The visible test catches it where the
# learner runs the notebook, in one kernel; tests/test_mutants.py checks that there.
WRONG_IN_KERNEL = {
    "score_std": {
        "reseeds_global_rng": _function(
            STD,
            """
            torch.manual_seed(seed)
            q = torch.randn(num_samples, d)
            k = torch.randn(num_samples, d)
            scores = (q * k).sum(-1) / (math.sqrt(d) if scaled else 1.0)
            return scores.std().item()
            """,
        ),
    },
}

# Mistakes whose failure message must name them (check_close's likely=, computed by the test).
MESSAGES = {
    "scaled_dot_product_attention": {
        "scale_missing": "not divided by sqrt(d_k)",
        "scale_one_over_d": "divided by d_k instead of sqrt(d_k)",
    },
}
