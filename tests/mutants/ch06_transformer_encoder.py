"""Mutants of chapter 6 (the Transformer encoder).

``WRONG``: plausible mistakes, each must fail at least one graded test cell (all of them
fail a unit test before the training cell runs, except an AddNorm that adds in place, which
breaks the training's backward pass, and the wrong answers to the questions).
``CORRECT``: differently written right answers, each
must pass every test, the training included.
"""

from textwrap import dedent

from mutant_source import class_cell as _class
from mutant_source import replaced as _replaced
from mutant_source import right_choice, wrong_choices


# --- 1. LayerNorm -------------------------------------------------------------------------

_LN_INIT = """
self.eps = eps
self.weight = nn.Parameter(torch.ones(d_model))
self.bias = nn.Parameter(torch.zeros(d_model))
"""

_LN_FORWARD = """
mean = X.mean(dim=-1, keepdim=True)
var = ((X - mean) ** 2).mean(dim=-1, keepdim=True)
return (X - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
"""


def _layer_norm(init: str = _LN_INIT, forward: str = _LN_FORWARD) -> str:
    return _class("LayerNorm", "def __init__(self, d_model, eps=1e-5):", init, {"def forward(self, X):": forward})


def _ln_forward_with(old: str, new: str) -> str:
    return _layer_norm(forward=_replaced(_LN_FORWARD, old, new))


def _ln_init_with(old: str, new: str) -> str:
    return _layer_norm(init=_replaced(_LN_INIT, old, new))


_MEAN = "mean = X.mean(dim=-1, keepdim=True)"
_VAR = "var = ((X - mean) ** 2).mean(dim=-1, keepdim=True)"
_NORMALISED = "return (X - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias"

# --- 2. AddNorm ---------------------------------------------------------------------------

_ADDNORM_INIT = """
self.ln = LayerNorm(d_model)
self.dropout = nn.Dropout(dropout)
"""

_ADDNORM_FORWARD = "return self.ln(X + self.dropout(Y))"


def _addnorm(init: str = _ADDNORM_INIT, forward: str = _ADDNORM_FORWARD) -> str:
    return _class("AddNorm", "def __init__(self, d_model, dropout=0.0):", init, {"def forward(self, X, Y):": forward})


# --- 3. PositionWiseFFN -------------------------------------------------------------------

_FFN_INIT = """
self.dense1 = nn.Linear(d_model, d_ff)
self.dense2 = nn.Linear(d_ff, d_model)
self.dropout = nn.Dropout(dropout)
"""

_FFN_FORWARD = "return self.dense2(self.dropout(torch.relu(self.dense1(X))))"


def _ffn(init: str = _FFN_INIT, forward: str = _FFN_FORWARD) -> str:
    return _class(
        "PositionWiseFFN", "def __init__(self, d_model, d_ff, dropout=0.0):", init, {"def forward(self, X):": forward}
    )


def _ffn_init_with(old: str, new: str) -> str:
    return _ffn(init=_replaced(_FFN_INIT, old, new))


# --- 4. EncoderBlock ----------------------------------------------------------------------

_BLOCK_INIT = """
self.attention = MultiHeadAttention(d_model, num_heads, dropout)
self.addnorm1 = AddNorm(d_model, dropout)
self.ffn = PositionWiseFFN(d_model, d_ff, dropout)
self.addnorm2 = AddNorm(d_model, dropout)
"""

_BLOCK_FORWARD = """
Y = self.addnorm1(X, self.attention(X, X, X, src_mask))
return self.addnorm2(Y, self.ffn(Y))
"""


def _block(init: str = _BLOCK_INIT, forward: str = _BLOCK_FORWARD) -> str:
    return _class(
        "EncoderBlock",
        "def __init__(self, d_model, num_heads, d_ff, dropout=0.0):",
        init,
        {"def forward(self, X, src_mask=None):": forward},
    )


def _block_forward_with(old: str, new: str) -> str:
    return _block(forward=_replaced(_BLOCK_FORWARD, old, new))


def _block_init_with(old: str, new: str) -> str:
    return _block(init=_replaced(_BLOCK_INIT, old, new))


_ATTEND = "Y = self.addnorm1(X, self.attention(X, X, X, src_mask))"
_FEED = "return self.addnorm2(Y, self.ffn(Y))"

# --- 5. TransformerEncoder ----------------------------------------------------------------

_ENCODER_INIT = """
self.d_model = d_model
self.embedding = nn.Embedding(vocab_size, d_model)
self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
self.blocks = nn.ModuleList([EncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
"""

_ENCODER_FORWARD = """
X = self.pos_encoding(self.embedding(src) * math.sqrt(self.d_model))
mask = None if src_mask is None else src_mask[:, None, :]
for block in self.blocks:
    X = block(X, mask)
return X
"""


def _encoder(init: str = _ENCODER_INIT, forward: str = _ENCODER_FORWARD) -> str:
    return _class(
        "TransformerEncoder",
        "def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, dropout=0.0, max_len=512):",
        init,
        {"def forward(self, src, src_mask=None):": forward},
    )


def _encoder_forward_with(old: str, new: str) -> str:
    return _encoder(forward=_replaced(_ENCODER_FORWARD, old, new))


def _encoder_init_with(old: str, new: str) -> str:
    return _encoder(init=_replaced(_ENCODER_INIT, old, new))


_EMBED = "X = self.pos_encoding(self.embedding(src) * math.sqrt(self.d_model))"
_MASK = "mask = None if src_mask is None else src_mask[:, None, :]"
_BLOCKS = "nn.ModuleList([EncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])"
_LOOP = "for block in self.blocks:\n    X = block(X, mask)\nreturn X"

WRONG = {
    "LayerNorm": {
        "unbiased_variance": _ln_forward_with(_VAR, "var = X.var(dim=-1, keepdim=True)"),
        "unbiased_std_plus_eps": _layer_norm(forward="""
            mean = X.mean(dim=-1, keepdim=True)
            return (X - mean) / (X.std(dim=-1, keepdim=True) + self.eps) * self.weight + self.bias
            """),
        "eps_outside_the_square_root": _ln_forward_with(
            "torch.sqrt(var + self.eps)", "(torch.sqrt(var) + self.eps)"
        ),
        "no_eps": _ln_forward_with("torch.sqrt(var + self.eps)", "torch.sqrt(var)"),
        "eps_hard_coded": _ln_forward_with("torch.sqrt(var + self.eps)", "torch.sqrt(var + 1e-5)"),
        "divides_by_the_variance": _ln_forward_with("torch.sqrt(var + self.eps)", "(var + self.eps)"),
        "variance_not_centred": _ln_forward_with(_VAR, "var = (X ** 2).mean(dim=-1, keepdim=True)"),
        "variance_without_keepdim": _ln_forward_with(_VAR, "var = X.var(dim=-1, unbiased=False)"),
        "normalises_over_the_batch_axis": _layer_norm(
            forward=_LN_FORWARD.replace("dim=-1", "dim=0")
        ),
        "normalises_over_the_last_two_axes": _layer_norm(
            forward=_LN_FORWARD.replace("dim=-1", "dim=(-2, -1)")
        ),
        "weight_and_bias_unused": _ln_forward_with(_NORMALISED, "return (X - mean) / torch.sqrt(var + self.eps)"),
        "weight_and_bias_swapped": _ln_forward_with(
            _NORMALISED, "return (X - mean) / torch.sqrt(var + self.eps) * self.bias + self.weight"
        ),
        "scale_and_shift_before_normalising": _layer_norm(forward="""
            X = X * self.weight + self.bias
            mean = X.mean(dim=-1, keepdim=True)
            var = ((X - mean) ** 2).mean(dim=-1, keepdim=True)
            return (X - mean) / torch.sqrt(var + self.eps)
            """),
        "weight_initialised_to_zeros": _ln_init_with("torch.ones(d_model)", "torch.zeros(d_model)"),
        "weight_initialised_at_random": _ln_init_with("torch.ones(d_model)", "torch.randn(d_model)"),
        "parameters_as_plain_tensors": _layer_norm(init="""
            self.eps = eps
            self.weight = torch.ones(d_model)
            self.bias = torch.zeros(d_model)
            """),
        "parameters_as_buffers": _layer_norm(init="""
            self.eps = eps
            self.register_buffer("weight", torch.ones(d_model))
            self.register_buffer("bias", torch.zeros(d_model))
            """),
        "parameters_named_gamma_and_beta": _layer_norm(
            init=_LN_INIT.replace("self.weight", "self.gamma").replace("self.bias", "self.beta"),
            forward=_LN_FORWARD.replace("self.weight", "self.gamma").replace("self.bias", "self.beta"),
        ),
        "parameters_of_shape_1_by_d": _layer_norm(init=_LN_INIT.replace("(d_model)", "(1, d_model)")),
        # LayerNorm(d_model) with the default eps is in every AddNorm: the float64 test of AddNorm sees it
        "default_eps_changed": _layer_norm().replace("eps=1e-5", "eps=1e-6"),
        "computes_in_float32": _layer_norm(forward="X = X.float()\n" + dedent(_LN_FORWARD).lstrip("\n")),
    },
    "AddNorm": {
        "pre_norm_on_Y": _addnorm(forward="return X + self.dropout(self.ln(Y))"),
        "no_residual": _addnorm(forward="return self.ln(self.dropout(Y))"),
        "no_norm": _addnorm(forward="return X + self.dropout(Y)"),
        "norm_of_X_then_add": _addnorm(forward="return self.ln(X) + self.dropout(Y)"),
        "norm_weights_unused": _addnorm(forward="return F.layer_norm(X + self.dropout(Y), X.shape[-1:])"),
        "dropout_on_the_sum": _addnorm(forward="return self.ln(self.dropout(X + Y))"),
        "dropout_on_the_output": _addnorm(forward="return self.dropout(self.ln(X + Y))"),
        "dropout_on_X": _addnorm(forward="return self.ln(self.dropout(X) + Y)"),
        "dropout_never_applied": _addnorm(forward="return self.ln(X + Y)"),
        "dropout_also_in_eval_mode": _addnorm(
            forward="return self.ln(X + F.dropout(Y, self.dropout.p, training=True))"
        ),
        # the tests see the learner's X unchanged (it is a copy in the judge), but in the encoder the
        # in-place sum overwrites a tensor that the backward pass needs, and the training stops
        "adds_in_place": _addnorm(forward="X += self.dropout(Y)\nreturn self.ln(X)"),
        # drops entries of Y in training mode only, but without nn.Dropout's 1 / (1 - p) on the kept ones
        "dropout_without_rescaling": _addnorm(
            forward="return self.ln(X + (Y * (torch.rand_like(Y) >= self.dropout.p) if self.training else Y))"
        ),
        "dropout_passed_as_eps": _addnorm(init=_ADDNORM_INIT.replace("LayerNorm(d_model)", "LayerNorm(d_model, dropout)")),
        "torch_layer_norm_named_norm": _addnorm(
            init=_ADDNORM_INIT.replace("self.ln = LayerNorm(d_model)", "self.norm = nn.LayerNorm(d_model)"),
            forward="return self.norm(X + self.dropout(Y))",
        ),
        "norm_named_layer_norm": _addnorm(
            init=_ADDNORM_INIT.replace("self.ln =", "self.layer_norm ="),
            forward="return self.layer_norm(X + self.dropout(Y))",
        ),
    },
    "PositionWiseFFN": {
        "no_relu": _ffn(forward="return self.dense2(self.dropout(self.dense1(X)))"),
        "gelu": _ffn(forward="return self.dense2(self.dropout(F.gelu(self.dense1(X))))"),
        "tanh": _ffn(forward="return self.dense2(self.dropout(torch.tanh(self.dense1(X))))"),
        "leaky_relu": _ffn(forward="return self.dense2(self.dropout(F.leaky_relu(self.dense1(X))))"),
        "relu_after_dense2_too": _ffn(forward="return torch.relu(self.dense2(self.dropout(torch.relu(self.dense1(X)))))"),
        "dropout_on_the_output": _ffn(forward="return self.dropout(self.dense2(torch.relu(self.dense1(X))))"),
        "dropout_on_the_input": _ffn(forward="return self.dense2(torch.relu(self.dense1(self.dropout(X))))"),
        "dropout_never_applied": _ffn(forward="return self.dense2(torch.relu(self.dense1(X)))"),
        "dropout_also_in_eval_mode": _ffn(
            forward="return self.dense2(F.dropout(torch.relu(self.dense1(X)), self.dropout.p, training=True))"
        ),
        "dropout_probability_hard_coded": _ffn_init_with("nn.Dropout(dropout)", "nn.Dropout(0.1)"),
        # the test of PositionWiseFFN cannot see it; the test of EncoderBlock's layers reads ffn.dropout.p
        "dropout_named_drop": _ffn(
            init=_FFN_INIT.replace("self.dropout =", "self.drop ="),
            forward="return self.dense2(self.drop(torch.relu(self.dense1(X))))",
        ),
        "hidden_width_d_model": _ffn_init_with(
            "nn.Linear(d_model, d_ff)\nself.dense2 = nn.Linear(d_ff, d_model)",
            "nn.Linear(d_model, d_model)\nself.dense2 = nn.Linear(d_model, d_model)",
        ),
        "hidden_width_4_d_model": _ffn_init_with(
            "nn.Linear(d_model, d_ff)\nself.dense2 = nn.Linear(d_ff, d_model)",
            "nn.Linear(d_model, 4 * d_model)\nself.dense2 = nn.Linear(4 * d_model, d_model)",
        ),
        "no_biases": _ffn(init=_FFN_INIT.replace(", d_ff)", ", d_ff, bias=False)").replace(", d_model)", ", d_model, bias=False)")),
    },
    "EncoderBlock": {
        "pre_norm": _block(forward="""
            h = self.addnorm1.ln(X)
            X = X + self.addnorm1.dropout(self.attention(h, h, h, src_mask))
            return X + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
            """),
        "ffn_reads_the_block_input": _block_forward_with(_FEED, "return self.addnorm2(Y, self.ffn(X))"),
        "second_residual_from_the_block_input": _block_forward_with(_FEED, "return self.addnorm2(X, self.ffn(Y))"),
        "attention_without_residual": _block_forward_with(
            _ATTEND, "Y = self.addnorm1(torch.zeros_like(X), self.attention(X, X, X, src_mask))"
        ),
        "ffn_without_residual": _block_forward_with(_FEED, "return self.addnorm2.ln(self.ffn(Y))"),
        "ffn_before_attention": _block(forward="""
            Y = self.addnorm1(X, self.ffn(X))
            return self.addnorm2(Y, self.attention(Y, Y, Y, src_mask))
            """),
        "addnorm1_used_twice": _block_forward_with(_FEED, "return self.addnorm1(Y, self.ffn(Y))"),
        "one_addnorm_object_for_both": _block_init_with(
            "self.addnorm2 = AddNorm(d_model, dropout)", "self.addnorm2 = self.addnorm1"
        ),
        "mask_ignored": _block_forward_with(_ATTEND, "Y = self.addnorm1(X, self.attention(X, X, X))"),
        "mask_inverted": _block_forward_with(
            _ATTEND,
            "mask = None if src_mask is None else ~src_mask\nY = self.addnorm1(X, self.attention(X, X, X, mask))",
        ),
        "mask_transposed": _block_forward_with(
            _ATTEND,
            "mask = None if src_mask is None else src_mask.transpose(-2, -1)\n"
            "Y = self.addnorm1(X, self.attention(X, X, X, mask))",
        ),
        # right for a (B, 1, T) mask, which the attention would give a head axis anyway;
        # wrong for an (n, m) or a per-head (B, h, T, T) mask
        "mask_given_a_head_axis": _block_forward_with(
            _ATTEND,
            "mask = None if src_mask is None else src_mask.unsqueeze(1)\n"
            "Y = self.addnorm1(X, self.attention(X, X, X, mask))",
        ),
        "single_head": _block_init_with(
            "MultiHeadAttention(d_model, num_heads, dropout)", "MultiHeadAttention(d_model, 1, dropout)"
        ),
        "dropout_not_passed_on": _block(init=_BLOCK_INIT.replace(", dropout)", ")")),
        "attention_without_dropout": _block_init_with(
            "MultiHeadAttention(d_model, num_heads, dropout)", "MultiHeadAttention(d_model, num_heads)"
        ),
        "d_ff_ignored": _block_init_with(
            "PositionWiseFFN(d_model, d_ff, dropout)", "PositionWiseFFN(d_model, 4 * d_model, dropout)"
        ),
        # the three below agree with the right block in eval mode: only dropout tells them apart
        "addnorm_arguments_swapped": _block(forward="""
            Y = self.addnorm1(self.attention(X, X, X, src_mask), X)
            return self.addnorm2(self.ffn(Y), Y)
            """),
        "sub_layer_outputs_dropped_twice": _block(
            init=_BLOCK_INIT + "self.dropout = nn.Dropout(dropout)\n",
            forward="""
            Y = self.addnorm1(X, self.dropout(self.attention(X, X, X, src_mask)))
            return self.addnorm2(Y, self.dropout(self.ffn(Y)))
            """,
        ),
        # dropout in the wrong place on the FFN branch: only a seeded comparison in training mode tells
        # (the layers are built right, so test_EncoderBlock_layers passes them)
        "ffn_branch_output_not_dropped": _block_forward_with(_FEED, "return self.addnorm2.ln(Y + self.ffn(Y))"),
        "ffn_hidden_layer_not_dropped": _block_forward_with(
            _FEED, "return self.addnorm2(Y, self.ffn.dense2(torch.relu(self.ffn.dense1(Y))))"
        ),
        "ffn_dropout_on_its_output_instead_of_its_hidden_layer": _block_forward_with(
            _FEED, "return self.addnorm2(Y, self.ffn.dropout(self.ffn.dense2(torch.relu(self.ffn.dense1(Y)))))"
        ),
        "addnorm_dropout_bypassed": _block(forward="""
            Y = self.addnorm1.ln(X + self.attention(X, X, X, src_mask))
            return self.addnorm2.ln(Y + self.ffn(Y))
            """),
    },
    "TransformerEncoder": {
        "embeddings_not_scaled": _encoder_forward_with(_EMBED, "X = self.pos_encoding(self.embedding(src))"),
        "scaled_by_d_model": _encoder_forward_with(_EMBED, "X = self.pos_encoding(self.embedding(src) * self.d_model)"),
        "scaled_after_the_positions": _encoder_forward_with(
            _EMBED, "X = self.pos_encoding(self.embedding(src)) * math.sqrt(self.d_model)"
        ),
        "positions_not_added": _encoder_forward_with(_EMBED, "X = self.embedding(src) * math.sqrt(self.d_model)"),
        "own_positional_table": _encoder(
            init=_replaced(
                _ENCODER_INIT,
                "self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)",
                'self.register_buffer("P", sinusoidal_positional_encoding(max_len, d_model))\n'
                "self.dropout = nn.Dropout(dropout)",
            ),
            forward=_replaced(
                _ENCODER_FORWARD,
                _EMBED,
                "X = self.dropout(self.embedding(src) * math.sqrt(self.d_model) + self.P[: src.shape[1]])",
            ),
        ),
        "one_block_shared": _encoder_init_with(
            _BLOCKS, "nn.ModuleList([EncoderBlock(d_model, num_heads, d_ff, dropout)] * num_layers)"
        ),
        "blocks_in_a_python_list": _encoder_init_with(
            _BLOCKS, "[EncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]"
        ),
        "padding_mask_passed_unconverted": _encoder_forward_with(_MASK, "mask = src_mask"),
        "padding_mask_on_the_query_axis": _encoder_forward_with(
            _MASK, "mask = None if src_mask is None else src_mask[:, :, None]"
        ),
        "padded_queries_masked_too": _encoder_forward_with(
            _MASK, "mask = None if src_mask is None else src_mask[:, None, :] & src_mask[:, :, None]"
        ),
        "padding_mask_ignored": _encoder_forward_with(_MASK, "mask = None"),
        "padding_mask_inverted": _encoder_forward_with(
            _MASK, "mask = None if src_mask is None else ~src_mask[:, None, :]"
        ),
        "blocks_in_reverse_order": _encoder_forward_with("for block in self.blocks:", "for block in self.blocks[::-1]:"),
        "only_the_last_block": _encoder_forward_with(_LOOP, "return self.blocks[-1](X, mask)"),
        "blocks_not_chained": _encoder_forward_with(
            _LOOP, "for block in self.blocks:\n    out = block(X, mask)\nreturn out"
        ),
        "max_len_not_passed_on": _encoder_init_with(
            "PositionalEncoding(d_model, max_len, dropout)", "PositionalEncoding(d_model, dropout=dropout)"
        ),
        "dropout_not_passed_to_the_positions": _encoder_init_with(
            "PositionalEncoding(d_model, max_len, dropout)", "PositionalEncoding(d_model, max_len)"
        ),
        "dropout_not_passed_to_the_blocks": _encoder_init_with(
            "EncoderBlock(d_model, num_heads, d_ff, dropout)", "EncoderBlock(d_model, num_heads, d_ff)"
        ),
        "embeddings_dropped_twice": _encoder(
            init=_ENCODER_INIT + "self.dropout = nn.Dropout(dropout)\n",
            forward=_ENCODER_FORWARD.replace(
                _EMBED, "X = self.pos_encoding(self.dropout(self.embedding(src) * math.sqrt(self.d_model)))"
            ),
        ),
        "dropout_between_the_blocks": _encoder(
            init=_ENCODER_INIT + "self.dropout = nn.Dropout(dropout)\n",
            forward=_replaced(_ENCODER_FORWARD, "    X = block(X, mask)", "    X = self.dropout(block(X, mask))"),
        ),
        "dropout_on_the_output": _encoder(
            init=_ENCODER_INIT + "self.dropout = nn.Dropout(dropout)\n",
            forward=_replaced(_ENCODER_FORWARD, "return X", "return self.dropout(X)"),
        ),
    },
    **{name: wrong_choices("ch06_transformer_encoder", name)
       for name in ("answer_batchnorm", "answer_path", "answer_post_norm")},
}

CORRECT = {
    "LayerNorm": {
        "biased_var_and_rsqrt": _layer_norm(forward="""
            var = torch.var(X, dim=-1, keepdim=True, unbiased=False)
            return (X - X.mean(-1, keepdim=True)) * torch.rsqrt(var + self.eps) * self.weight + self.bias
            """),
        "explicit_sums_and_addcmul": _layer_norm(
            init="""
            self.weight = nn.Parameter(torch.ones(d_model))
            self.bias = nn.Parameter(torch.zeros(d_model))
            self.eps = float(eps)
            """,
            forward="""
            D = X.shape[-1]
            centred = X - X.sum(dim=-1, keepdim=True) / D
            var = (centred * centred).sum(dim=-1, keepdim=True) / D
            return torch.addcmul(self.bias, centred / (var + self.eps).sqrt(), self.weight)
            """,
        ),
        # a buffer the docstring does not name (persistent: it is in the state_dict) costs nothing
        "eps_kept_in_a_buffer": _layer_norm(
            init=_LN_INIT.replace("self.eps = eps", 'self.register_buffer("eps", torch.tensor(float(eps)))'),
        ),
        "var_mean_correction_0_and_einsum": _layer_norm(forward="""
            var, mean = torch.var_mean(X, dim=-1, keepdim=True, correction=0)
            normalised = (X - mean) / torch.sqrt(var + self.eps)
            return torch.einsum("...d,d->...d", normalised, self.weight) + self.bias
            """),
    },
    "AddNorm": {
        "torch_layer_norm_called_ln": _addnorm(init="""
            self.dropout = nn.Dropout(p=dropout)
            self.ln = nn.LayerNorm(d_model)
            """),
        "functional_dropout_and_names": _addnorm(
            init="""
            self.p = dropout
            self.ln = LayerNorm(d_model)
            self.dropout = nn.Dropout(dropout)
            """,
            forward="""
            sublayer_output = F.dropout(Y, p=self.dropout.p, training=self.training)
            residual = X
            return self.ln(residual + sublayer_output)
            """,
        ),
    },
    "PositionWiseFFN": {
        "functional_relu_with_names": _ffn(forward="""
            hidden = F.relu(self.dense1(X))
            hidden = self.dropout(hidden)
            return self.dense2(hidden)
            """),
        "clamp": _ffn(forward="return self.dense2(self.dropout(self.dense1(X).clamp(min=0)))"),
        # dropout scales by 1 / (1 - p) > 0 and keeps zeros: it commutes with the ReLU
        "dropout_before_relu_is_the_same": _ffn(forward="return self.dense2(torch.relu(self.dropout(self.dense1(X))))"),
    },
    "EncoderBlock": {
        "intermediate_names": _block(
            init="""
            self.ffn = PositionWiseFFN(d_model, d_ff, dropout=dropout)
            self.attention = MultiHeadAttention(d_model, num_heads, dropout=dropout)
            self.addnorm1 = AddNorm(d_model, dropout=dropout)
            self.addnorm2 = AddNorm(d_model, dropout=dropout)
            """,
            forward="""
            attended = self.attention(X, X, X, mask=src_mask)
            Y = self.addnorm1(X, attended)
            fed_forward = self.ffn(Y)
            return self.addnorm2(Y, fed_forward)
            """,
        ),
        "keyword_arguments_one_line": _block(
            forward="""
            Y = self.addnorm1(X=X, Y=self.attention(queries=X, keys=X, values=X, mask=src_mask))
            return self.addnorm2(X=Y, Y=self.ffn(Y))
            """
        ),
    },
    "TransformerEncoder": {
        "append_to_module_list_and_unsqueeze": _encoder(
            init="""
            self.scale = math.sqrt(d_model)
            self.embedding = nn.Embedding(vocab_size, d_model)
            self.pos_encoding = PositionalEncoding(d_model, max_len=max_len, dropout=dropout)
            self.blocks = nn.ModuleList()
            for _ in range(num_layers):
                self.blocks.append(EncoderBlock(d_model, num_heads, d_ff, dropout))
            """,
            forward="""
            X = self.embedding(src) * self.scale
            X = self.pos_encoding(X)
            mask = src_mask.unsqueeze(1) if src_mask is not None else None
            for block in self.blocks:
                X = block(X, src_mask=mask)
            return X
            """,
        ),
        "view_and_power": _encoder(
            init=_replaced(
                _ENCODER_INIT, _BLOCKS,
                "nn.ModuleList(EncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))",
            ),
            forward="""
            B, S = src.shape
            X = self.pos_encoding(self.embedding(src) * self.d_model ** 0.5)
            mask = src_mask.view(B, 1, S) if src_mask is not None else None
            for i in range(len(self.blocks)):
                X = self.blocks[i](X, mask)
            return X
            """,
        ),
        # (B, 1, 1, S) broadcasts against the (B, h, S, S) scores just as well
        "four_d_mask": _encoder_forward_with(_MASK, "mask = None if src_mask is None else src_mask[:, None, None, :]"),
    },
    "answer_batchnorm": {"upper_case": right_choice("ch06_transformer_encoder", "answer_batchnorm", "{upper}")},
    "answer_path": {"padded": right_choice("ch06_transformer_encoder", "answer_path", " {lower} ")},
    "answer_post_norm": {
        "upper_case_with_spaces": right_choice("ch06_transformer_encoder", "answer_post_norm", " {upper}")},
}


# Mistakes whose failure message must name them (check_close's likely=, computed by the test with
# the same weights).
MESSAGES = {
    "LayerNorm": {"unbiased_variance": "divides by D - 1", "eps_outside_the_square_root": "outside the square root",
                  "no_eps": "eps is left out"},
    "AddNorm": {"dropout_on_the_sum": "dropout acts on X + Y instead of on Y alone"},
    "EncoderBlock": {"pre_norm": "pre-norm"},
}
