"""Mutants of chapter 10 (what attention learns).

``WRONG``: plausible mistakes, each must fail at least one graded test cell (every one fails a
unit test before the training cells run).
``CORRECT``: differently written right answers (complex numbers, rotation matrices, einsum,
loops...), each must pass every test.

The wrong ones are the solution cell with one change (:func:`_changed`), so that each stays the
course's answer but for its mistake.
"""

from functools import partial

from mutant_source import changed, right_choice, solution_cell, wrong_choices

ASSIGNMENT = "ch10_what_attention_learns"
_solution = partial(solution_cell, ASSIGNMENT)
_changed = partial(changed, ASSIGNMENT)


# ----------------------------------------------------------------------------- rotary_angles

_ANGLES_WRONG = {
    "theta_with_minus_i_over_d": _changed("rotary_angles", "theta = base ** (-2 * i / d_head)", "theta = base ** (-i / d_head)"),
    "angles_in_float32": _changed("rotary_angles", "dtype=torch.float64", "dtype=torch.float32",
                                  "positions.to(torch.float64)", "positions.to(torch.float32)"),
    "theta_counted_from_one": _changed("rotary_angles", "torch.arange(d_head // 2,", "1 + torch.arange(d_head // 2,"),
    "odd_d_head_accepted": _changed("rotary_angles", "if d_head < 2 or d_head % 2:", "if d_head < 2:"),
}

# ----------------------------------------------------------------------------- apply_rotary

_ROTATED = "torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)"

_ROTARY_WRONG = {
    "halves_pairing": _changed(
        "apply_rotary", "even, odd = x[..., 0::2], x[..., 1::2]", "half = x.shape[-1] // 2\n    even, odd = x[..., :half], x[..., half:]",
        _ROTATED, "torch.cat([even * cos - odd * sin, even * sin + odd * cos], dim=-1)"),
    "turned_by_minus_the_angle": _changed("apply_rotary", _ROTATED,
                                          "torch.stack([even * cos + odd * sin, -even * sin + odd * cos], dim=-1).flatten(-2)"),
    "base_ignored": _changed("apply_rotary", "rotary_angles(positions.to(x.device), x.shape[-1], base)",
                             "rotary_angles(positions.to(x.device), x.shape[-1])"),
    "cos_and_sin_of_float32_angles": _changed("apply_rotary", "cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)",
                                              "angles = angles.to(x.dtype)\n    cos, sin = angles.cos(), angles.sin()"),
    "rotated_halves_concatenated_not_interleaved": _changed(
        "apply_rotary", _ROTATED, "torch.cat([even * cos - odd * sin, even * sin + odd * cos], dim=-1)"),
}

# ----------------------------------------------------------------------------- RotaryCausalSelfAttention

_ROTATE_QK = "Q, K = apply_rotary(Q, positions, self.base), apply_rotary(K, positions, self.base)"
_CAT = "K, V = torch.cat([past_kv[0], K], dim=2), torch.cat([past_kv[1], V], dim=2)"
_SCORES = "scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])"
_RETURN = "return self.W_o(merge_heads(heads)), (K, V)"
_HEAD_MASK = "heads = heads * head_mask.to(heads)[:, None, None]"

_LAYER_WRONG = {
    "values_rotated": _changed("RotaryCausalSelfAttention", _ROTATE_QK, _ROTATE_QK + "\n        V = apply_rotary(V, positions, self.base)"),
    "cached_keys_rotated_again": _changed(
        "RotaryCausalSelfAttention", _CAT,
        "K = torch.cat([apply_rotary(past_kv[0], torch.arange(P, device=X.device), self.base), K], dim=2)\n"
        "            V = torch.cat([past_kv[1], V], dim=2)"),
    "cache_stores_unrotated_keys": _changed(
        "RotaryCausalSelfAttention", _ROTATE_QK, "Q = apply_rotary(Q, positions, self.base)",
        _SCORES, "scores = Q @ apply_rotary(K, torch.arange(K.shape[2], device=X.device), self.base).transpose(-2, -1) "
                 "/ math.sqrt(Q.shape[-1])"),
    "positions_from_zero_with_a_cache": _changed("RotaryCausalSelfAttention", "torch.arange(P, P + T, device=X.device)",
                                                 "torch.arange(T, device=X.device)"),
    "given_positions_ignored": _changed("RotaryCausalSelfAttention", "        if positions is None:\n            positions",
                                        "        if True:\n            positions"),
    "no_one_over_sqrt_d_head": _changed("RotaryCausalSelfAttention", _SCORES, "scores = Q @ K.transpose(-2, -1)"),
    "mask_inverted": _changed("RotaryCausalSelfAttention", "masked_softmax(scores, attn_mask)", "masked_softmax(scores, ~attn_mask)"),
    "head_mask_applied_after_W_o": _changed(
        "RotaryCausalSelfAttention", "        if head_mask is not None:\n            " + _HEAD_MASK + "\n", "",
        _RETURN, "Y = self.W_o(merge_heads(heads))\n        if head_mask is not None:\n"
                 "            Y = (Y.unflatten(-1, (self.num_heads, -1)) * head_mask.to(Y)[:, None]).flatten(-2)\n"
                 "        return Y, (K, V)"),
    "head_mask_ignored": _changed("RotaryCausalSelfAttention", "        if head_mask is not None:\n            " + _HEAD_MASK + "\n", ""),
    "given_mask_added_to_the_causal_one": _changed(
        "RotaryCausalSelfAttention", "        if attn_mask is None:  # query i sits at P + i and may see keys 0 .. P + i\n"
                                     "            attn_mask = ",
        "        causal = torch.arange(P + T, device=X.device) <= P + torch.arange(T, device=X.device)[:, None]\n"
        "        attn_mask = causal if attn_mask is None else causal & attn_mask\n        unused = "),
    "odd_d_head_accepted": _changed("RotaryCausalSelfAttention", "if (d_model // num_heads) % 2:", "if False:"),
}

# ----------------------------------------------------------------------------- AttentionOnlyTransformer

_MODEL_WRONG = {
    "no_residual": _changed("AttentionOnlyTransformer", "x = x + layer(", "x = layer("),
    "head_mask_ignored": _changed("AttentionOnlyTransformer", "head_mask=None if head_mask is None else head_mask[l]", "head_mask=None"),
    "embedding_scaled_by_sqrt_d_model": _changed("AttentionOnlyTransformer", "x = self.embed(tokens)",
                                                 "x = self.embed(tokens) * math.sqrt(self.embed.embedding_dim)"),
    "layers_with_biases": _changed("AttentionOnlyTransformer", "RotaryCausalSelfAttention(d_model, num_heads, base, bias=False)",
                                   "RotaryCausalSelfAttention(d_model, num_heads, base)"),
    "base_not_passed_on": _changed("AttentionOnlyTransformer", "RotaryCausalSelfAttention(d_model, num_heads, base, bias=False)",
                                   "RotaryCausalSelfAttention(d_model, num_heads, bias=False)"),
}

# ----------------------------------------------------------------------------- head_scores

_HEAD_SCORES_WRONG = {
    "induction_reads_the_twin_itself": _changed("head_scores", "patterns[..., t, t - period + 1]", "patterns[..., t, t - period]"),
    "induction_reads_two_after_the_twin": _changed("head_scores", "patterns[..., t, t - period + 1]", "patterns[..., t, t - period + 2]"),
    "previous_token_over_the_wrong_diagonal": _changed("head_scores", "patterns[..., t, t - 1]", "patterns[..., t - 1, t]"),
    "previous_token_over_every_query": _changed("head_scores", "previous = patterns[..., t, t - 1].mean(dim=-1)",
                                                "previous = patterns[..., t, t - 1].sum(dim=-1) / T"),
    "induction_queries_from_period_plus_one": _changed("head_scores", "t = torch.arange(period, T,", "t = torch.arange(period + 1, T,"),
    "no_check_of_the_shapes": _changed("head_scores", "if T is None or patterns.shape[-2] != T or T != 2 * period:", "if T is None:"),
}

# ----------------------------------------------------------------------------- find_heads

_FIND_WRONG = {
    "previous_token_head_ignoring_layer_order": _changed("find_heads", "previous_token[:layer].argmax()", "previous_token.argmax()"),
    "previous_token_head_in_the_same_layer_too": _changed("find_heads", "previous_token[:layer].argmax()",
                                                          "previous_token[:layer + 1].argmax()"),
    "heads_returned_in_the_other_order": _changed("find_heads", "return (previous_layer, previous_head), (layer, head)",
                                                  "return (layer, head), (previous_layer, previous_head)"),
    "layer_and_head_from_the_wrong_divisor": _changed("find_heads", "num_heads = induction.shape[1]", "num_heads = induction.shape[0]"),
    "layer_0_accepted": _changed("find_heads", "    if layer == 0:\n", "    if layer < 0:\n"),
}

# ----------------------------------------------------------------------------- ablation_losses

_ABLATION_WRONG = {
    "the_head_kept_alone": _changed("ablation_losses", "mask = torch.ones(num_layers, num_heads, device=tokens.device)\n"
                                    "                mask[layer, head] = 0.0",
                                    "mask = torch.zeros(num_layers, num_heads, device=tokens.device)\n"
                                    "                mask[layer, head] = 1.0"),
    "loss_over_every_position": _changed(
        "ablation_losses", "losses[layer, head] = float(repeat_loss(model(tokens, head_mask=mask)[0], tokens, period))",
        "logits = model(tokens, head_mask=mask)[0]\n"
        "                losses[layer, head] = float(F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten()))"),
    "losses_in_float32": _changed("ablation_losses", "losses = torch.zeros(num_layers, num_heads, dtype=torch.float64)",
                                  "losses = torch.zeros(num_layers, num_heads)"),
    "mask_left_at_zero_for_the_next_heads": _changed(
        "ablation_losses", "        for layer in range(num_layers):\n            for head in range(num_heads):\n"
                           "                mask = torch.ones(num_layers, num_heads, device=tokens.device)\n",
        "        mask = torch.ones(num_layers, num_heads, device=tokens.device)\n"
        "        for layer in range(num_layers):\n            for head in range(num_heads):\n"),
    # the other ablation: the head's output replaced by its mean over the batch and the positions
    "mean_ablation_instead_of_zero": '''def ablation_losses(model, tokens, period):
    with torch.no_grad():
        logits, patterns = model(tokens)
        baseline = float(repeat_loss(logits, tokens, period))
        num_layers, num_heads = patterns.shape[0], patterns.shape[2]
        losses = torch.zeros(num_layers, num_heads, dtype=torch.float64)
        for layer in range(num_layers):
            for head in range(num_heads):
                W_o = model.layers[layer].W_o
                width = W_o.in_features // num_heads
                part = slice(head * width, (head + 1) * width)

                def mean_head(module, args):
                    (merged,) = args
                    merged = merged.clone()
                    merged[..., part] = merged[..., part].mean(dim=(0, 1), keepdim=True)
                    return (merged,)

                hook = W_o.register_forward_pre_hook(mean_head)
                try:
                    losses[layer, head] = float(repeat_loss(model(tokens)[0], tokens, period))
                finally:
                    hook.remove()
    return baseline, losses
''',
}

MESSAGES = {
    "apply_rotary": {"halves_pairing": "the halves", "turned_by_minus_the_angle": "minus its angle"},
    "RotaryCausalSelfAttention": {"values_rotated": "the values are rotated too", "no_one_over_sqrt_d_head": "sqrt(d_head)",
                                  "head_mask_applied_after_W_o": "instead of the heads before W_o"},
    "rotary_angles": {"theta_with_minus_i_over_d": "base^(-i / d)"},
    "head_scores": {"induction_reads_the_twin_itself": "the earlier twin itself",
                    "induction_reads_two_after_the_twin": "t - period + 2"},
}

WRONG = {
    "rotary_angles": _ANGLES_WRONG,
    "apply_rotary": _ROTARY_WRONG,
    "RotaryCausalSelfAttention": _LAYER_WRONG,
    "AttentionOnlyTransformer": _MODEL_WRONG,
    "head_scores": _HEAD_SCORES_WRONG,
    "find_heads": _FIND_WRONG,
    "ablation_losses": _ABLATION_WRONG,
    "answer_one_layer": wrong_choices(ASSIGNMENT, "answer_one_layer"),
    "answer_rotary_keeps": wrong_choices(ASSIGNMENT, "answer_rotary_keeps"),
    "answer_sudden": wrong_choices(ASSIGNMENT, "answer_sudden"),
}

# ----------------------------------------------------------------------------- correct variants

_ANGLES_OUTER = '''def rotary_angles(positions, d_head, base=10000.0):
    if d_head % 2 or d_head < 2:
        raise ValueError(f"rotary positions need an even d_head >= 2, got d_head={d_head}")
    if base <= 1:
        raise ValueError(f"the base must be > 1, got base={base}")
    inverse = 1.0 / torch.pow(torch.tensor(float(base), dtype=torch.float64, device=positions.device),
                              torch.arange(0, d_head, 2, dtype=torch.float64, device=positions.device) / d_head)
    flat = torch.outer(positions.reshape(-1).double(), inverse)
    return flat.reshape(*positions.shape, d_head // 2)
'''

_ROTARY_COMPLEX = '''def apply_rotary(x, positions, base=10000.0):
    # each pair as one complex number, turned by multiplying with e^(i phi)
    angles = rotary_angles(positions.to(x.device), x.shape[-1], base)
    turn = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)
'''

_ROTARY_MATRICES = '''def apply_rotary(x, positions, base=10000.0):
    # a 2 x 2 rotation matrix per pair and position
    angles = rotary_angles(positions.to(x.device), x.shape[-1], base)
    c, s = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    R = torch.stack([torch.stack([c, -s], dim=-1), torch.stack([s, c], dim=-1)], dim=-2)  # (..., d/2, 2, 2)
    pairs = x.unflatten(-1, (-1, 2))[..., None]  # (..., T, d/2, 2, 1)
    return (R @ pairs)[..., 0].flatten(-2)
'''

_LAYER_EINSUM = '''class RotaryCausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
        d_head = d_model // num_heads
        if d_head % 2:
            raise ValueError(f"rotary positions need an even d_head, got d_head={d_head}")
        self.h, self.d_head, self.base = num_heads, d_head, base
        self.W_qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.attention_weights = None

    def forward(self, X, attn_mask=None, past_kv=None, positions=None, head_mask=None):
        B, T, D = X.shape
        qkv = self.W_qkv(X).view(B, T, 3, self.h, self.d_head)
        Q, K, V = (qkv[:, :, i].permute(0, 2, 1, 3) for i in range(3))
        P = past_kv[0].shape[-2] if past_kv is not None else 0
        where = positions if positions is not None else P + torch.arange(T, device=X.device)
        Q = apply_rotary(Q, where, self.base)
        K = apply_rotary(K, where, self.base)
        if past_kv is not None:
            K = torch.cat((past_kv[0], K), dim=-2)
            V = torch.cat((past_kv[1], V), dim=-2)
        scores = torch.einsum("bhtd,bhsd->bhts", Q, K) * self.d_head ** -0.5
        if attn_mask is None:
            attn_mask = torch.ones(T, P + T, dtype=torch.bool, device=X.device).tril(P)
        scores = scores.masked_fill(~attn_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        weights = torch.where(attn_mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
        self.attention_weights = weights
        out = torch.einsum("bhts,bhsd->bhtd", weights, V)
        if head_mask is not None:
            out = torch.einsum("bhtd,h->bhtd", out, head_mask.to(out.dtype))
        return self.W_o(out.transpose(1, 2).reshape(B, T, D)), (K, V)
'''

_MODEL_OTHER_ORDER = '''class AttentionOnlyTransformer(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers=2, base=10000.0):
        super().__init__()
        # created in another order (the docstring allows it): other starting weights, the same model
        self.unembed = nn.Linear(d_model, vocab_size, bias=False)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(RotaryCausalSelfAttention(d_model, num_heads, base=base, bias=False))
        self.embed = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens, head_mask=None):
        stream = self.embed(tokens)
        patterns = []
        for index in range(len(self.layers)):
            out, _ = self.layers[index](stream, head_mask=head_mask[index] if head_mask is not None else None)
            stream = stream + out
            patterns.append(self.layers[index].attention_weights)
        return self.unembed(stream), torch.stack(patterns, dim=0)
'''

_SCORES_DIAGONALS = '''def head_scores(patterns, period):
    if patterns.dim() < 2 or patterns.shape[-1] != patterns.shape[-2] or patterns.shape[-1] != 2 * period:
        raise ValueError(f"expected (..., {2 * period}, {2 * period}) patterns, got {tuple(patterns.shape)}")
    previous = torch.diagonal(patterns, offset=-1, dim1=-2, dim2=-1).mean(-1)
    # the diagonal key = query - (period - 1) starts at query period - 1: drop that first entry
    induction = torch.diagonal(patterns, offset=-(period - 1), dim1=-2, dim2=-1)[..., 1:].mean(-1)
    return previous, induction
'''

_FIND_LOOPS = '''def find_heads(previous_token, induction):
    table = induction.tolist()
    _, layer, head = min((-(v), l, h) for l, row in enumerate(table) for h, v in enumerate(row))
    if layer == 0:
        raise ValueError("the induction head is in layer 0")
    below = previous_token.tolist()[:layer]
    _, p_layer, p_head = min((-v, l, h) for l, row in enumerate(below) for h, v in enumerate(row))
    return (p_layer, p_head), (layer, head)
'''

_ABLATION_EYE = '''def ablation_losses(model, tokens, period):
    with torch.no_grad():
        logits, patterns = model(tokens)
        L, H = patterns.shape[0], patterns.shape[2]
        masks = 1.0 - torch.eye(L * H, device=tokens.device).reshape(L * H, L, H)
        values = [repeat_loss(model(tokens, head_mask=m)[0], tokens, period).item() for m in masks]
        return repeat_loss(logits, tokens, period).item(), torch.tensor(values, dtype=torch.float64).reshape(L, H)
'''

CORRECT = {
    "rotary_angles": {"outer_product_and_pow": _ANGLES_OUTER},
    "apply_rotary": {"complex_numbers": _ROTARY_COMPLEX, "rotation_matrices": _ROTARY_MATRICES},
    "RotaryCausalSelfAttention": {"einsum_and_tril": _LAYER_EINSUM},
    "AttentionOnlyTransformer": {"created_in_another_order": _MODEL_OTHER_ORDER},
    "head_scores": {"diagonals": _SCORES_DIAGONALS},
    "find_heads": {"loops_over_lists": _FIND_LOOPS},
    "ablation_losses": {"masks_from_eye": _ABLATION_EYE},
    "answer_one_layer": {"upper": right_choice(ASSIGNMENT, "answer_one_layer", "{upper}")},
    "answer_rotary_keeps": {"spaces": right_choice(ASSIGNMENT, "answer_rotary_keeps", " {lower} ")},
    "answer_sudden": {"upper": right_choice(ASSIGNMENT, "answer_sudden", "{upper}")},
}
