"""Mutants of chapter 4 (multi-head attention).

``WRONG``: plausible mistakes, each must fail at least one graded test cell.
``CORRECT``: differently written right answers, each must pass every test.
"""

from textwrap import dedent

from mutant_source import class_cell as _class
from mutant_source import function_cell as _function
from mutant_source import replaced as _replaced
from mutant_source import right_choice, wrong_choices


SPLIT = "def split_heads(X, num_heads):"
MERGE = "def merge_heads(X):"
COUNT = "def mha_param_count(d_model, num_heads, bias=True):"

_SPLIT_CHECK = """
B, T, D = X.shape
if D % num_heads != 0:
    raise ValueError(f"cannot split {tuple(X.shape)} into {num_heads} heads")
d = D // num_heads
"""


def _split(body: str, check: str = _SPLIT_CHECK) -> str:
    return _function(SPLIT, dedent(check) + dedent(body))


_INIT = """
if d_model % num_heads != 0:
    raise ValueError(f"d_model = {d_model} is not a multiple of num_heads = {num_heads}")
self.num_heads = num_heads
self.W_q = nn.Linear(d_model, d_model, bias=bias)
self.W_k = nn.Linear(d_model, d_model, bias=bias)
self.W_v = nn.Linear(d_model, d_model, bias=bias)
self.W_o = nn.Linear(d_model, d_model, bias=bias)
self.dropout = nn.Dropout(dropout)
self.attention_weights = None
"""

# The reference forward, written with the notebook's own split_heads / merge_heads.
_FORWARD = """
Q = split_heads(self.W_q(queries), self.num_heads)
K = split_heads(self.W_k(keys), self.num_heads)
V = split_heads(self.W_v(values), self.num_heads)
if mask is not None and mask.dim() == 3:
    mask = mask.unsqueeze(1)
scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
self.attention_weights = masked_softmax(scores, mask)
return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V))
"""


def _mha(init: str = _INIT, forward: str = _FORWARD) -> str:
    return _class(
        "MultiHeadAttention",
        "def __init__(self, d_model, num_heads, dropout=0.0, bias=True):",
        init,
        {"def forward(self, queries, keys, values, mask=None):": forward},
    )


def _forward_with(old: str, new: str) -> str:
    """The reference class with one line of the forward replaced."""
    return _mha(forward=_replaced(_FORWARD, old, new))


_SCORES = "scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])"

WRONG = {
    "split_heads": {
        "reshape_to_B_h_T_d_directly": _split(
            """
            return X.reshape(B, num_heads, T, d)
            """
        ),
        "view_B_T_d_h_interleaves_columns": _split(
            """
            return X.view(B, T, d, num_heads).permute(0, 3, 1, 2)
            """
        ),
        "heads_not_moved_before_time": _split(
            """
            return X.reshape(B, T, num_heads, d)
            """
        ),
        "transpose_wrong_axes": _split(
            """
            return X.reshape(B, T, num_heads, d).transpose(2, 3)
            """
        ),
        "time_and_width_swapped": _split(
            """
            return X.reshape(B, T, num_heads, d).permute(0, 2, 3, 1)
            """
        ),
        "no_divisibility_check_silently_drops_columns": _split(
            """
            d = D // num_heads
            return X[..., : num_heads * d].reshape(B, T, num_heads, d).transpose(1, 2)
            """,
            check="B, T, D = X.shape\n",
        ),
        "assert_instead_of_value_error": _split(
            """
            return X.reshape(B, T, num_heads, D // num_heads).transpose(1, 2)
            """,
            check="""
            B, T, D = X.shape
            assert D % num_heads == 0, f"{tuple(X.shape)} and {num_heads}"
            """,
        ),
        "message_without_shapes": _split(
            """
            return X.reshape(B, T, num_heads, D // num_heads).transpose(1, 2)
            """,
            check="""
            B, T, D = X.shape
            if D % num_heads:
                raise ValueError("D must be a multiple of the number of heads")
            """,
        ),
        "message_names_the_shape_but_not_num_heads": _split(
            """
            return X.reshape(B, T, num_heads, d).transpose(1, 2)
            """,
            check="""
            B, T, D = X.shape
            if D % num_heads != 0:
                raise ValueError(f"cannot split X of shape {tuple(X.shape)} into heads")
            d = D // num_heads
            """,
        ),
        "casts_to_float32": _split(
            """
            return X.float().reshape(B, T, num_heads, d).transpose(1, 2)
            """
        ),
    },
    "merge_heads": {
        "reshape_without_transpose": _function(
            MERGE,
            """
            B, h, T, d = X.shape
            return X.reshape(B, T, h * d)
            """,
        ),
        "width_major_interleaves_heads": _function(
            MERGE,
            """
            B, h, T, d = X.shape
            return X.permute(0, 2, 3, 1).reshape(B, T, h * d)
            """,
        ),
        "heads_summed_not_concatenated": _function(
            MERGE,
            """
            B, h, T, d = X.shape
            return X.sum(dim=1).repeat(1, 1, h)
            """,
        ),
        "view_after_transpose_fails_on_contiguous_input": _function(
            MERGE,
            """
            B, h, T, d = X.shape
            return X.transpose(1, 2).view(B, T, h * d)
            """,
        ),
        "heads_in_reverse_order": _function(
            MERGE,
            """
            B, h, T, d = X.shape
            return X.flip(1).transpose(1, 2).reshape(B, T, h * d)
            """,
        ),
    },
    "MultiHeadAttention": {
        "scale_sqrt_d_model": _forward_with(_SCORES, "scores = Q @ K.transpose(-2, -1) / math.sqrt(self.W_q.in_features)"),
        "no_scale": _forward_with(_SCORES, "scores = Q @ K.transpose(-2, -1)"),
        "scale_by_d_head_not_its_root": _forward_with(_SCORES, "scores = Q @ K.transpose(-2, -1) / Q.shape[-1]"),
        "scale_sqrt_num_heads": _forward_with(_SCORES, "scores = Q @ K.transpose(-2, -1) / math.sqrt(self.num_heads)"),
        "mask_inverted": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = masked_softmax(scores, None if mask is None else ~mask)",
        ),
        "mask_ignored": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = masked_softmax(scores)",
        ),
        "three_d_mask_not_given_a_head_axis": _forward_with(
            "if mask is not None and mask.dim() == 3:\n    mask = mask.unsqueeze(1)\n", ""
        ),
        "three_d_mask_head_axis_at_the_end": _forward_with(
            "mask = mask.unsqueeze(1)", "mask = mask.unsqueeze(-1)"
        ),
        "nan_on_fully_masked_queries": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = torch.softmax(scores if mask is None else scores.masked_fill(~mask, float('-inf')), dim=-1)",
        ),
        "uniform_weights_on_fully_masked_queries": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = torch.softmax(scores if mask is None else scores.masked_fill(~mask, -1e9), dim=-1)",
        ),
        "mask_after_softmax": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = torch.softmax(scores, dim=-1) * (1 if mask is None else mask)",
        ),
        "softmax_over_queries": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = masked_softmax(scores.transpose(-2, -1), None if mask is None else mask.transpose(-2, -1)).transpose(-2, -1)",
        ),
        "softmax_over_heads": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = torch.softmax(scores if mask is None else scores.masked_fill(~mask, -1e9), dim=1)",
        ),
        "split_view_B_T_d_h": _mha(
            forward=_FORWARD.replace("split_heads(self.W_q(queries), self.num_heads)", "self._split(self.W_q(queries))")
            .replace("split_heads(self.W_k(keys), self.num_heads)", "self._split(self.W_k(keys))")
            .replace("split_heads(self.W_v(values), self.num_heads)", "self._split(self.W_v(values))")
            .replace("return self.W_o", "return self.W_o")
        ).replace(
            "    def forward(",
            "    def _split(self, X):\n"
            "        B, T, D = X.shape\n"
            "        return X.view(B, T, D // self.num_heads, self.num_heads).permute(0, 3, 1, 2)\n\n"
            "    def forward(",
        ),
        "heads_reshaped_without_transpose": _mha(
            forward="""
            B, n, D = queries.shape
            m, h = keys.shape[1], self.num_heads
            Q = self.W_q(queries).reshape(B, h, n, D // h)
            K = self.W_k(keys).reshape(B, h, m, D // h)
            V = self.W_v(values).reshape(B, h, m, D // h)
            if mask is not None and mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = Q @ K.transpose(-2, -1) / math.sqrt(D // h)
            self.attention_weights = masked_softmax(scores, mask)
            return self.W_o((self.dropout(self.attention_weights) @ V).reshape(B, n, D))
            """
        ),
        "merge_without_transpose": _forward_with(
            "return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V))",
            "heads = self.dropout(self.attention_weights) @ V\n"
            "return self.W_o(heads.reshape(heads.shape[0], heads.shape[2], -1))",
        ),
        "W_o_missing": _forward_with(
            "return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V))",
            "return merge_heads(self.dropout(self.attention_weights) @ V)",
        ),
        "W_k_used_for_values": _forward_with(
            "V = split_heads(self.W_v(values), self.num_heads)", "V = split_heads(self.W_k(values), self.num_heads)"
        ),
        "keys_used_as_values": _forward_with(
            "V = split_heads(self.W_v(values), self.num_heads)", "V = split_heads(self.W_v(keys), self.num_heads)"
        ),
        "queries_and_keys_swapped": _forward_with(_SCORES, "scores = K @ Q.transpose(-2, -1) / math.sqrt(Q.shape[-1])"),
        "biases_ignored_in_forward": _mha(
            forward="""
            Q = split_heads(F.linear(queries, self.W_q.weight), self.num_heads)
            K = split_heads(F.linear(keys, self.W_k.weight), self.num_heads)
            V = split_heads(F.linear(values, self.W_v.weight), self.num_heads)
            if mask is not None and mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
            self.attention_weights = masked_softmax(scores, mask)
            return F.linear(merge_heads(self.dropout(self.attention_weights) @ V), self.W_o.weight)
            """
        ),
        "bias_flag_ignored": _mha(init=_INIT.replace(", bias=bias)", ")")),
        "no_bias_ever": _mha(init=_INIT.replace(", bias=bias)", ", bias=False)")),
        "shared_per_head_projection_like_the_notes": _mha(
            init="""
            if d_model % num_heads != 0:
                raise ValueError(f"d_model = {d_model} is not a multiple of num_heads = {num_heads}")
            self.num_heads = num_heads
            d = d_model // num_heads
            self.W_q = nn.Linear(d, d, bias=bias)
            self.W_k = nn.Linear(d, d, bias=bias)
            self.W_v = nn.Linear(d, d, bias=bias)
            self.W_o = nn.Linear(d_model, d_model, bias=bias)
            self.dropout = nn.Dropout(dropout)
            self.attention_weights = None
            """,
            forward="""
            Q = self.W_q(split_heads(queries, self.num_heads))
            K = self.W_k(split_heads(keys, self.num_heads))
            V = self.W_v(split_heads(values, self.num_heads))
            if mask is not None and mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
            self.attention_weights = masked_softmax(scores, mask)
            return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V))
            """,
        ),
        "notes_class_scale_and_shared_projection_as_block_diagonal": _mha(
            # loads with the right names and shapes, but only the first diagonal block of each
            # projection is used, for every head
            forward="""
            h = self.num_heads
            d = self.W_q.in_features // h
            def project(x, layer):
                block = layer.weight[:d, :d]
                y = split_heads(x, h) @ block.T
                return y if layer.bias is None else y + layer.bias[:d]
            Q, K, V = project(queries, self.W_q), project(keys, self.W_k), project(values, self.W_v)
            if mask is not None and mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = Q @ K.transpose(-2, -1) / math.sqrt(self.W_q.in_features)
            self.attention_weights = masked_softmax(scores, mask)
            return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V))
            """
        ),
        "weights_averaged_over_heads": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)\n",
            "weights = masked_softmax(scores, mask)\nself.attention_weights = weights.mean(dim=1)\n",
        ).replace("self.dropout(self.attention_weights) @ V", "self.dropout(weights) @ V"),
        "weights_stored_after_dropout": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)\n"
            "return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V))",
            "self.attention_weights = self.dropout(masked_softmax(scores, mask))\n"
            "return self.W_o(merge_heads(self.attention_weights @ V))",
        ),
        "dropout_on_the_output": _forward_with(
            "return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V))",
            "return self.dropout(self.W_o(merge_heads(self.attention_weights @ V)))",
        ),
        "dropout_on_the_scores": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)\n"
            "return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V))",
            "self.attention_weights = masked_softmax(self.dropout(scores), mask)\n"
            "return self.W_o(merge_heads(self.attention_weights @ V))",
        ),
        "dropout_never_applied": _forward_with(
            "self.dropout(self.attention_weights) @ V", "self.attention_weights @ V"
        ),
        "dropout_also_in_eval_mode": _forward_with(
            "self.dropout(self.attention_weights) @ V",
            "F.dropout(self.attention_weights, self.dropout.p, training=True) @ V",
        ),
        "no_divisibility_check": _mha(init=_INIT.replace(
            'if d_model % num_heads != 0:\n    raise ValueError(f"d_model = {d_model} is not a multiple of num_heads = {num_heads}")\n',
            "",
        )),
        "weights_cast_to_float32": _forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = masked_softmax(scores.float(), mask)",
        ).replace("self.dropout(self.attention_weights) @ V", "self.dropout(self.attention_weights).to(V.dtype) @ V"),
    },
    "mha_param_count": {
        "without_biases": _function(
            COUNT,
            """
            if d_model % num_heads:
                raise ValueError("d_model must be a multiple of num_heads")
            return 4 * d_model * d_model
            """,
        ),
        "without_W_o": _function(
            COUNT,
            """
            if d_model % num_heads:
                raise ValueError("d_model must be a multiple of num_heads")
            return 3 * d_model * d_model + (3 * d_model if bias else 0)
            """,
        ),
        "per_head_copies_of_full_matrices": _function(
            COUNT,
            """
            if d_model % num_heads:
                raise ValueError("d_model must be a multiple of num_heads")
            return num_heads * 3 * d_model * d_model + d_model * d_model + (4 * d_model if bias else 0)
            """,
        ),
        "notes_shared_head_dim_projections": _function(
            COUNT,
            """
            if d_model % num_heads:
                raise ValueError("d_model must be a multiple of num_heads")
            d = d_model // num_heads
            return 3 * d * d + d_model * d_model + (3 * d + d_model if bias else 0)
            """,
        ),
        "one_bias_only": _function(
            COUNT,
            """
            if d_model % num_heads:
                raise ValueError("d_model must be a multiple of num_heads")
            return 4 * d_model * d_model + (d_model if bias else 0)
            """,
        ),
        "bias_flag_ignored": _function(
            COUNT,
            """
            if d_model % num_heads:
                raise ValueError("d_model must be a multiple of num_heads")
            return 4 * d_model * (d_model + 1)
            """,
        ),
        "returns_float": _function(
            COUNT,
            """
            if d_model % num_heads:
                raise ValueError("d_model must be a multiple of num_heads")
            return 4.0 * d_model ** 2 + (4.0 * d_model if bias else 0.0)
            """,
        ),
        "no_divisibility_check": _function(
            COUNT,
            """
            return 4 * d_model * d_model + (4 * d_model if bias else 0)
            """,
        ),
    },
    **{name: wrong_choices("ch04_multihead_attention", name)
       for name in ("answer_notes_scale", "answer_notes_projections", "answer_notes_param_count")},
}

CORRECT = {
    "split_heads": {
        "view_then_permute": _function(
            SPLIT,
            """
            if X.shape[-1] % num_heads:
                raise ValueError(f"the width of X {list(X.shape)} is not divisible by num_heads={num_heads}")
            B, T, D = X.shape
            return X.view(B, T, num_heads, -1).permute(0, 2, 1, 3)
            """,
        ),
        "stack_of_slices": _function(
            SPLIT,
            """
            D = X.shape[-1]
            if D % num_heads != 0:
                raise ValueError(f"X has shape {tuple(X.shape)}; {D} is not divisible by {num_heads} heads")
            d = D // num_heads
            return torch.stack([X[:, :, i * d:(i + 1) * d] for i in range(num_heads)], dim=1)
            """,
        ),
        "chunk_and_stack": _function(
            SPLIT,
            """
            if X.size(-1) % num_heads:
                raise ValueError(f"shape {tuple(X.shape)} with num_heads = {num_heads}")
            return torch.stack(X.chunk(num_heads, dim=-1), dim=1)
            """,
        ),
    },
    "merge_heads": {
        "cat_of_heads": _function(
            MERGE,
            """
            return torch.cat([X[:, i] for i in range(X.shape[1])], dim=-1)
            """,
        ),
        "permute_contiguous_view": _function(
            MERGE,
            """
            B, h, T, d = X.shape
            return X.permute(0, 2, 1, 3).contiguous().view(B, T, h * d)
            """,
        ),
        "flatten": _function(
            MERGE,
            """
            return X.transpose(1, 2).flatten(start_dim=2)
            """,
        ),
    },
    "MultiHeadAttention": {
        "einsum_and_own_masking": _mha(
            forward="""
            B, n, D = queries.shape
            h = self.num_heads
            d = D // h
            q = self.W_q(queries).view(B, n, h, d)
            k = self.W_k(keys).view(B, -1, h, d)
            v = self.W_v(values).view(B, -1, h, d)
            scores = torch.einsum("bnhd,bmhd->bhnm", q, k) / d ** 0.5
            if mask is not None:
                if mask.dim() == 3:
                    mask = mask[:, None]
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            self.attention_weights = weights
            out = torch.einsum("bhnm,bmhd->bnhd", self.dropout(weights), v).reshape(B, n, D)
            return self.W_o(out)
            """
        ),
        "loop_over_heads_with_weight_slices": _mha(
            forward="""
            h = self.num_heads
            d = self.W_q.out_features // h
            if mask is not None and mask.dim() == 3:
                mask = mask.unsqueeze(1)
            outputs, weights = [], []
            for i in range(h):
                rows = slice(i * d, (i + 1) * d)
                def project(x, layer):
                    bias = None if layer.bias is None else layer.bias[rows]
                    return F.linear(x, layer.weight[rows], bias)
                q, k, v = project(queries, self.W_q), project(keys, self.W_k), project(values, self.W_v)
                head_mask = None
                if mask is not None:
                    head_mask = mask if mask.dim() == 2 else mask[:, i if mask.shape[1] > 1 else 0]
                out, w = scaled_dot_product_attention(q, k, v, head_mask)
                weights.append(w)
            self.attention_weights = torch.stack(weights, dim=1)
            for i in range(h):
                rows = slice(i * d, (i + 1) * d)
                v = F.linear(values, self.W_v.weight[rows], None if self.W_v.bias is None else self.W_v.bias[rows])
                outputs.append(self.dropout(self.attention_weights[:, i]) @ v)
            return self.W_o(torch.cat(outputs, dim=-1))
            """
        ),
        "scale_queries_first_and_sdpa_helper": _mha(
            init=_INIT.replace("self.num_heads = num_heads", "self.h = num_heads\nself.scale = (d_model // num_heads) ** -0.5"),
            forward="""
            Q = split_heads(self.W_q(queries) * self.scale, self.h)
            K = split_heads(self.W_k(keys), self.h)
            V = split_heads(self.W_v(values), self.h)
            if mask is not None and mask.ndim == 3:
                mask = mask[:, None, :, :]
            scores = torch.matmul(Q, K.mT)
            weights = masked_softmax(scores, mask)
            self.attention_weights = weights
            return self.W_o(merge_heads(torch.matmul(self.dropout(weights), V)))
            """,
        ),
        # a buffer the docstring does not name (persistent: it is in the state_dict) costs nothing
        "scale_kept_in_a_buffer": _mha(
            init=_INIT + 'self.register_buffer("scale", torch.tensor((d_model // num_heads) ** -0.5))\n',
            forward=_replaced(_FORWARD, _SCORES, "scores = Q @ K.transpose(-2, -1) * self.scale"),
        ),
        "functional_dropout": _mha(
            init=_INIT.replace("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
            forward=_FORWARD.replace("self.dropout(self.attention_weights)",
                                     "F.dropout(self.attention_weights, self.p, self.training)"),
        ),
    },
    "mha_param_count": {
        "sum_over_layers": _function(
            COUNT,
            """
            if d_model % num_heads != 0:
                raise ValueError(f"{d_model} % {num_heads} != 0")
            d = d_model // num_heads
            per_head = 3 * (d_model * d + (d if bias else 0))
            output = d_model * d_model + (d_model if bias else 0)
            return num_heads * per_head + output
            """,
        ),
    },
    "answer_notes_scale": {
        "upper_case_with_spaces": right_choice("ch04_multihead_attention", "answer_notes_scale", " {upper} ")},
}

# Mistakes whose failure message must name them (the test compares with PyTorch's layer given
# the same weights, changed so that it makes the mistake: attention_course checks' likely=).
MESSAGES = {
    "MultiHeadAttention": {
        "scale_sqrt_d_model": "divided by sqrt(d_model) instead of sqrt(d_head)",
        "no_scale": "not divided by sqrt(d_head)",
        "scale_by_d_head_not_its_root": "divided by d_head instead of its square root",
        "split_view_B_T_d_h": "head i takes every h-th column",
    },
}
