"""Mutants of chapter 8 (a small decoder-only model).

``WRONG``: plausible mistakes, each must fail at least one graded test cell (every one fails a
unit test before the training cell runs).
``CORRECT``: differently written right answers, each must pass every test.
"""

from mutant_source import class_cell as _class
from mutant_source import function_cell as _function
from mutant_source import replaced as _replaced
from mutant_source import right_choice, wrong_choices

ASSIGNMENT = "ch08_decoder_only"

# ----------------------------------------------------------------------------- CausalSelfAttention

_ATTENTION_SIGNATURE = "def __init__(self, d_model, num_heads, dropout=0.0, bias=True):"
_ATTENTION_FORWARD_SIGNATURE = "def forward(self, X, padding_mask=None, past_kv=None):"

_ATTENTION_INIT = """
if d_model % num_heads != 0:
    raise ValueError(f"d_model = {d_model} is not a multiple of num_heads = {num_heads}")
self.num_heads = num_heads
self.W_qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
self.W_o = nn.Linear(d_model, d_model, bias=bias)
self.dropout = nn.Dropout(dropout)
self.attention_weights = None
"""

_ATTENTION_FORWARD = """
T = X.shape[1]
Q, K, V = (split_heads(M, self.num_heads) for M in self.W_qkv(X).chunk(3, dim=-1))
if past_kv is not None:
    K = torch.cat([past_kv[0], K], dim=2)
    V = torch.cat([past_kv[1], V], dim=2)
P = K.shape[2] - T
keys = torch.arange(P + T, device=X.device)
mask = keys[None, :] <= P + torch.arange(T, device=X.device)[:, None]
if padding_mask is not None:
    mask = mask & padding_mask[:, None, None, :]
scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
self.attention_weights = masked_softmax(scores, mask)
return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V)), (K, V)
"""


def _attention(init: str = _ATTENTION_INIT, forward: str = _ATTENTION_FORWARD) -> str:
    return _class("CausalSelfAttention", _ATTENTION_SIGNATURE, init, {_ATTENTION_FORWARD_SIGNATURE: forward})


def _attention_forward_with(old: str, new: str) -> str:
    return _attention(forward=_replaced(_ATTENTION_FORWARD, old, new))


_SPLIT = "Q, K, V = (split_heads(M, self.num_heads) for M in self.W_qkv(X).chunk(3, dim=-1))"
_MASK = "mask = keys[None, :] <= P + torch.arange(T, device=X.device)[:, None]"
_SCORES = "scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])"
_PADDING = "    mask = mask & padding_mask[:, None, None, :]"
_RETURN = "return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V)), (K, V)"

# ----------------------------------------------------------------------------- DecoderOnlyBlock

_BLOCK_SIGNATURE = "def __init__(self, d_model, num_heads, d_ff, dropout=0.0):"

_BLOCK_INIT = """
self.ln1 = nn.LayerNorm(d_model)
self.attention = CausalSelfAttention(d_model, num_heads, dropout)
self.ln2 = nn.LayerNorm(d_model)
self.dense1 = nn.Linear(d_model, d_ff)
self.dense2 = nn.Linear(d_ff, d_model)
self.dropout = nn.Dropout(dropout)
"""

_BLOCK_FORWARD = """
attended, present_kv = self.attention(self.ln1(X), padding_mask, past_kv)
H = X + self.dropout(attended)
return H + self.dropout(self.dense2(F.gelu(self.dense1(self.ln2(H))))), present_kv
"""


def _block(init: str = _BLOCK_INIT, forward: str = _BLOCK_FORWARD) -> str:
    return _class("DecoderOnlyBlock", _BLOCK_SIGNATURE, init, {_ATTENTION_FORWARD_SIGNATURE: forward})


def _block_forward_with(old: str, new: str) -> str:
    return _block(forward=_replaced(_BLOCK_FORWARD, old, new))


_FFN = "return H + self.dropout(self.dense2(F.gelu(self.dense1(self.ln2(H))))), present_kv"

# ----------------------------------------------------------------------------- GPT

_GPT_SIGNATURE = (
    "def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout=0.0, tie_weights=True):"
)
_GPT_FORWARD_SIGNATURE = "def forward(self, tokens, padding_mask=None, past_kv=None):"

_GPT_INIT = """
self.max_len = max_len
self.token_embedding = nn.Embedding(vocab_size, d_model)
self.position_embedding = nn.Embedding(max_len, d_model)
self.dropout = nn.Dropout(dropout)
self.blocks = nn.ModuleList([DecoderOnlyBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
self.ln_f = nn.LayerNorm(d_model)
self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
for name, module in self.named_modules():
    if isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
    elif isinstance(module, nn.Linear):
        residual = name.endswith(("W_o", "dense2"))
        nn.init.normal_(module.weight, std=0.02 / math.sqrt(2 * num_layers) if residual else 0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
if tie_weights:
    self.lm_head.weight = self.token_embedding.weight
"""

_GPT_FORWARD = """
T = tokens.shape[1]
P = 0 if past_kv is None else past_kv[0][0].shape[2]
if P + T > self.max_len:
    raise ValueError(f"{P} cached and {T} new positions exceed max_len = {self.max_len}")
positions = torch.arange(P, P + T, device=tokens.device)
X = self.dropout(self.token_embedding(tokens) + self.position_embedding(positions))
present_kv = []
for i, block in enumerate(self.blocks):
    X, kv = block(X, padding_mask, None if past_kv is None else past_kv[i])
    present_kv.append(kv)
return self.lm_head(self.ln_f(X)), present_kv
"""


def _gpt(init: str = _GPT_INIT, forward: str = _GPT_FORWARD) -> str:
    return _class("GPT", _GPT_SIGNATURE, init, {_GPT_FORWARD_SIGNATURE: forward})


def _gpt_forward_with(old: str, new: str) -> str:
    return _gpt(forward=_replaced(_GPT_FORWARD, old, new))


def _gpt_init_with(old: str, new: str) -> str:
    return _gpt(init=_replaced(_GPT_INIT, old, new))


_TIE = "    self.lm_head.weight = self.token_embedding.weight"
_POSITIONS = "positions = torch.arange(P, P + T, device=tokens.device)"
_LENGTH_CHECK = "if P + T > self.max_len:"

# ----------------------------------------------------------------------------- sampling

FILTER = "def top_k_top_p_filter(logits, top_k=None, top_p=None):"

_FILTER_CHECKS = """
if top_k is not None and top_k < 1:
    raise ValueError(f"top_k must be at least 1, got {top_k}")
if top_p is not None and not 0 < top_p <= 1:
    raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
"""

_FILTER_BODY = _FILTER_CHECKS + """
order = torch.sort(logits, dim=-1, descending=True, stable=True).indices
ranked = logits.gather(-1, order)
keep = torch.ones_like(ranked, dtype=torch.bool)
if top_k is not None:
    keep &= torch.arange(logits.shape[-1], device=logits.device) < top_k
if top_p is not None and top_p < 1:
    probs = torch.softmax(ranked.masked_fill(~keep, float("-inf")), dim=-1)
    keep &= probs.cumsum(dim=-1) - probs < top_p
keep = keep.scatter(-1, order, keep)
return logits.masked_fill(~keep, float("-inf"))
"""


def _filter_with(old: str, new: str) -> str:
    return _function(FILTER, _replaced(_FILTER_BODY, old, new))


_NUCLEUS = "    keep &= probs.cumsum(dim=-1) - probs < top_p"

SAMPLE = "def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):"

_SAMPLE_BODY = """
if temperature < 0:
    raise ValueError(f"temperature must be >= 0, got {temperature}")
if temperature == 0:
    return logits.argmax(dim=-1)
filtered = top_k_top_p_filter(logits / temperature, top_k, top_p)
return torch.multinomial(torch.softmax(filtered, dim=-1), 1, generator=generator)[:, 0]
"""


def _sample_with(old: str, new: str) -> str:
    return _function(SAMPLE, _replaced(_SAMPLE_BODY, old, new))


_FILTERED = "filtered = top_k_top_p_filter(logits / temperature, top_k, top_p)"
_DRAW = "return torch.multinomial(torch.softmax(filtered, dim=-1), 1, generator=generator)[:, 0]"

# ----------------------------------------------------------------------------- beam search

BEAM = "def beam_search(model, prompt, beam_width, max_new_tokens, eos_id, length_penalty=1.0):"

_BEAM_BODY = """
if beam_width < 1 or max_new_tokens < 1:
    raise ValueError(f"beam_width and max_new_tokens must be at least 1, got {beam_width} and {max_new_tokens}")
beams, sums, finished = [[]], [0.0], []
with torch.no_grad():
    for _ in range(max_new_tokens):
        if not beams:
            break
        sequences = torch.stack([torch.cat([prompt, prompt.new_tensor(tokens)]) for tokens in beams])
        log_probs = torch.log_softmax(model(sequences)[0][:, -1].double(), dim=-1)
        candidates = (torch.tensor(sums, dtype=torch.float64, device=log_probs.device)[:, None] + log_probs).flatten()
        V = log_probs.shape[-1]
        best = torch.sort(candidates, descending=True, stable=True).indices[:beam_width].tolist()
        beams, sums, previous = [], [], beams
        for flat in best:
            tokens, total = previous[flat // V] + [flat % V], float(candidates[flat])
            if flat % V == eos_id:
                finished.append((tokens, total))
            else:
                beams.append(tokens)
                sums.append(total)
hypotheses = finished + list(zip(beams, sums))
scores = [total / len(tokens) ** length_penalty for tokens, total in hypotheses]
best = max(range(len(hypotheses)), key=lambda i: (scores[i], -i))
return torch.tensor(hypotheses[best][0], dtype=torch.long, device=prompt.device), scores[best]
"""


def _beam_with(old: str, new: str) -> str:
    return _function(BEAM, _replaced(_BEAM_BODY, old, new))


_SCORES_LINE = "scores = [total / len(tokens) ** length_penalty for tokens, total in hypotheses]"
_RANK = "best = torch.sort(candidates, descending=True, stable=True).indices[:beam_width].tolist()"
_IS_EOS = "            if flat % V == eos_id:"

# ----------------------------------------------------------------------------- generate

GENERATE = ("def generate(model, prompt, max_new_tokens, use_cache=True, temperature=0.0, top_k=None, top_p=None, "
            "generator=None):")

_GENERATE_BODY = """
tokens = prompt
with torch.no_grad():
    logits, past_kv = model(prompt)
    for step in range(max_new_tokens):
        next_token = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        if step == max_new_tokens - 1:
            break
        if use_cache:
            logits, past_kv = model(next_token[:, None], past_kv=past_kv)
        else:
            logits, _ = model(tokens)
return tokens
"""


def _generate_with(old: str, new: str) -> str:
    return _function(GENERATE, _replaced(_GENERATE_BODY, old, new))


_CACHED_CALL = "            logits, past_kv = model(next_token[:, None], past_kv=past_kv)"
_NEXT = "        next_token = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)"

WRONG = {
    "CausalSelfAttention": {
        "no_causal_mask": _attention_forward_with(_MASK, "mask = torch.ones(T, P + T, dtype=torch.bool, device=X.device)"),
        "mask_off_by_one_diagonal_excluded": _attention_forward_with(
            _MASK, "mask = keys[None, :] < P + torch.arange(T, device=X.device)[:, None]"),
        "mask_sees_one_ahead": _attention_forward_with(
            _MASK, "mask = keys[None, :] <= P + 1 + torch.arange(T, device=X.device)[:, None]"),
        "mask_not_offset_by_the_cache": _attention_forward_with(
            _MASK, "mask = keys[None, :] <= torch.arange(T, device=X.device)[:, None]"),
        "mask_transposed": _attention_forward_with(
            _MASK, "mask = keys[None, :] >= P + torch.arange(T, device=X.device)[:, None]"),
        "qkv_split_as_k_q_v": _attention_forward_with(
            _SPLIT, "K, Q, V = (split_heads(M, self.num_heads) for M in self.W_qkv(X).chunk(3, dim=-1))"),
        "qkv_split_interleaved": _attention_forward_with(
            _SPLIT, "Q, K, V = (split_heads(self.W_qkv(X)[..., i::3], self.num_heads) for i in range(3))"),
        "qkv_split_per_head_first": _attention_forward_with(
            _SPLIT,
            "B, T_, D = X.shape\n"
            "Q, K, V = self.W_qkv(X).view(B, T_, self.num_heads, 3, D // self.num_heads).permute(3, 0, 2, 1, 4)"),
        "scaled_by_d_model": _attention_forward_with(
            _SCORES, "scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1] * self.num_heads)"),
        "not_scaled": _attention_forward_with(_SCORES, "scores = Q @ K.transpose(-2, -1)"),
        "padding_mask_ignored": _attention_forward_with(_PADDING, "    pass"),
        "padding_on_the_query_axis": _attention_forward_with(
            _PADDING, "    mask = mask & padding_mask[:, None, -T:, None]"),
        "fully_masked_rows_nan": _attention_forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = torch.softmax(scores.masked_fill(~mask, float('-inf')), dim=-1)"),
        "fully_masked_rows_uniform": _attention_forward_with(
            "self.attention_weights = masked_softmax(scores, mask)",
            "self.attention_weights = torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)"),
        "cache_prepended_after": _attention_forward_with(
            "    K = torch.cat([past_kv[0], K], dim=2)\n    V = torch.cat([past_kv[1], V], dim=2)",
            "    K = torch.cat([K, past_kv[0]], dim=2)\n    V = torch.cat([V, past_kv[1]], dim=2)"),
        "present_kv_only_the_new_positions": _attention_forward_with(
            _RETURN, "return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V)), (K[:, :, P:], V[:, :, P:])"),
        "past_kv_ignored": _attention_forward_with(
            "    K = torch.cat([past_kv[0], K], dim=2)\n    V = torch.cat([past_kv[1], V], dim=2)", "    pass"),
        "attention_weights_after_dropout": _attention_forward_with(
            "self.attention_weights = masked_softmax(scores, mask)\n" + _RETURN,
            "self.attention_weights = self.dropout(masked_softmax(scores, mask))\n"
            "return self.W_o(merge_heads(self.attention_weights @ V)), (K, V)"),
        "dropout_on_the_output": _attention_forward_with(
            _RETURN, "return self.dropout(self.W_o(merge_heads(self.attention_weights @ V))), (K, V)"),
        "no_w_o": _attention_forward_with(_RETURN, "return merge_heads(self.attention_weights @ V), (K, V)"),
        "w_qkv_without_bias": _attention(init=_ATTENTION_INIT.replace(
            "nn.Linear(d_model, 3 * d_model, bias=bias)", "nn.Linear(d_model, 3 * d_model, bias=False)")),
        "no_value_error": _attention(init=_ATTENTION_INIT.replace(
            'if d_model % num_heads != 0:\n    raise ValueError(f"d_model = {d_model} is not a multiple of num_heads = '
            '{num_heads}")\n', "")),
        "three_projections": _attention(
            init=_ATTENTION_INIT.replace("self.W_qkv = nn.Linear(d_model, 3 * d_model, bias=bias)",
                                         "self.W_q, self.W_k, self.W_v = (nn.Linear(d_model, d_model, bias=bias) for _ in range(3))"),
            forward=_replaced(_ATTENTION_FORWARD, _SPLIT,
                              "Q, K, V = (split_heads(W(X), self.num_heads) for W in (self.W_q, self.W_k, self.W_v))")),
    },
    "DecoderOnlyBlock": {
        "post_norm": _block(forward="""
            attended, present_kv = self.attention(X, padding_mask, past_kv)
            H = self.ln1(X + self.dropout(attended))
            return self.ln2(H + self.dropout(self.dense2(F.gelu(self.dense1(H))))), present_kv
            """),
        "relu": _block_forward_with(_FFN, "return H + self.dropout(self.dense2(F.relu(self.dense1(self.ln2(H))))), present_kv"),
        "tanh_gelu": _block_forward_with(
            _FFN, "return H + self.dropout(self.dense2(F.gelu(self.dense1(self.ln2(H)), approximate='tanh'))), present_kv"),
        "residual_from_the_normalised_input": _block(forward="""
            normalised = self.ln1(X)
            attended, present_kv = self.attention(normalised, padding_mask, past_kv)
            H = normalised + self.dropout(attended)
            return H + self.dropout(self.dense2(F.gelu(self.dense1(self.ln2(H))))), present_kv
            """),
        "ffn_reads_x_not_h": _block_forward_with(
            _FFN, "return H + self.dropout(self.dense2(F.gelu(self.dense1(self.ln2(X))))), present_kv"),
        "one_layernorm_for_both": _block_forward_with(
            _FFN, "return H + self.dropout(self.dense2(F.gelu(self.dense1(self.ln1(H))))), present_kv"),
        "final_layernorm_in_the_block": _block_forward_with(
            _FFN, "return self.ln2(H + self.dropout(self.dense2(F.gelu(self.dense1(self.ln2(H)))))), present_kv"),
        "padding_mask_not_passed": _block_forward_with(
            "self.attention(self.ln1(X), padding_mask, past_kv)", "self.attention(self.ln1(X), None, past_kv)"),
        "cache_not_passed": _block_forward_with(
            "self.attention(self.ln1(X), padding_mask, past_kv)", "self.attention(self.ln1(X), padding_mask)"),
        "attention_without_dropout": _block(init=_BLOCK_INIT.replace(
            "CausalSelfAttention(d_model, num_heads, dropout)", "CausalSelfAttention(d_model, num_heads)")),
        "ffn_branch_not_dropped": _block_forward_with(
            _FFN, "return H + self.dense2(F.gelu(self.dense1(self.ln2(H)))), present_kv"),
        "dropout_on_the_ffn_hidden_layer": _block_forward_with(
            _FFN, "return H + self.dense2(self.dropout(F.gelu(self.dense1(self.ln2(H))))), present_kv"),
        "dropout_on_the_residual_sum": _block(forward="""
            attended, present_kv = self.attention(self.ln1(X), padding_mask, past_kv)
            H = self.dropout(X + attended)
            return self.dropout(H + self.dense2(F.gelu(self.dense1(self.ln2(H))))), present_kv
            """),
        "no_dropout_anywhere": _block(init=_BLOCK_INIT.replace(
            "CausalSelfAttention(d_model, num_heads, dropout)", "CausalSelfAttention(d_model, num_heads)").replace(
            "nn.Dropout(dropout)", "nn.Dropout(0.0)")),
    },
    "GPT": {
        "weights_not_tied": _gpt_init_with(_TIE, "    pass"),
        "tied_by_copying": _gpt_init_with(
            _TIE, "    self.lm_head.weight = nn.Parameter(self.token_embedding.weight.detach().clone())"),
        "tied_by_sharing_data": _gpt_init_with(_TIE, "    self.lm_head.weight.data = self.token_embedding.weight.data"),
        "tied_whatever_tie_weights": _gpt_init_with("if tie_weights:\n", "if True:\n"),
        "positions_not_offset_by_the_cache": _gpt_forward_with(
            _POSITIONS, "positions = torch.arange(T, device=tokens.device)"),
        "positions_offset_by_one": _gpt_forward_with(
            _POSITIONS, "positions = torch.arange(P + 1, P + T + 1, device=tokens.device).clamp(max=self.max_len - 1)"),
        "no_positions": _gpt_forward_with(
            "X = self.dropout(self.token_embedding(tokens) + self.position_embedding(positions))",
            "X = self.dropout(self.token_embedding(tokens))"),
        "embedding_scaled_by_sqrt_d_model": _gpt_forward_with(
            "X = self.dropout(self.token_embedding(tokens) + self.position_embedding(positions))",
            "X = self.dropout(self.token_embedding(tokens) * math.sqrt(self.ln_f.normalized_shape[0]) "
            "+ self.position_embedding(positions))"),
        "no_final_layernorm": _gpt_forward_with(
            "return self.lm_head(self.ln_f(X)), present_kv", "return self.lm_head(X), present_kv"),
        "cache_of_block_0_for_every_block": _gpt_forward_with(
            "None if past_kv is None else past_kv[i]", "None if past_kv is None else past_kv[0]"),
        "padding_mask_not_passed": _gpt_forward_with(
            "X, kv = block(X, padding_mask, None if past_kv is None else past_kv[i])",
            "X, kv = block(X, None, None if past_kv is None else past_kv[i])"),
        "length_check_ignores_the_cache": _gpt_forward_with(_LENGTH_CHECK, "if T > self.max_len:"),
        "no_length_check": _gpt_forward_with(
            _LENGTH_CHECK + '\n    raise ValueError(f"{P} cached and {T} new positions exceed max_len = {self.max_len}")\n', ""),
        "value_error_names_no_length": _gpt_forward_with(
            'raise ValueError(f"{P} cached and {T} new positions exceed max_len = {self.max_len}")',
            'raise ValueError("the sequence is longer than the position table")'),
        "embedding_dropout_never_applied": _gpt_forward_with(
            "X = self.dropout(self.token_embedding(tokens) + self.position_embedding(positions))",
            "X = self.token_embedding(tokens) + self.position_embedding(positions)"),
        "lm_head_with_bias": _gpt_init_with(
            "nn.Linear(d_model, vocab_size, bias=False)", "nn.Linear(d_model, vocab_size)"),
        "pytorch_default_initialisation": _gpt_init_with(
            _GPT_INIT[_GPT_INIT.index("for name, module"):_GPT_INIT.index("if tie_weights:")], ""),
        "residual_projections_not_scaled": _gpt_init_with(
            "std=0.02 / math.sqrt(2 * num_layers) if residual else 0.02", "std=0.02"),
        "one_block_shared": _gpt_init_with(
            "nn.ModuleList([DecoderOnlyBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])",
            "nn.ModuleList([DecoderOnlyBlock(d_model, num_heads, d_ff, dropout)] * num_layers)"),
    },
    "top_k_top_p_filter": {
        "nucleus_one_token_too_many": _filter_with(_NUCLEUS, "    keep &= probs.cumsum(dim=-1) - probs <= top_p"),
        "nucleus_one_token_too_few": _filter_with(_NUCLEUS, "    keep &= probs.cumsum(dim=-1) < top_p"),
        "nucleus_on_the_probabilities_before_top_k": _filter_with(
            'probs = torch.softmax(ranked.masked_fill(~keep, float("-inf")), dim=-1)', "probs = torch.softmax(ranked, dim=-1)"),
        "unstable_sort": _filter_with("descending=True, stable=True", "descending=True"),
        "ties_higher_id_first": _filter_with(
            "order = torch.sort(logits, dim=-1, descending=True, stable=True).indices",
            "order = torch.sort(logits.flip(-1), dim=-1, descending=True, stable=True).indices\n"
            "order = logits.shape[-1] - 1 - order"),
        "top_k_by_value_threshold": _filter_with(
            "    keep &= torch.arange(logits.shape[-1], device=logits.device) < top_k",
            "    keep &= ranked >= ranked[..., min(top_k, logits.shape[-1]) - 1:min(top_k, logits.shape[-1])]"),
        "kept_set_not_unsorted": _filter_with("keep = keep.scatter(-1, order, keep)\n", ""),
        "last_axis_assumed_2d": _filter_with("return logits.masked_fill(~keep, float(\"-inf\"))",
                                             "return logits.masked_fill(~keep, float(\"-inf\")) if logits.dim() == 1 "
                                             "else logits.masked_fill(~keep.view(-1, logits.shape[-1])[0], float(\"-inf\"))"),
        "zero_instead_of_minus_inf": _filter_with(
            'return logits.masked_fill(~keep, float("-inf"))', "return logits.masked_fill(~keep, 0.0)"),
        "filters_in_place": _filter_with(
            'return logits.masked_fill(~keep, float("-inf"))', 'return logits.masked_fill_(~keep, float("-inf"))'),
        "top_p_1_by_the_running_total": _filter_with("if top_p is not None and top_p < 1:", "if top_p is not None:"),
        "top_p_1_not_allowed": _filter_with("not 0 < top_p <= 1", "not 0 < top_p < 1"),
        "no_checks": _function(FILTER, _FILTER_BODY.replace(_FILTER_CHECKS, "")),
    },
    "sample_next_token": {
        "temperature_after_filtering": _sample_with(
            _FILTERED, "filtered = top_k_top_p_filter(logits, top_k, top_p) / temperature"),
        "temperature_multiplies": _sample_with(_FILTERED, "filtered = top_k_top_p_filter(logits * temperature, top_k, top_p)"),
        "temperature_on_the_probabilities": _sample_with(
            _DRAW, "return torch.multinomial(torch.softmax(filtered * temperature, dim=-1) / temperature, 1, "
                   "generator=generator)[:, 0]"),
        "softmax_applied_twice": _sample_with(
            _DRAW, "return torch.multinomial(torch.softmax(torch.softmax(filtered, dim=-1), dim=-1), 1, generator=generator)[:, 0]"),
        "renormalised_over_all_tokens": _sample_with(
            _DRAW, "probs = torch.softmax(logits / temperature, dim=-1)\n"
                   "probs = probs * (filtered > float('-inf')) + 1e-3\n"
                   "return torch.multinomial(probs, 1, generator=generator)[:, 0]"),
        "generator_ignored": _sample_with(
            _DRAW, "return torch.multinomial(torch.softmax(filtered, dim=-1), 1)[:, 0]"),
        "greedy_draws_from_the_generator": _sample_with(
            "if temperature == 0:\n    return logits.argmax(dim=-1)",
            "if temperature == 0:\n"
            "    torch.rand(1, generator=generator, device=logits.device)\n"
            "    return logits.argmax(dim=-1)"),
        "greedy_as_tiny_temperature_with_nan": _sample_with(
            "if temperature == 0:\n    return logits.argmax(dim=-1)", "temperature = max(temperature, 1e-8)"),
        "greedy_ties_to_the_higher_id": _sample_with(
            "return logits.argmax(dim=-1)", "return logits.shape[-1] - 1 - logits.flip(-1).argmax(dim=-1)"),
        "returns_a_column": _sample_with(
            _DRAW, "return torch.multinomial(torch.softmax(filtered, dim=-1), 1, generator=generator)"),
        "gumbel_max_instead_of_multinomial": _sample_with(
            _DRAW, "u = torch.rand(filtered.shape, generator=generator, device=filtered.device, dtype=filtered.dtype)\n"
                   "return (filtered - torch.log(-torch.log(u))).argmax(dim=-1)"),
        "no_value_error": _sample_with(
            'if temperature < 0:\n    raise ValueError(f"temperature must be >= 0, got {temperature}")\n', ""),
    },
    "beam_search": {
        "finished_kept_in_the_beam": _beam_with(
            _IS_EOS + "\n                finished.append((tokens, total))\n            else:\n"
                      "                beams.append(tokens)\n                sums.append(total)",
            "            beams.append(tokens)\n            sums.append(total)"),
        "finished_also_extended": _beam_with(
            _IS_EOS + "\n                finished.append((tokens, total))\n            else:\n"
                      "                beams.append(tokens)\n                sums.append(total)",
            _IS_EOS + "\n                finished.append((tokens, total))\n"
                      "            beams.append(tokens)\n            sums.append(total)"),
        "finished_dropped": _beam_with(
            "                finished.append((tokens, total))", "                pass"),
        "beam_refilled_to_width": _beam_with(
            _RANK, "order = torch.sort(candidates, descending=True, stable=True).indices.tolist()\n"
                   "        best, alive = [], 0\n"
                   "        for flat in order:\n"
                   "            if alive < beam_width:\n"
                   "                best.append(flat)\n"
                   "                alive += flat % log_probs.shape[-1] != eos_id"),
        "length_penalty_while_searching": _beam_with(
            "candidates = (torch.tensor(sums, dtype=torch.float64, device=log_probs.device)[:, None] + log_probs).flatten()",
            "candidates = (torch.tensor(sums, dtype=torch.float64, device=log_probs.device)[:, None] + log_probs).flatten()\n"
            "        step = len(beams[0]) + 1\n"
            "        candidates = candidates / step ** length_penalty * step ** length_penalty"
            " if length_penalty == 0 else candidates / step ** length_penalty"),
        "length_penalty_ignored": _beam_with(_SCORES_LINE, "scores = [total for tokens, total in hypotheses]"),
        "length_penalty_multiplies": _beam_with(
            _SCORES_LINE, "scores = [total * len(tokens) ** length_penalty for tokens, total in hypotheses]"),
        "length_without_eos": _beam_with(
            _SCORES_LINE, "scores = [total / max(len([t for t in tokens if t != eos_id]), 1) ** length_penalty "
                          "for tokens, total in hypotheses]"),
        "best_by_sum_not_score": _beam_with(
            "best = max(range(len(hypotheses)), key=lambda i: (scores[i], -i))",
            "best = max(range(len(hypotheses)), key=lambda i: (hypotheses[i][1], -i))"),
        "ties_higher_token_first": _beam_with(
            _RANK, "best = sorted(range(len(candidates)), key=lambda f: (-float(candidates[f]), f // log_probs.shape[-1], "
                   "-(f % log_probs.shape[-1])))[:beam_width]"),
        "probabilities_not_log": _beam_with(
            "log_probs = torch.log_softmax(model(sequences)[0][:, -1].double(), dim=-1)",
            "log_probs = torch.softmax(model(sequences)[0][:, -1].double(), dim=-1)"),
        "reads_the_first_position": _beam_with(
            "model(sequences)[0][:, -1]", "model(sequences)[0][:, 0]"),
        "prompt_returned_too": _beam_with(
            "return torch.tensor(hypotheses[best][0], dtype=torch.long, device=prompt.device), scores[best]",
            "return torch.cat([prompt, prompt.new_tensor(hypotheses[best][0])]), scores[best]"),
        "remaining_beams_not_considered": _beam_with(
            "hypotheses = finished + list(zip(beams, sums))", "hypotheses = finished or list(zip(beams, sums))"),
        "one_step_too_few": _beam_with("for _ in range(max_new_tokens):", "for _ in range(max_new_tokens - 1):"),
    },
    "generate": {
        "cache_not_appended": _generate_with(
            _CACHED_CALL, "            logits, _ = model(next_token[:, None], past_kv=past_kv)"),
        "whole_sequence_fed_with_the_cache": _generate_with(
            _CACHED_CALL, "            logits, past_kv = model(tokens, past_kv=past_kv)"),
        "cache_ignored": _generate_with("        if use_cache:\n", "        if False:\n"),
        "cache_reset_each_step": _generate_with(
            _CACHED_CALL, "            logits, past_kv = model(next_token[:, None])"),
        "reads_the_first_position": _generate_with(
            _NEXT, "        next_token = sample_next_token(logits[:, 0], temperature, top_k, top_p, generator)"),
        "one_token_too_few": _generate_with("for step in range(max_new_tokens):", "for step in range(max_new_tokens - 1):"),
        "prompt_left_out": _generate_with("return tokens", "return tokens[:, prompt.shape[1]:]"),
        "arguments_not_passed_on": _generate_with(
            _NEXT, "        next_token = sample_next_token(logits[:, -1], temperature, generator=generator)"),
        "argmax_whatever_the_temperature": _generate_with(
            _NEXT, "        next_token = logits[:, -1].argmax(dim=-1)"),
    },
    **{name: wrong_choices(ASSIGNMENT, name) for name in ("answer_prenorm", "answer_kv_cache", "answer_top_p")},
}

CORRECT = {
    "CausalSelfAttention": {
        # three slices and einsum, an explicit -inf mask with the fully masked rows zeroed by hand
        "slices_and_einsum": _attention(forward="""
            B, T, D = X.shape
            h = self.num_heads
            qkv = self.W_qkv(X)
            Q = qkv[..., :D].reshape(B, T, h, D // h).permute(0, 2, 1, 3)
            K = qkv[..., D:2 * D].reshape(B, T, h, D // h).permute(0, 2, 1, 3)
            V = qkv[..., 2 * D:].reshape(B, T, h, D // h).permute(0, 2, 1, 3)
            if past_kv is not None:
                K_past, V_past = past_kv
                K, V = torch.cat((K_past, K), 2), torch.cat((V_past, V), 2)
            S = K.size(2)
            offset = S - T
            allowed = torch.tril(torch.ones(T, S, dtype=torch.bool, device=X.device), diagonal=offset)
            allowed = allowed.expand(B, 1, T, S)
            if padding_mask is not None:
                allowed = allowed & padding_mask.view(B, 1, 1, S)
            scores = torch.einsum("bhtd,bhsd->bhts", Q, K) * (D // h) ** -0.5
            weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
            weights = torch.nan_to_num(weights, nan=0.0)
            self.attention_weights = weights
            out = torch.einsum("bhts,bhsd->bhtd", self.dropout(weights), V)
            return self.W_o(out.permute(0, 2, 1, 3).reshape(B, T, D)), (K, V)
            """),
        "split_and_view": _attention(
            init=_ATTENTION_INIT.replace("self.num_heads = num_heads", "self.num_heads, self.d_head = num_heads, d_model // num_heads"),
            forward="""
            B, T, D = X.shape
            Q, K, V = self.W_qkv(X).split(D, dim=2)
            Q, K, V = [t.view(B, T, self.num_heads, self.d_head).transpose(1, 2) for t in (Q, K, V)]
            if past_kv:
                K = torch.cat([past_kv[0], K], 2)
                V = torch.cat([past_kv[1], V], 2)
            P = K.shape[2] - T
            query_positions = torch.arange(P, P + T, device=X.device).view(T, 1)
            key_positions = torch.arange(P + T, device=X.device).view(1, P + T)
            mask = (key_positions <= query_positions).view(1, 1, T, P + T)
            if padding_mask is not None:
                mask = mask & padding_mask.view(B, 1, 1, P + T)
            self.attention_weights = masked_softmax(Q @ K.mT / self.d_head ** 0.5, mask)
            return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V)), (K, V)
            """),
    },
    "DecoderOnlyBlock": {
        "intermediate_names_and_gelu_formula": _block(forward="""
            y, present_kv = self.attention(self.ln1(X), padding_mask=padding_mask, past_kv=past_kv)
            h = X + self.dropout(y)
            z = self.dense1(self.ln2(h))
            z = 0.5 * z * (1 + torch.erf(z / math.sqrt(2)))
            return h + self.dropout(self.dense2(z)), present_kv
            """),
        "layers_in_another_order": _block(
            init="""
            self.dense1, self.dense2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
            self.dropout = nn.Dropout(p=dropout)
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.attention = CausalSelfAttention(d_model, num_heads, dropout=dropout)
            """,
            forward="""
            out = self.attention(self.ln1(X), padding_mask, past_kv)
            X = X + self.dropout(out[0])
            X = X + self.dropout(self.dense2(nn.functional.gelu(self.dense1(self.ln2(X)))))
            return X, out[1]
            """),
    },
    "GPT": {
        # tying the other way round, initialising parameter by parameter, positions from an offset
        "tied_the_other_way_and_init_by_parameter": _gpt(
            init="""
            self.max_len = max_len
            self.token_embedding = nn.Embedding(vocab_size, d_model)
            self.position_embedding = nn.Embedding(max_len, d_model)
            self.dropout = nn.Dropout(dropout)
            self.blocks = nn.ModuleList()
            for _ in range(num_layers):
                self.blocks.append(DecoderOnlyBlock(d_model, num_heads, d_ff, dropout))
            self.ln_f = nn.LayerNorm(d_model)
            self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
            if tie_weights:
                self.token_embedding.weight = self.lm_head.weight
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if name.startswith("ln") or ".ln" in name:
                        continue
                    if name.endswith(".bias"):
                        p.zero_()
                    elif name.endswith(("attention.W_o.weight", "dense2.weight")):
                        p.normal_(0.0, 0.02 / (2 * num_layers) ** 0.5)
                    else:
                        p.normal_(0.0, 0.02)
            """,
            forward="""
            past_length = past_kv[0][0].size(-2) if past_kv is not None else 0
            if past_length + tokens.size(1) > self.max_len:
                raise ValueError(f"sequence of {past_length} + {tokens.size(1)} positions, max_len {self.max_len}")
            positions = past_length + torch.arange(tokens.size(1), device=tokens.device)
            X = self.dropout(self.token_embedding(tokens) + self.position_embedding(positions)[None])
            caches = past_kv if past_kv is not None else [None] * len(self.blocks)
            present = []
            for block, cache in zip(self.blocks, caches):
                X, new_cache = block(X, padding_mask=padding_mask, past_kv=cache)
                present.append(new_cache)
            return self.lm_head(self.ln_f(X)), present
            """),
        # ... and a persistent buffer of position ids (a state_dict entry the spec does not name)
        "apply_init_functional_head_and_position_buffer": _gpt(
            init=_GPT_INIT.replace(
                "self.position_embedding = nn.Embedding(max_len, d_model)\n",
                "self.position_embedding = nn.Embedding(max_len, d_model)\n"
                "self.register_buffer('position_ids', torch.arange(max_len))\n").replace(
                _GPT_INIT[_GPT_INIT.index("for name, module"):_GPT_INIT.index("if tie_weights:")],
                "self.num_layers = num_layers\nself.apply(self._init)\n"
                "for block in self.blocks:\n"
                "    nn.init.normal_(block.attention.W_o.weight, std=0.02 / math.sqrt(2 * num_layers))\n"
                "    nn.init.normal_(block.dense2.weight, std=0.02 / math.sqrt(2 * num_layers))\n"),
            forward=_GPT_FORWARD.replace(
                "return self.lm_head(self.ln_f(X)), present_kv",
                "return F.linear(self.ln_f(X), self.lm_head.weight), present_kv").replace(
                _POSITIONS, "positions = self.position_ids[P:P + T]"),
        ) + """
    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
""",
    },
    "top_k_top_p_filter": {
        # topk for the cut, the nucleus in sorted order, a scatter of -inf
        "topk_then_cumsum": _function(FILTER, """
            if top_k is not None and top_k <= 0:
                raise ValueError(f"top_k = {top_k}: keep at least one token")
            if top_p is not None and (top_p <= 0 or top_p > 1):
                raise ValueError(f"top_p = {top_p} is not in (0, 1]")
            V = logits.size(-1)
            out = logits.clone()
            sorted_logits, indices = torch.sort(logits, dim=-1, descending=True, stable=True)
            drop = torch.zeros_like(sorted_logits, dtype=torch.bool)
            if top_k is not None and top_k < V:
                drop[..., top_k:] = True
            if top_p is not None and top_p != 1.0:
                probs = torch.softmax(sorted_logits.masked_fill(drop, float("-inf")), dim=-1)
                mass_before = torch.cat([torch.zeros_like(probs[..., :1]), probs.cumsum(-1)[..., :-1]], dim=-1)
                drop = drop | (mass_before >= top_p)
            return out.scatter(-1, indices, sorted_logits.masked_fill(drop, float("-inf")))
            """),
        # row by row in plain Python, for any leading shape
        "python_loops": _function(FILTER, """
            if top_k is not None and top_k < 1:
                raise ValueError("top_k must be >= 1")
            if top_p is not None and not (0.0 < top_p <= 1.0):
                raise ValueError("top_p must be in (0, 1]")
            rows = logits.reshape(-1, logits.shape[-1])
            out = torch.full_like(rows, float("-inf"))
            for r, row in enumerate(rows):
                values = row.tolist()
                order = sorted(range(len(values)), key=lambda i: (-values[i], i))
                if top_k is not None:
                    order = order[:top_k]
                if top_p is not None and top_p < 1:
                    probs = torch.softmax(row[order], dim=-1).tolist()
                    kept, before = [], 0.0
                    for i, p in zip(order, probs):
                        if before >= top_p:
                            break
                        kept.append(i)
                        before += p
                    order = kept
                out[r, order] = row[order]
            return out.reshape(logits.shape)
            """),
    },
    "sample_next_token": {
        "keyword_arguments_and_squeeze": _function(SAMPLE, """
            if temperature < 0:
                raise ValueError(f"negative temperature {temperature}")
            if temperature == 0:
                return torch.argmax(logits, dim=-1)
            scaled = logits / temperature
            probs = F.softmax(top_k_top_p_filter(scaled, top_k=top_k, top_p=top_p), dim=-1)
            return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)
            """),
        "float_temperature_and_view": _function(SAMPLE, """
            temperature = float(temperature)
            if temperature < 0.0:
                raise ValueError("the temperature cannot be negative: " + str(temperature))
            if temperature == 0.0:
                return logits.max(dim=-1).indices
            probs = top_k_top_p_filter(logits / temperature, top_k, top_p).softmax(-1)
            return probs.multinomial(1, generator=generator).view(-1)
            """),
    },
    "beam_search": {
        # one sequence at a time, the model called per hypothesis, Python floats and sorted()
        "one_call_per_hypothesis": _function(BEAM, """
            if beam_width < 1:
                raise ValueError(f"beam_width = {beam_width}")
            if max_new_tokens < 1:
                raise ValueError(f"max_new_tokens = {max_new_tokens}")
            beam, done = [([], 0.0)], []
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    if len(beam) == 0:
                        break
                    candidates = []
                    for b, (tokens, total) in enumerate(beam):
                        seq = torch.tensor([prompt.tolist() + tokens], device=prompt.device)
                        lp = F.log_softmax(model(seq)[0][0, -1].to(torch.float64), dim=-1).tolist()
                        candidates += [(total + value, b, v) for v, value in enumerate(lp)]
                    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
                    next_beam = []
                    for total, b, v in candidates[:beam_width]:
                        (done if v == eos_id else next_beam).append((beam[b][0] + [v], total))
                    beam = next_beam
            best_tokens, best_score = None, None
            for tokens, total in done + beam:
                score = total / len(tokens) ** length_penalty
                if best_score is None or score > best_score:
                    best_tokens, best_score = tokens, score
            return torch.tensor(best_tokens, dtype=torch.long, device=prompt.device), best_score
            """),
        # the hypotheses as tensors, candidates ranked with sorted() over (sum, beam, token)
        "flat_scores_with_lexsort": _function(BEAM, """
            if min(beam_width, max_new_tokens) < 1:
                raise ValueError(f"beam_width ({beam_width}) and max_new_tokens ({max_new_tokens}) must be >= 1")
            alive = [(prompt.new_empty(0), torch.zeros((), dtype=torch.float64))]
            ended = []
            for step in range(max_new_tokens):
                if not alive:
                    break
                batch = torch.stack([torch.cat((prompt, t)) for t, _ in alive])
                with torch.no_grad():
                    logits = model(batch)[0][:, -1, :].to(torch.float64)
                totals = torch.stack([s for _, s in alive]).to(logits.device)[:, None] + logits.log_softmax(-1)
                V = totals.shape[1]
                ranked = sorted(((float(totals[b, v]), b, v) for b in range(len(alive)) for v in range(V)),
                                key=lambda c: (-c[0], c[1], c[2]))
                survivors = []
                for value, b, v in ranked[:beam_width]:
                    tokens = torch.cat((alive[b][0], prompt.new_tensor([v])))
                    (ended if v == eos_id else survivors).append((tokens, totals[b, v]))
                alive = survivors
            pool = ended + alive
            scores = [float(s) / len(t) ** length_penalty for t, s in pool]
            i = scores.index(max(scores))
            return pool[i][0], scores[i]
            """),
    },
    "generate": {
        # a list of columns, the cache kept under another name, the extra call after the last token made
        "columns_and_extra_call": _function(GENERATE, """
            columns = [prompt]
            with torch.inference_mode():
                logits, cache = model(prompt)
                for _ in range(max_new_tokens):
                    token = sample_next_token(logits[:, -1, :], temperature=temperature, top_k=top_k, top_p=top_p,
                                              generator=generator)
                    columns.append(token.unsqueeze(1))
                    if use_cache:
                        logits, cache = model(token.unsqueeze(1), past_kv=cache)
                    else:
                        logits, _ = model(torch.cat(columns, dim=1))
            return torch.cat(columns, dim=1)
            """),
        # the model put in eval mode and back, the device read from its parameters
        "eval_mode_and_parameter_device": _function(GENERATE, """
            was_training = model.training
            model.eval()
            device = next(model.parameters()).device
            tokens = prompt.to(device)
            try:
                with torch.no_grad():
                    logits, past_kv = model(tokens)
                    for step in range(max_new_tokens):
                        choice = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)[:, None]
                        tokens = torch.cat([tokens, choice], dim=1)
                        if step < max_new_tokens - 1 and use_cache:
                            logits, past_kv = model(choice, past_kv=past_kv)
                        elif step < max_new_tokens - 1:
                            logits = model(tokens)[0]
            finally:
                model.train(was_training)
            return tokens.to(prompt.device)
            """),
        "preallocated_output": _function(GENERATE, """
            B, P = prompt.shape
            out = torch.empty(B, P + max_new_tokens, dtype=torch.long, device=prompt.device)
            out[:, :P] = prompt
            past = None
            with torch.no_grad():
                for t in range(P, P + max_new_tokens):
                    if use_cache:
                        logits, past = model(out[:, :t] if past is None else out[:, t - 1:t], past_kv=past)
                    else:
                        logits = model(out[:, :t])[0]
                    out[:, t] = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)
            return out
            """),
    },
    **{name: {"upper_case": right_choice(ASSIGNMENT, name, " {upper} ")}
       for name in ("answer_prenorm", "answer_kv_cache", "answer_top_p")},
}
