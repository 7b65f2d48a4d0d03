"""Mutants of chapter 7 (the Transformer decoder).

``WRONG``: plausible mistakes, each must fail at least one graded test cell (all but one
fail a fast unit test before the training cell runs).
``CORRECT``: differently written right answers, each must pass every test, the
training included.
``WRONG_IN_KERNEL``: a mistake that only shows inside the learner's own process.
"""

from textwrap import dedent

from mutant_source import class_cell as _class
from mutant_source import function_cell as _function
from mutant_source import replaced as _replaced
from mutant_source import right_choice, wrong_choices


CAUSAL = "def causal_mask(size, device=None):"
SHIFT = "def teacher_forcing_pair(tgt):"
GREEDY = "def greedy_decode(model, src, src_mask, bos_id, eos_id, pad_id, max_len):"
NOAM = "def noam_lr(step, d_model, warmup):"


_SHIFT_CHECK = """
if tgt.dim() == 0 or tgt.shape[-1] < 2:
    raise ValueError(f"a target sequence needs at least 2 tokens, got shape {tuple(tgt.shape)}")
"""


def _shift(body: str, check: str = _SHIFT_CHECK) -> str:
    return _function(SHIFT, dedent(check) + dedent(body).lstrip("\n"))


_BLOCK_SIGNATURE = "def __init__(self, d_model, num_heads, d_ff, dropout=0.0):"

_BLOCK_INIT = """
self.self_attention = MultiHeadAttention(d_model, num_heads, dropout)
self.addnorm1 = AddNorm(d_model, dropout)
self.cross_attention = MultiHeadAttention(d_model, num_heads, dropout)
self.addnorm2 = AddNorm(d_model, dropout)
self.ffn = PositionWiseFFN(d_model, d_ff, dropout)
self.addnorm3 = AddNorm(d_model, dropout)
"""

_BLOCK_FORWARD = """
Y = self.addnorm1(X, self.self_attention(X, X, X, tgt_mask))
Z = self.addnorm2(Y, self.cross_attention(Y, memory, memory, memory_mask))
return self.addnorm3(Z, self.ffn(Z))
"""


def _block(init: str = _BLOCK_INIT, forward: str = _BLOCK_FORWARD) -> str:
    return _class("DecoderBlock", _BLOCK_SIGNATURE, init, {"def forward(self, X, memory, tgt_mask=None, memory_mask=None):": forward})


def _block_forward_with(old: str, new: str) -> str:
    return _block(forward=_replaced(_BLOCK_FORWARD, old, new))


def _block_init_with(old: str, new: str) -> str:
    return _block(init=_replaced(_BLOCK_INIT, old, new))


_DECODER_SIGNATURE = "def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, dropout=0.0, max_len=512):"

_DECODER_INIT = """
self.d_model = d_model
self.embedding = nn.Embedding(vocab_size, d_model)
self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
self.blocks = nn.ModuleList([DecoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
self.dense = nn.Linear(d_model, vocab_size)
"""

_DECODER_FORWARD = """
X = self.pos_encoding(self.embedding(tgt_in) * math.sqrt(self.d_model))
tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device)
memory_mask = None if src_mask is None else src_mask[:, None, :]
for block in self.blocks:
    X = block(X, memory, tgt_mask, memory_mask)
return self.dense(X)
"""


def _decoder(init: str = _DECODER_INIT, forward: str = _DECODER_FORWARD) -> str:
    return _class("TransformerDecoder", _DECODER_SIGNATURE, init, {"def forward(self, tgt_in, memory, src_mask=None):": forward})


def _decoder_forward_with(old: str, new: str) -> str:
    return _decoder(forward=_replaced(_DECODER_FORWARD, old, new))


def _decoder_init_with(old: str, new: str) -> str:
    return _decoder(init=_replaced(_DECODER_INIT, old, new))


_TRANSFORMER_SIGNATURE = (
    "def __init__(self, src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_layers, dropout=0.0,\n"
    "             max_len=512):"
)

_TRANSFORMER_INIT = """
self.encoder = TransformerEncoder(src_vocab_size, d_model, num_heads, d_ff, num_layers, dropout, max_len)
self.decoder = TransformerDecoder(tgt_vocab_size, d_model, num_heads, d_ff, num_layers, dropout, max_len)
"""

_ENCODE = "def encode(self, src, src_mask=None):"
_DECODE = "def decode(self, tgt_in, memory, src_mask=None):"
_FORWARD = "def forward(self, src, tgt_in, src_mask=None):"

_TRANSFORMER_METHODS = {
    _ENCODE: "return self.encoder(src, src_mask)",
    _DECODE: "return self.decoder(tgt_in, memory, src_mask)",
    _FORWARD: "return self.decode(tgt_in, self.encode(src, src_mask), src_mask)",
}


def _transformer(init: str = _TRANSFORMER_INIT, **methods: str) -> str:
    """The reference Transformer with some methods' bodies replaced (``encode=``, ``decode=``, ``forward=``)."""
    bodies = dict(_TRANSFORMER_METHODS)
    for name, body in methods.items():
        (signature,) = [s for s in bodies if s.startswith(f"def {name}(")]
        bodies[signature] = body
    return _class("Transformer", _TRANSFORMER_SIGNATURE, init, bodies)


_GREEDY_BODY = """
model.eval()
with torch.no_grad():
    memory = model.encode(src, src_mask)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(dim=-1)
        next_token = next_token.masked_fill(done, pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]
"""


def _greedy_with(old: str, new: str) -> str:
    return _function(GREEDY, _replaced(_GREEDY_BODY, old, new))


_NOAM_CHECK = """
if step < 1:
    raise ValueError(f"steps count from 1, got {step}")
"""


def _noam(body: str, check: str = _NOAM_CHECK) -> str:
    return _function(NOAM, dedent(check) + dedent(body).lstrip("\n"))


_NOAM_RETURN = "return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)\n"

_SELF = "Y = self.addnorm1(X, self.self_attention(X, X, X, tgt_mask))"
_CROSS = "Z = self.addnorm2(Y, self.cross_attention(Y, memory, memory, memory_mask))"
_FFN = "return self.addnorm3(Z, self.ffn(Z))"
_EMBED = "X = self.pos_encoding(self.embedding(tgt_in) * math.sqrt(self.d_model))"
_TGT_MASK = "tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device)"
_MEMORY_MASK = "memory_mask = None if src_mask is None else src_mask[:, None, :]"
_NEXT = "next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(dim=-1)"

WRONG = {
    "causal_mask": {
        "upper_triangle": _function(CAUSAL, "return torch.ones(size, size, dtype=torch.bool, device=device).triu()"),
        "diagonal_excluded": _function(
            CAUSAL, "return torch.ones(size, size, dtype=torch.bool, device=device).tril(diagonal=-1)"
        ),
        # torch.nn's convention, True = may NOT attend
        "true_marks_the_future": _function(
            CAUSAL, "return torch.ones(size, size, dtype=torch.bool, device=device).triu(diagonal=1)"
        ),
        "additive_mask_of_the_notes": _function(
            CAUSAL,
            """
            future = torch.ones(size, size, dtype=torch.bool, device=device).triu(diagonal=1)
            return torch.zeros(size, size, device=device).masked_fill(future, float("-inf"))
            """,
        ),
        "float_ones_not_cast": _function(CAUSAL, "return torch.tril(torch.ones(size, size, device=device))"),
        "uint8_mask": _function(CAUSAL, "return torch.ones(size, size, dtype=torch.uint8, device=device).tril()"),
        "keys_compared_the_wrong_way": _function(
            CAUSAL,
            """
            positions = torch.arange(size, device=device)
            return positions[:, None] <= positions[None, :]
            """,
        ),
        "numpy_array": _function(
            CAUSAL,
            """
            import numpy as np
            return np.tril(np.ones((size, size), dtype=bool))
            """,
        ),
        "stacked_rows_fail_for_size_0": _function(
            CAUSAL,
            """
            keys = torch.arange(size, device=device)
            return torch.stack([keys <= i for i in range(size)])
            """,
        ),
    },
    "teacher_forcing_pair": {
        "outputs_swapped": _shift("return tgt[..., 1:], tgt[..., :-1]\n"),
        "labels_not_shifted": _shift("return tgt[..., :-1], tgt[..., :-1]\n"),
        "input_shifted_left_too": _shift("return tgt[..., 1:], tgt[..., 1:]\n"),
        "labels_drop_eos": _shift("return tgt[..., :-1], tgt[..., 1:-1]\n"),
        "shifted_by_two": _shift("return tgt[..., :-2], tgt[..., 2:]\n"),
        "time_is_axis_1": _shift("return tgt[:, :-1], tgt[:, 1:]\n"),
        "rolled_not_cut": _shift("return tgt, tgt.roll(-1, dims=-1)\n"),
        "length_of_axis_1_checked": _shift(
            "return tgt[..., :-1], tgt[..., 1:]\n",
            check="""
            if tgt.shape[1] < 2:
                raise ValueError(f"a target sequence needs at least 2 tokens, got shape {tuple(tgt.shape)}")
            """,
        ),
        "batch_size_checked": _shift(
            "return tgt[..., :-1], tgt[..., 1:]\n",
            check="""
            if len(tgt) < 2:
                raise ValueError(f"a target sequence needs at least 2 tokens, got shape {tuple(tgt.shape)}")
            """,
        ),
        "no_length_check": _shift("return tgt[..., :-1], tgt[..., 1:]\n", check=""),
        "assert_instead_of_value_error": _shift(
            "return tgt[..., :-1], tgt[..., 1:]\n",
            check='assert tgt.shape[-1] >= 2, f"shape {tuple(tgt.shape)}"\n',
        ),
        "message_without_shape": _shift(
            "return tgt[..., :-1], tgt[..., 1:]\n",
            check="""
            if tgt.shape[-1] < 2:
                raise ValueError("a target sequence needs at least <bos> and one more token")
            """,
        ),
    },
    "DecoderBlock": {
        "cross_attention_over_the_target": _block_forward_with(
            _CROSS, "Z = self.addnorm2(Y, self.cross_attention(Y, Y, Y, memory_mask))"
        ),
        "queries_from_memory": _block_forward_with(
            _CROSS, "Z = self.addnorm2(Y, self.cross_attention(memory, Y, Y, memory_mask))"
        ),
        "cross_attention_reads_the_block_input": _block_forward_with(
            _CROSS, "Z = self.addnorm2(Y, self.cross_attention(X, memory, memory, memory_mask))"
        ),
        "self_attention_over_memory": _block_forward_with(
            _SELF, "Y = self.addnorm1(X, self.self_attention(X, memory, memory))"
        ),
        "tgt_mask_ignored": _block_forward_with(_SELF, "Y = self.addnorm1(X, self.self_attention(X, X, X))"),
        "memory_mask_ignored": _block_forward_with(
            _CROSS, "Z = self.addnorm2(Y, self.cross_attention(Y, memory, memory))"
        ),
        "always_causal_whatever_tgt_mask": _block_forward_with(
            _SELF,
            "causal = torch.ones(X.shape[1], X.shape[1], dtype=torch.bool, device=X.device).tril()\n"
            "Y = self.addnorm1(X, self.self_attention(X, X, X, causal))",
        ),
        "masks_swapped": _block_forward_with(
            _SELF + "\n" + _CROSS,
            "Y = self.addnorm1(X, self.self_attention(X, X, X, memory_mask))\n"
            "Z = self.addnorm2(Y, self.cross_attention(Y, memory, memory, tgt_mask))",
        ),
        "pre_norm": _block(forward="""
            h = self.addnorm1.ln(X)
            X = X + self.addnorm1.dropout(self.self_attention(h, h, h, tgt_mask))
            h = self.addnorm2.ln(X)
            X = X + self.addnorm2.dropout(self.cross_attention(h, memory, memory, memory_mask))
            return X + self.addnorm3.dropout(self.ffn(self.addnorm3.ln(X)))
            """),
        "ffn_before_cross_attention": _block(forward="""
            Y = self.addnorm1(X, self.self_attention(X, X, X, tgt_mask))
            Z = self.addnorm2(Y, self.ffn(Y))
            return self.addnorm3(Z, self.cross_attention(Z, memory, memory, memory_mask))
            """),
        "residual_from_the_block_input": _block_forward_with(
            _CROSS, "Z = self.addnorm2(X, self.cross_attention(Y, memory, memory, memory_mask))"
        ),
        "ffn_without_residual": _block_forward_with(_FFN, "return self.addnorm3.ln(self.ffn(Z))"),
        "one_addnorm_for_all": _block(
            forward=_BLOCK_FORWARD.replace("addnorm2", "addnorm1").replace("addnorm3", "addnorm1")
        ),
        "one_attention_for_self_and_cross": _block_init_with(
            "self.cross_attention = MultiHeadAttention(d_model, num_heads, dropout)",
            "self.cross_attention = self.self_attention",
        ),
        "attention_without_dropout": _block(init=_BLOCK_INIT.replace(
            "MultiHeadAttention(d_model, num_heads, dropout)", "MultiHeadAttention(d_model, num_heads)"
        )),
        "d_ff_ignored": _block_init_with(
            "PositionWiseFFN(d_model, d_ff, dropout)", "PositionWiseFFN(d_model, 4 * d_model, dropout)"
        ),
        # dropout in the wrong places: only a block in training mode with dropout > 0 shows them
        "sublayer_output_dropped_twice": _block_forward_with(
            _SELF, "Y = self.addnorm1(X, self.addnorm1.dropout(self.self_attention(X, X, X, tgt_mask)))"
        ),
        "sublayer_outputs_not_dropped": _block(forward="""
            Y = self.addnorm1.ln(X + self.self_attention(X, X, X, tgt_mask))
            Z = self.addnorm2.ln(Y + self.cross_attention(Y, memory, memory, memory_mask))
            return self.addnorm3.ln(Z + self.ffn(Z))
            """),
        "residual_path_dropped": _block_forward_with(
            _CROSS, "Z = self.addnorm2.ln(self.addnorm2.dropout(Y + self.cross_attention(Y, memory, memory, memory_mask)))"
        ),
        "memory_dropped_before_cross_attention": _block(
            init=_BLOCK_INIT + "self.dropout = nn.Dropout(dropout)\n",
            forward=_replaced(_BLOCK_FORWARD, _CROSS,
                              "memory = self.dropout(memory)\n" + _CROSS),
        ),
    },
    "TransformerDecoder": {
        "no_causal_mask": _decoder_forward_with(_TGT_MASK, "tgt_mask = None"),
        "causal_mask_transposed": _decoder_forward_with(
            _TGT_MASK, "tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device).T"
        ),
        "causal_mask_of_the_memory_length": _decoder_forward_with(
            _TGT_MASK, "tgt_mask = causal_mask(memory.shape[1], device=tgt_in.device)"
        ),
        "causal_mask_of_the_batch_size": _decoder_forward_with(
            _TGT_MASK, "tgt_mask = causal_mask(tgt_in.shape[0], device=tgt_in.device)"
        ),
        "embeddings_not_scaled": _decoder_forward_with(_EMBED, "X = self.pos_encoding(self.embedding(tgt_in))"),
        "scaled_after_the_positions": _decoder_forward_with(
            _EMBED, "X = self.pos_encoding(self.embedding(tgt_in)) * math.sqrt(self.d_model)"
        ),
        "positions_not_added": _decoder_forward_with(_EMBED, "X = self.embedding(tgt_in) * math.sqrt(self.d_model)"),
        "padding_mask_passed_unconverted": _decoder_forward_with(_MEMORY_MASK, "memory_mask = src_mask"),
        "padding_mask_on_the_query_axis": _decoder_forward_with(
            _MEMORY_MASK, "memory_mask = None if src_mask is None else src_mask[:, :, None]"
        ),
        "source_padding_ignored": _decoder_forward_with(_MEMORY_MASK, "memory_mask = None"),
        "source_padding_inverted": _decoder_forward_with(
            _MEMORY_MASK, "memory_mask = None if src_mask is None else ~src_mask[:, None, :]"
        ),
        "blocks_not_chained": _decoder_forward_with(
            "for block in self.blocks:\n    X = block(X, memory, tgt_mask, memory_mask)\nreturn self.dense(X)",
            "for block in self.blocks:\n    out = block(X, memory, tgt_mask, memory_mask)\nreturn self.dense(out)",
        ),
        "softmax_on_the_output": _decoder_forward_with(
            "return self.dense(X)", "return torch.softmax(self.dense(X), dim=-1)"
        ),
        "one_block_shared": _decoder_init_with(
            "self.blocks = nn.ModuleList([DecoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])",
            "block = DecoderBlock(d_model, num_heads, d_ff, dropout)\nself.blocks = nn.ModuleList([block] * num_layers)",
        ),
        "blocks_in_a_python_list": _decoder_init_with(
            "nn.ModuleList([DecoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])",
            "[DecoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]",
        ),
        "dense_without_bias": _decoder_init_with(
            "nn.Linear(d_model, vocab_size)", "nn.Linear(d_model, vocab_size, bias=False)"
        ),
        "pos_encoding_without_dropout": _decoder_init_with(
            "PositionalEncoding(d_model, max_len, dropout)", "PositionalEncoding(d_model, max_len)"
        ),
        "dropout_between_the_blocks": _decoder(
            init=_DECODER_INIT + "self.dropout = nn.Dropout(dropout)\n",
            forward=_replaced(_DECODER_FORWARD, "    X = block(X, memory, tgt_mask, memory_mask)",
                              "    X = self.dropout(block(X, memory, tgt_mask, memory_mask))"),
        ),
        "dropout_before_dense": _decoder(
            init=_DECODER_INIT + "self.dropout = nn.Dropout(dropout)\n",
            forward=_replaced(_DECODER_FORWARD, "return self.dense(X)", "return self.dense(self.dropout(X))"),
        ),
    },
    "Transformer": {
        "decoder_not_given_the_source_mask": _transformer(
            forward="return self.decode(tgt_in, self.encode(src, src_mask))"
        ),
        "encoder_not_given_the_source_mask": _transformer(
            forward="return self.decode(tgt_in, self.encode(src), src_mask)"
        ),
        "encode_ignores_the_source_mask": _transformer(encode="return self.encoder(src)"),
        "decode_ignores_the_source_mask": _transformer(decode="return self.decoder(tgt_in, memory)"),
        "memory_is_the_source_embeddings": _transformer(
            forward="return self.decode(tgt_in, self.encoder.embedding(src), src_mask)"
        ),
        "decode_encodes_the_target": _transformer(
            decode="return self.decoder(tgt_in, self.encoder(tgt_in), src_mask)"
        ),
        "vocab_sizes_swapped": _transformer(init=_TRANSFORMER_INIT.replace(
            "TransformerEncoder(src_vocab_size", "TransformerEncoder(tgt_vocab_size"
        ).replace("TransformerDecoder(tgt_vocab_size", "TransformerDecoder(src_vocab_size")),
        "decoder_shares_the_encoder_embedding": _transformer(
            init=_TRANSFORMER_INIT + "self.decoder.embedding = self.encoder.embedding\n"
        ),
        "max_len_not_passed_on": _transformer(init=_TRANSFORMER_INIT.replace(", dropout, max_len)", ", dropout)")),
        "dropout_not_passed_on": _transformer(
            init=_TRANSFORMER_INIT.replace(", dropout, max_len)", ", max_len=max_len)")
        ),
        # state kept between calls: right whenever decode follows the encode of the same source
        "decode_uses_the_last_encoded_memory": _transformer(
            encode="self.memory = self.encoder(src, src_mask)\nreturn self.memory",
            decode="return self.decoder(tgt_in, self.memory, src_mask)",
        ),
        "decode_uses_the_last_encoded_mask": _transformer(
            encode="self.src_mask = src_mask\nreturn self.encoder(src, src_mask)",
            decode="return self.decoder(tgt_in, memory, self.src_mask)",
        ),
        # the right logits, but no gradient reaches the encoder: the training cell stops before its
        # first step and says why (train_transformer), so the graded training fails; trained to the
        # end it reached 63 % exact match instead of 99.8 % (the earlier 400-step recipe)
        "memory_computed_without_gradients": _transformer(forward="""
            with torch.no_grad():
                memory = self.encode(src, src_mask)
            return self.decode(tgt_in, memory, src_mask)
            """),
        "memory_detached": _transformer(forward="""
            return self.decode(tgt_in, self.encode(src, src_mask).detach(), src_mask)
            """),
    },
    "greedy_decode": {
        "bos_kept": _greedy_with("return tokens[:, 1:]", "return tokens"),
        "no_pad_after_eos": _greedy_with("        next_token = next_token.masked_fill(done, pad_id)\n", ""),
        "eos_replaced_by_pad": _greedy_with(
            "next_token = next_token.masked_fill(done, pad_id)\n",
            "next_token = next_token.masked_fill(done | (next_token == eos_id), pad_id)\n",
        ),
        "stops_when_the_first_row_ends": _greedy_with("if done.all():", "if done.any():"),
        "stops_when_row_0_ends": _greedy_with("if done.all():", "if done[0]:"),
        "only_the_last_token_fed": _greedy_with(
            _NEXT, "next_token = model.decode(tokens[:, -1:], memory, src_mask)[:, -1].argmax(dim=-1)"
        ),
        "reads_the_first_position": _greedy_with(
            _NEXT, "next_token = model.decode(tokens, memory, src_mask)[:, 0].argmax(dim=-1)"
        ),
        "argmax_over_time": _greedy_with(
            _NEXT, "next_token = model.decode(tokens, memory, src_mask).argmax(dim=1)[:, -1]"
        ),
        "encoder_without_the_source_mask": _greedy_with(
            "memory = model.encode(src, src_mask)", "memory = model.encode(src)"
        ),
        "decoder_without_the_source_mask": _greedy_with(
            _NEXT, "next_token = model.decode(tokens, memory)[:, -1].argmax(dim=-1)"
        ),
        "one_token_too_many": _greedy_with("for _ in range(max_len):", "for _ in range(max_len + 1):"),
        "one_token_too_few": _greedy_with("for _ in range(max_len):", "for _ in range(max_len - 1):"),
        "samples_instead_of_argmax": _greedy_with(
            _NEXT,
            "probabilities = torch.softmax(model.decode(tokens, memory, src_mask)[:, -1], dim=-1)\n"
            "        next_token = torch.multinomial(probabilities, 1)[:, 0]",
        ),
        "no_eval_mode": _greedy_with("model.eval()\n", ""),
        "pad_hard_coded_0": _greedy_with("masked_fill(done, pad_id)", "masked_fill(done, 0)"),
        "eos_hard_coded_2": _greedy_with("(next_token == eos_id)", "(next_token == 2)"),
        "bos_hard_coded_1": _greedy_with("torch.full((src.shape[0], 1), bos_id,", "torch.full((src.shape[0], 1), 1,"),
    },
    "noam_lr": {
        "steps_from_0": _noam(
            """
            step = step + 1
            return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
            """,
            check="""
            if step < 0:
                raise ValueError(f"negative step {step}")
            """,
        ),
        "max_instead_of_min": _noam("return d_model ** -0.5 * max(step ** -0.5, step * warmup ** -1.5)\n"),
        "no_d_model_factor": _noam("return min(step ** -0.5, step * warmup ** -1.5)\n"),
        "times_sqrt_d_model": _noam("return d_model ** 0.5 * min(step ** -0.5, step * warmup ** -1.5)\n"),
        "warmup_to_the_minus_half": _noam("return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -0.5)\n"),
        "linear_term_step_over_warmup": _noam("return d_model ** -0.5 * min(step ** -0.5, step / warmup)\n"),
        "no_value_error": _noam(_NOAM_RETURN, check=""),
        "step_clamped_to_1": _noam("step = max(step, 1)\n" + _NOAM_RETURN, check=""),
        "returns_a_tensor": _noam(
            "return torch.tensor(d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5), dtype=torch.float64)\n"
        ),
    },
}

CORRECT = {
    "causal_mask": {
        "arange_comparison": _function(
            CAUSAL,
            """
            positions = torch.arange(size, device=device)
            return positions[None, :] <= positions[:, None]
            """,
        ),
        "not_strictly_upper": _function(
            CAUSAL, "return ~torch.ones(size, size, dtype=torch.bool, device=device).triu(diagonal=1)"
        ),
    },
    "teacher_forcing_pair": {
        # the shape as torch.Size prints it: torch.Size([2, 1])
        "message_with_torch_size": _function(
            SHIFT,
            """
            if tgt.dim() == 0 or tgt.shape[-1] < 2:
                raise ValueError(f"targets of shape {tgt.shape} hold fewer than 2 tokens")
            return tgt[..., :-1], tgt[..., 1:]
            """,
        ),
        "narrow": _function(
            SHIFT,
            """
            T = tgt.shape[-1] if tgt.dim() > 0 else 0
            if T < 2:
                raise ValueError(f"nothing to predict in targets of shape {tuple(tgt.shape)}")
            return tgt.narrow(-1, 0, T - 1), tgt.narrow(-1, 1, T - 1)
            """,
        ),
        "index_select_of_positions": _function(
            SHIFT,
            """
            if tgt.ndim < 1 or tgt.size(-1) < 2:
                raise ValueError("targets " + str(tuple(tgt.shape)) + " have fewer than 2 tokens")
            positions = torch.arange(tgt.size(-1), device=tgt.device)
            return tgt.index_select(-1, positions[:-1]), tgt.index_select(-1, positions[1:])
            """,
        ),
    },
    "DecoderBlock": {
        "intermediate_names": _block(forward="""
            attended = self.self_attention(X, X, X, tgt_mask)
            Y = self.addnorm1(X, attended)
            context = self.cross_attention(Y, memory, memory, memory_mask)
            Z = self.addnorm2(Y, context)
            transformed = self.ffn(Z)
            return self.addnorm3(Z, transformed)
            """),
        "layers_in_another_order_keyword_arguments": _block(
            init="""
            self.ffn = PositionWiseFFN(d_model, d_ff, dropout=dropout)
            self.self_attention = MultiHeadAttention(d_model, num_heads, dropout=dropout)
            self.cross_attention = MultiHeadAttention(d_model, num_heads, dropout=dropout)
            self.addnorm1, self.addnorm2, self.addnorm3 = (AddNorm(d_model, dropout) for _ in range(3))
            """,
            forward="""
            X = self.addnorm1(X, self.self_attention(queries=X, keys=X, values=X, mask=tgt_mask))
            X = self.addnorm2(X, self.cross_attention(queries=X, keys=memory, values=memory, mask=memory_mask))
            return self.addnorm3(X, self.ffn(X))
            """,
        ),
    },
    "TransformerDecoder": {
        "unsqueeze_mask_and_power": _decoder(forward="""
            X = self.embedding(tgt_in) * self.d_model ** 0.5
            X = self.pos_encoding(X)
            memory_mask = src_mask.unsqueeze(1) if src_mask is not None else None
            tgt_mask = causal_mask(tgt_in.size(-1), tgt_in.device)
            for block in self.blocks:
                X = block(X, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
            return self.dense(X)
            """),
        "inline_tril_and_view": _decoder(
            init=_DECODER_INIT.replace("self.d_model = d_model\n", "").replace(
                "nn.ModuleList([DecoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])",
                "nn.ModuleList()\nfor _ in range(num_layers):\n    self.blocks.append(DecoderBlock(d_model, num_heads, d_ff, dropout))",
            ),
            forward="""
            B, T = tgt_in.shape
            scale = math.sqrt(self.embedding.embedding_dim)
            X = self.pos_encoding(scale * self.embedding(tgt_in))
            future_hidden = torch.tril(torch.ones(T, T, device=tgt_in.device)).bool()
            memory_mask = src_mask if src_mask is None else src_mask.view(B, 1, -1)
            for block in self.blocks:
                X = block(X, memory, future_hidden, memory_mask)
            return self.dense(X)
            """,
        ),
    },
    "Transformer": {
        "forward_calls_the_layers_directly": _transformer(forward="""
            memory = self.encoder(src, src_mask)
            return self.decoder(tgt_in, memory, src_mask)
            """),
        # a buffer the docstring does not name (persistent: it is in the state_dict) costs nothing
        "counts_its_calls_in_a_buffer": _transformer(
            init=_TRANSFORMER_INIT + 'self.register_buffer("calls", torch.zeros((), dtype=torch.long))\n',
            forward="""
            self.calls += 1
            return self.decode(tgt_in, self.encode(src, src_mask), src_mask)
            """,
        ),
        "keyword_arguments": _transformer(
            init="""
            sizes = dict(d_model=d_model, num_heads=num_heads, d_ff=d_ff, num_layers=num_layers, dropout=dropout,
                         max_len=max_len)
            self.encoder = TransformerEncoder(vocab_size=src_vocab_size, **sizes)
            self.decoder = TransformerDecoder(vocab_size=tgt_vocab_size, **sizes)
            """,
            encode="return self.encoder(src, src_mask=src_mask)",
            decode="return self.decoder(tgt_in, memory=memory, src_mask=src_mask)",
            forward="""
            memory = self.encode(src, src_mask=src_mask)
            return self.decode(tgt_in, memory, src_mask=src_mask)
            """,
        ),
    },
    "greedy_decode": {
        "list_of_token_columns": _function(GREEDY, """
            model.eval()
            with torch.no_grad():
                memory = model.encode(src, src_mask)
                B = src.shape[0]
                columns = [torch.full((B,), bos_id, dtype=torch.long, device=src.device)]
                ended = torch.zeros(B, dtype=torch.bool, device=src.device)
                while len(columns) <= max_len and not bool(ended.all()):
                    logits = model.decode(torch.stack(columns, dim=1), memory, src_mask)
                    token = torch.where(ended, torch.full_like(columns[0], pad_id), logits[:, -1].argmax(-1))
                    columns.append(token)
                    ended = ended | (token == eos_id)
                return torch.stack(columns, dim=1)[:, 1:]
            """),
        # always max_len steps, the padding after each <eos> put in at the end
        "runs_to_max_len_then_pads": _function(GREEDY, """
            model.eval()
            with torch.inference_mode():
                memory = model.encode(src, src_mask)
                prefix = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
                for _ in range(max_len):
                    next_token = model.decode(prefix, memory, src_mask)[:, -1:].argmax(dim=-1)
                    prefix = torch.cat([prefix, next_token], dim=1)
                out = prefix[:, 1:]
                is_eos = (out == eos_id).long()
                after_eos = is_eos.cumsum(dim=1) - is_eos > 0
                return out.masked_fill(after_eos, pad_id)
            """),
    },
    "noam_lr": {
        "math_sqrt": _function(NOAM, """
            if step < 1:
                raise ValueError(f"noam_lr: step = {step}, but steps are counted from 1")
            return min(1 / math.sqrt(step), step / math.sqrt(warmup) ** 3) / math.sqrt(d_model)
            """),
        "pow_and_branch": _function(NOAM, """
            if step <= 0:
                raise ValueError("step must be >= 1")
            rate = step * pow(warmup, -1.5) if step < warmup else pow(step, -0.5)
            return float(pow(d_model, -0.5) * rate)
            """),
    },
    "answer_causal": {"upper_case_with_spaces": right_choice("ch07_transformer_decoder", "answer_causal", " {upper} ")},
    "answer_cross": {"upper_case": right_choice("ch07_transformer_decoder", "answer_cross", "{upper}")},
    "answer_decode_cost": {
        "with_a_newline": right_choice("ch07_transformer_decoder", "answer_decode_cost", "{lower}\\n")},
}


# Wrong only through a side effect inside the learner's own process: grading sends the
# judge's tensors to the submission as copies, so a function that changes its argument in
# place returns the right values there. The hidden test catches it where the learner runs
# the notebook, in one kernel; tests/test_mutants.py checks that there.
WRONG_IN_KERNEL = {
    "teacher_forcing_pair": {
        "labels_shifted_in_place": _shift("""
            decoder_input = tgt[..., :-1].clone()
            tgt[..., :-1] = tgt[..., 1:].clone()
            return decoder_input, tgt[..., :-1]
            """),
    },
}

# Mistakes whose failure message must name them (check_close's likely=: PyTorch's layer with the
# same weights, fed the wrong memory or built pre-norm).
MESSAGES = {
    "DecoderBlock": {
        "pre_norm": "pre-norm",
        "cross_attention_over_the_target": "keys and values are the first AddNorm's output Y instead of the memory",
    },
}
