"""Mutants of chapter 9 (attention at scale).

``WRONG``: plausible mistakes, each must fail at least one graded test cell.
``CORRECT``: differently written right answers (other loop orders, einsum, another style of
``torch.autograd.Function``...), each must pass every test.

The wrong ones are the solution cell with one change (:func:`_changed`), so that each stays the
course's answer but for its mistake.
"""

from functools import partial

from mutant_source import changed, right_choice, solution_cell, wrong_choices

ASSIGNMENT = "ch09_attention_at_scale"
_solution = partial(solution_cell, ASSIGNMENT)
_changed = partial(changed, ASSIGNMENT)


# ----------------------------------------------------------------------------- online softmax

_RESCALED = "running_sum * torch.exp(running_max - shift)"

_UPDATE_WRONG = {
    "no_rescale_when_the_max_moves": _changed("update_online_softmax", _RESCALED, "running_sum"),
    "nan_on_rows_of_minus_inf": _changed(
        "update_online_softmax",
        'shift = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)', "shift = new_max"),
    "max_over_the_wrong_axis": _changed("update_online_softmax", "block.amax(dim=-1)", "block.amax(dim=0)"),
    "sum_not_exponentiated": _changed("update_online_softmax", "torch.exp(block - shift[..., None]).sum(dim=-1)",
                                      "(block - shift[..., None]).sum(dim=-1)"),
    "block_summed_against_its_own_maximum": _changed(
        "update_online_softmax", "torch.exp(block - shift[..., None]).sum(dim=-1)",
        "torch.exp(block - block.amax(dim=-1, keepdim=True)).sum(dim=-1)"),
}

_SOFTMAX_WRONG = {
    "lse_without_the_maximum": _changed("online_softmax", "lse = running_max + torch.log(running_sum)",
                                        "lse = torch.log(running_sum)"),
    "nan_on_rows_of_minus_inf": _changed(
        "online_softmax",
        'shift = torch.where(running_max == float("-inf"), torch.zeros_like(running_max), running_max)',
        "shift = running_max"),
    # the page's exp(x - lse): m + log(l) rounds log(l) away for huge logits (issue 35)
    "probs_from_exp_x_minus_lse": _changed(
        "online_softmax", "probs = torch.exp(x - shift[..., None]) / total[..., None]",
        'probs = torch.where(lse[..., None] == float("-inf"), torch.zeros_like(x), torch.exp(x - lse[..., None]))'),
    "last_short_block_dropped": _changed("online_softmax", "range(0, x.shape[-1], block_size)",
                                         "range(0, x.shape[-1] - block_size + 1, block_size)"),
    # delegations: the whole job by another route than the names the docstring lists (issue 35)
    "the_tensor_method_logsumexp": (
        "def online_softmax(x, block_size):\n"
        "    lse = x.logsumexp(-1)\n"
        '    probs = torch.where(lse[..., None] == float("-inf"), torch.zeros_like(x), torch.exp(x - lse[..., None]))\n'
        "    return probs, lse\n"),
    "the_aten_op_through_a_name_built_at_run_time": (
        "def online_softmax(x, block_size):\n"
        '    aten = getattr(getattr(torch, "o" + chr(112) + "s"), "aten")  # torch.ops, out of the scan\'s sight\n'
        "    lse = aten.logsumexp(x, [-1])\n"
        '    probs = torch.where(lse[..., None] == float("-inf"), torch.zeros_like(x), torch.exp(x - lse[..., None]))\n'
        "    return probs, lse\n"),
    "no_maximum_subtracted": (
        "def online_softmax(x, block_size):\n"
        "    total = x.new_zeros(x.shape[:-1])\n"
        "    for start in range(0, x.shape[-1], block_size):\n"
        "        total = total + torch.exp(x[..., start:start + block_size]).sum(dim=-1)\n"
        "    return torch.exp(x) / total[..., None], torch.log(total)\n"),
}

# ----------------------------------------------------------------------------- tiled forward

_PLAIN_FORWARD = """def tiled_attention_forward(Q, K, V, block_q=64, block_k=64, causal=False):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if causal:
        future = torch.arange(K.shape[-2], device=Q.device) > torch.arange(Q.shape[-2], device=Q.device)[:, None]
        scores = scores.masked_fill(future, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    P = torch.exp(scores - m)
    ell = P.sum(dim=-1)
    return (P @ V) / ell[..., None], m[..., 0] + torch.log(ell)
"""

_FORWARD_WRONG = {
    "output_not_rescaled_when_the_max_moves": _changed("tiled_attention_forward", "A = A * rescale[..., None] + P @ V",
                                                       "A = A + P @ V"),
    "no_one_over_sqrt_d": _changed("tiled_attention_forward", "Q_i = Q[..., q0:q1, :] * scale", "Q_i = Q[..., q0:q1, :]"),
    "lse_without_the_maximum": _changed("tiled_attention_forward", "lse[..., q0:q1] = m + torch.log(ell)",
                                        "lse[..., q0:q1] = torch.log(ell)"),
    "the_whole_t_by_t_matrix": _PLAIN_FORWARD,
    "a_t_by_t_causal_mask_built_once": _changed(
        "tiled_attention_forward",
        "    O = Q.new_empty(", "    whole = torch.arange(T_k, device=Q.device) > torch.arange(T_q, device=Q.device)[:, None]\n"
                              "    O = Q.new_empty(",
        "future = torch.arange(k0, k1, device=Q.device) > torch.arange(q0, q1, device=Q.device)[:, None]",
        "future = whole[q0:q1, k0:k1]"),
    "causal_blocks_computed_and_masked_not_skipped": _changed(
        "tiled_attention_forward", "range(0, min(T_k, q1) if causal else T_k, block_k)", "range(0, T_k, block_k)",
        "if causal and k1 - 1 > q0:", "if causal:"),
    "the_diagonal_block_skipped_too": _changed(
        "tiled_attention_forward", "range(0, min(T_k, q1) if causal else T_k, block_k)",
        "range(0, min(T_k, q0) if causal else T_k, block_k)"),
    "causal_aligned_bottom_right": _changed(
        "tiled_attention_forward",
        "    for q0 in range(0, T_q, block_q):", "    shift = T_k - T_q\n    for q0 in range(0, T_q, block_q):",
        "range(0, min(T_k, q1) if causal else T_k, block_k)", "range(0, min(T_k, q1 + shift) if causal else T_k, block_k)",
        "if causal and k1 - 1 > q0:", "if causal and k1 - 1 > q0 + shift:",
        "torch.arange(q0, q1, device=Q.device)[:, None]", "torch.arange(q0 + shift, q1 + shift, device=Q.device)[:, None]"),
    "the_last_short_query_block_dropped": _changed("tiled_attention_forward", "for q0 in range(0, T_q, block_q):",
                                                   "for q0 in range(0, T_q - block_q + 1, block_q):"),
    # PyTorch's own CPU FlashAttention kernel, the one the hidden tests compare with (issue 35)
    "pytorchs_cpu_flash_kernel": (
        "def tiled_attention_forward(Q, K, V, block_q=64, block_k=64, causal=False):\n"
        "    d, d_v = Q.shape[-1], V.shape[-1]\n"
        "    width = max(d, d_v)  # the kernel wants one head size: zeros change neither Q K^T nor O[..., :d_v]\n"
        "    q, k, v = (F.pad(x, (0, width - x.shape[-1])).reshape(-1, 1, x.shape[-2], width) for x in (Q, K, V))\n"
        "    O, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=d ** -0.5)[:2]\n"
        "    return O[..., :d_v].reshape(*Q.shape[:-1], d_v), lse.reshape(Q.shape[:-1])\n"),
}

# ----------------------------------------------------------------------------- tiled backward

_BACKWARD_WRONG = {
    "weights_normalised_per_tile_ignoring_lse": _changed(
        "tiled_attention_backward", "P = torch.exp(S - lse[..., q0:q1, None])",
        "P = torch.exp(S - S.amax(dim=-1, keepdim=True))\n"
        "            P = P / P.sum(dim=-1, keepdim=True)"),
    "no_D_term": _changed("tiled_attention_backward", "dS = P * (dO_i @ V_j.transpose(-2, -1) - D[..., q0:q1, None])",
                          "dS = P * (dO_i @ V_j.transpose(-2, -1))"),
    "dK_without_the_scale": _changed("tiled_attention_backward", "@ Q[..., q0:q1, :] * scale", "@ Q[..., q0:q1, :]"),
    "dV_overwritten_not_summed": _changed("tiled_attention_backward", "dV[..., k0:k1, :] += P.transpose(-2, -1) @ dO_i",
                                          "dV[..., k0:k1, :] = P.transpose(-2, -1) @ dO_i"),
    "causal_blocks_computed_and_masked_not_skipped": _changed(
        "tiled_attention_backward", "range((k0 // block_q) * block_q if causal else 0, T_q, block_q)", "range(0, T_q, block_q)",
        "if causal and k1 - 1 > q0:", "if causal:"),
    "the_diagonal_query_block_skipped": _changed("tiled_attention_backward", "range((k0 // block_q) * block_q if causal else 0, T_q, block_q)",
                                                 "range((k0 // block_q + 1) * block_q if causal else 0, T_q, block_q)"),
    "the_whole_t_by_t_weights": (
        "def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):\n"
        "    scale = 1.0 / math.sqrt(Q.shape[-1])\n"
        "    S = Q @ K.transpose(-2, -1) * scale\n"
        "    if causal:\n"
        "        S = S.masked_fill(torch.arange(K.shape[-2]) > torch.arange(Q.shape[-2])[:, None], float('-inf'))\n"
        "    P = torch.exp(S - lse[..., None])\n"
        "    dS = P * (dO @ V.transpose(-2, -1) - (dO * O).sum(-1, keepdim=True))\n"
        "    return dS @ K * scale, dS.transpose(-2, -1) @ Q * scale, P.transpose(-2, -1) @ dO\n"),
    # delegations (issue 35): PyTorch's flash backward kernel, and autograd by routes the list does not name
    "pytorchs_cpu_flash_backward_kernel": (
        "def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):\n"
        "    d, d_v = Q.shape[-1], V.shape[-1]\n"
        "    width = max(d, d_v)\n"
        "    q, k, v, o, do = (F.pad(x, (0, width - x.shape[-1])).reshape(-1, 1, x.shape[-2], width) for x in (Q, K, V, O, dO))\n"
        "    grads = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(\n"
        "        do, q, k, v, o, lse.reshape(-1, 1, lse.shape[-1]), 0.0, causal, scale=d ** -0.5)\n"
        "    return tuple(g[..., :x.shape[-1]].reshape(x.shape) for g, x in zip(grads, (Q, K, V)))\n"),
    "torch_autograd_backward_through_the_formula": (
        "def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):\n"
        "    leaves = [x.detach().requires_grad_(True) for x in (Q, K, V)]\n"
        "    with torch.enable_grad():\n"
        "        S = leaves[0] @ leaves[1].transpose(-2, -1) / math.sqrt(Q.shape[-1])\n"
        "        if causal:\n"
        "            future = torch.arange(K.shape[-2], device=Q.device) > torch.arange(Q.shape[-2], device=Q.device)[:, None]\n"
        "            S = S.masked_fill(future, float('-inf'))\n"
        "        P = torch.exp(S - S.amax(-1, keepdim=True))\n"
        "        torch.autograd.backward([(P / P.sum(-1, keepdim=True)) @ leaves[2]], [dO])\n"
        "    return tuple(leaf.grad for leaf in leaves)\n"),
    "torch_func_vjp_of_the_formula": (
        "def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):\n"
        "    def formula(q, k, v):\n"
        "        S = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
        "        if causal:\n"
        "            future = torch.arange(k.shape[-2], device=q.device) > torch.arange(q.shape[-2], device=q.device)[:, None]\n"
        "            S = S.masked_fill(future, float('-inf'))\n"
        "        P = torch.exp(S - S.amax(-1, keepdim=True))\n"
        "        return (P / P.sum(-1, keepdim=True)) @ v\n"
        "    with torch.enable_grad():\n"
        "        return torch.func.vjp(formula, Q, K, V)[1](dO)\n"),
}

# ----------------------------------------------------------------------------- TiledAttention

_FUNCTION_WRONG = {
    "backward_returns_three_gradients": _changed("TiledAttention", "return dQ, dK, dV, None, None, None", "return dQ, dK, dV"),
    "dK_and_dV_swapped": _changed("TiledAttention", "return dQ, dK, dV, None, None, None", "return dQ, dV, dK, None, None, None"),
    "backward_forgets_causal": _changed("TiledAttention", "dQ, dK, dV = tiled_attention_backward(*ctx.saved_tensors, dO, *ctx.tiles)",
                                        "dQ, dK, dV = tiled_attention_backward(*ctx.saved_tensors, dO, *ctx.tiles[:2])"),
    "saves_the_weights": _changed(
        "TiledAttention", "ctx.save_for_backward(Q, K, V, O, lse)",
        "weights = torch.exp(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]) - lse[..., None])\n"
        "        ctx.save_for_backward(Q, K, V, O, lse, weights)",
        "tiled_attention_backward(*ctx.saved_tensors, dO", "tiled_attention_backward(*ctx.saved_tensors[:5], dO"),
    # PyTorch's flash kernels through torch.ops found at run time: no name the scan can read (issue 35)
    "pytorchs_flash_kernels_through_a_name_built_at_run_time": (
        "class TiledAttention(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, Q, K, V, causal=False, block_q=64, block_k=64):\n"
        '        aten = getattr(getattr(torch, "o" + chr(112) + "s"), "aten")\n'
        "        width = max(Q.shape[-1], V.shape[-1])\n"
        "        q, k, v = (F.pad(x, (0, width - x.shape[-1])).reshape(-1, 1, x.shape[-2], width) for x in (Q, K, V))\n"
        "        O, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=Q.shape[-1] ** -0.5)[:2]\n"
        "        ctx.save_for_backward(q, k, v, O, lse)\n"
        "        ctx.causal, ctx.shapes, ctx.scale = causal, (Q.shape, K.shape, V.shape), Q.shape[-1] ** -0.5\n"
        "        return O[..., :V.shape[-1]].reshape(*Q.shape[:-1], V.shape[-1])\n"
        "\n"
        "    @staticmethod\n"
        "    def backward(ctx, dO):\n"
        '        aten = getattr(getattr(torch, "o" + chr(112) + "s"), "aten")\n'
        "        q, k, v, O, lse = ctx.saved_tensors\n"
        "        do = F.pad(dO, (0, O.shape[-1] - dO.shape[-1])).reshape(O.shape)\n"
        "        grads = aten._scaled_dot_product_flash_attention_for_cpu_backward(do, q, k, v, O, lse, 0.0, ctx.causal,\n"
        "                                                                          scale=ctx.scale)\n"
        "        return (*(g[..., :s[-1]].reshape(s) for g, s in zip(grads, ctx.shapes)), None, None, None)\n"),
}

# ----------------------------------------------------------------------------- GroupedQueryAttention

_GQA_WRONG = {
    "head_i_uses_kv_head_i_mod_g": _changed(
        "GroupedQueryAttention", "K_all, V_all = K.repeat_interleave(group, dim=1), V.repeat_interleave(group, dim=1)",
        "K_all, V_all = K.repeat(1, group, 1, 1), V.repeat(1, group, 1, 1)"),
    "values_before_keys": _changed("GroupedQueryAttention", "K, V = (split_heads(M, self.num_kv_heads) for M in self.W_kv(X).chunk(2, dim=-1))",
                                   "V, K = (split_heads(M, self.num_kv_heads) for M in self.W_kv(X).chunk(2, dim=-1))"),
    "scaled_by_sqrt_d_model": _changed("GroupedQueryAttention", "/ math.sqrt(Q.shape[-1])", "/ math.sqrt(X.shape[-1])"),
    "cache_not_shrunk": _changed("GroupedQueryAttention", "@ V_all)), (K, V)", "@ V_all)), (K_all, V_all)"),
    "no_error_when_kv_heads_do_not_divide": _changed(
        "GroupedQueryAttention",
        '        if num_kv_heads < 1 or num_heads % num_kv_heads != 0:\n'
        '            raise ValueError(f"num_kv_heads = {num_kv_heads} does not divide num_heads = {num_heads}")\n', ""),
    "mask_ignores_the_cached_positions": _changed(
        "GroupedQueryAttention",
        "mask = torch.arange(P + T, device=X.device) <= P + torch.arange(T, device=X.device)[:, None]",
        "mask = torch.arange(P + T, device=X.device) <= torch.arange(T, device=X.device)[:, None]"),
    # dropout in training mode (issue 35): attention_weights kept after it, or dropout on the output
    "attention_weights_after_dropout": _changed(
        "GroupedQueryAttention", "self.attention_weights = masked_softmax(scores, mask)",
        "self.attention_weights = self.dropout(masked_softmax(scores, mask))",
        "merge_heads(self.dropout(self.attention_weights) @ V_all)", "merge_heads(self.attention_weights @ V_all)"),
    "dropout_on_the_output": _changed(
        "GroupedQueryAttention", "return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V_all)), (K, V)",
        "return self.dropout(self.W_o(merge_heads(self.attention_weights @ V_all))), (K, V)"),
    # the fused attention through torch._C (issue 35); the weights still computed for attention_weights
    "the_fused_attention_through_torch_C": _changed(
        "GroupedQueryAttention",
        "return self.W_o(merge_heads(self.dropout(self.attention_weights) @ V_all)), (K, V)",
        "O = torch._C._nn.scaled_dot_product_attention(Q, K_all, V_all, attn_mask=mask,\n"
        "                                                      dropout_p=self.dropout.p if self.training else 0.0)\n"
        "        return self.W_o(merge_heads(O)), (K, V)"),
}

# ----------------------------------------------------------------------------- sliding window

_MASK_WRONG = {
    "window_one_too_wide": _changed("sliding_window_mask", "(offset < window)", "(offset <= window)"),
    "not_causal": _changed("sliding_window_mask", "return (offset >= 0) & (offset < window)", "return offset.abs() < window"),
}

_KEEP = "keep = max(0, present[0][0].shape[2] - (window - 1))"

_GENERATE_WRONG = {
    "rereads_the_last_w_tokens": (
        "def generate_with_window(model, prompt, max_new_tokens, window):\n"
        "    tokens, chosen = prompt, []\n"
        "    with torch.no_grad():\n"
        "        for _ in range(max_new_tokens):\n"
        "            start = max(0, tokens.shape[1] - window)\n"
        "            T = tokens.shape[1] - start\n"
        "            logits, _ = model(tokens[:, start:], attn_mask=sliding_window_mask(T, window, prompt.device),\n"
        "                              positions=torch.arange(start, start + T, device=prompt.device))\n"
        "            chosen.append(logits[:, -1])\n"
        "            tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)\n"
        "    return tokens, torch.stack(chosen, dim=1)\n"),
    "cache_keeps_w_positions": _changed("generate_with_window", _KEEP, "keep = max(0, present[0][0].shape[2] - window)"),
    "cache_drops_a_position": _changed("generate_with_window", _KEEP, "keep = max(0, present[0][0].shape[2] - (window - 2))"),
    "cache_never_shrunk_masked_instead": _changed(
        "generate_with_window", _KEEP, "keep = 0",
        "mask = torch.ones(1, past[0][0].shape[2] + 1, dtype=torch.bool, device=device)",
        "mask = sliding_window_mask(t + 1, window, device)[-1:]"),
    "negative_slice_keeps_everything_for_w_1": _changed(
        "generate_with_window", _KEEP + "\n            past = [(K[:, :, keep:], V[:, :, keep:]) for K, V in present]",
        "past = [(K[:, :, -(window - 1):], V[:, :, -(window - 1):]) for K, V in present]"),
    "positions_left_to_the_model": _changed("generate_with_window", ", positions=torch.tensor([t], device=device))", ")"),
    "an_extra_call_after_the_last_token": _changed(
        "generate_with_window", "            if step == max_new_tokens - 1:\n                break\n", ""),
    "prompt_read_without_the_window": _changed(
        "generate_with_window", "model(prompt, attn_mask=sliding_window_mask(prompt.shape[1], window, device))", "model(prompt)"),
}

# every delegation's first failing test says the exercise earns no points, in words
_DELEGATIONS = {exercise: {label: "earns no points" for label in labels} for exercise, labels in {
    "online_softmax": ("the_tensor_method_logsumexp", "the_aten_op_through_a_name_built_at_run_time"),
    "tiled_attention_forward": ("pytorchs_cpu_flash_kernel",),
    "tiled_attention_backward": ("pytorchs_cpu_flash_backward_kernel", "torch_autograd_backward_through_the_formula",
                                 "torch_func_vjp_of_the_formula"),
    "TiledAttention": ("pytorchs_flash_kernels_through_a_name_built_at_run_time",),
    "GroupedQueryAttention": ("the_fused_attention_through_torch_C",),
}.items()}

MESSAGES = {
    **_DELEGATIONS,
    "update_online_softmax": {"block_summed_against_its_own_maximum": "summed against its own maximum"},
    "tiled_attention_backward": {**_DELEGATIONS["tiled_attention_backward"],
                                 "causal_blocks_computed_and_masked_not_skipped": "skip them, never compute them"},
    "online_softmax": {**_DELEGATIONS["online_softmax"], "probs_from_exp_x_minus_lse": "divide exp(x - m) by l"},
    "GroupedQueryAttention": {**_DELEGATIONS["GroupedQueryAttention"],
                              "attention_weights_after_dropout": "attention_weights in training mode (before dropout)",
                              "dropout_on_the_output": "dropout acts on the weights, not on the output"},
    "generate_with_window": {"an_extra_call_after_the_last_token": "the last token needs no call",
                             "cache_keeps_w_positions": "one too many"},
}

WRONG = {
    "update_online_softmax": _UPDATE_WRONG,
    "online_softmax": _SOFTMAX_WRONG,
    "tiled_attention_forward": _FORWARD_WRONG,
    "tiled_attention_backward": _BACKWARD_WRONG,
    "TiledAttention": _FUNCTION_WRONG,
    "GroupedQueryAttention": _GQA_WRONG,
    "sliding_window_mask": _MASK_WRONG,
    "generate_with_window": _GENERATE_WRONG,
    "answer_online_exact": wrong_choices(ASSIGNMENT, "answer_online_exact"),
    "answer_gqa": wrong_choices(ASSIGNMENT, "answer_gqa"),
    "answer_window_reach": wrong_choices(ASSIGNMENT, "answer_window_reach"),
}

# ----------------------------------------------------------------------------- correct variants

_FORWARD_KEYS_OUTSIDE = '''def tiled_attention_forward(Q, K, V, block_q=64, block_k=64, causal=False):
    # FlashAttention-1's order: key blocks outside, every query block's running state kept
    T_q, T_k = Q.shape[-2], K.shape[-2]
    m = Q.new_full(Q.shape[:-1], float("-inf"))
    ell = Q.new_zeros(Q.shape[:-1])
    A = Q.new_zeros(*Q.shape[:-1], V.shape[-1])
    for k0 in range(0, T_k, block_k):
        k1 = min(k0 + block_k, T_k)
        first = (k0 // block_q) * block_q if causal else 0
        for q0 in range(first, T_q, block_q):
            q1 = min(q0 + block_q, T_q)
            if causal and k0 >= q1:  # this key block is in the future of the whole query block
                continue
            S = torch.einsum("...qd,...kd->...qk", Q[..., q0:q1, :], K[..., k0:k1, :]) / math.sqrt(Q.shape[-1])
            if causal:
                S = S.masked_fill(torch.arange(k0, k1, device=Q.device) > torch.arange(q0, q1, device=Q.device)[:, None],
                                  float("-inf"))
            m_old = m[..., q0:q1]
            m_new = torch.maximum(m_old, S.amax(dim=-1))
            safe = m_new.clamp_min(torch.finfo(Q.dtype).min)  # a row with no key yet in this tile
            P = torch.exp(S - safe[..., None])
            alpha = torch.exp(m_old - safe)
            ell[..., q0:q1] = ell[..., q0:q1] * alpha + P.sum(dim=-1)
            A[..., q0:q1, :] = A[..., q0:q1, :] * alpha[..., None] + torch.einsum("...qk,...kv->...qv", P, V[..., k0:k1, :])
            m[..., q0:q1] = m_new
    return A / ell[..., None], m + ell.log()
'''

_BACKWARD_QUERIES_OUTSIDE = '''def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):
    # query blocks outside: dQ_i finished in one go, dK and dV summed across the outer loop
    scale = Q.shape[-1] ** -0.5
    D = torch.einsum("...qv,...qv->...q", dO, O)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for q0 in range(0, Q.shape[-2], block_q):
        q1 = min(q0 + block_q, Q.shape[-2])
        dQ_i = torch.zeros_like(Q[..., q0:q1, :])
        for k0 in range(0, min(K.shape[-2], q1) if causal else K.shape[-2], block_k):
            k1 = min(k0 + block_k, K.shape[-2])
            S = torch.matmul(Q[..., q0:q1, :], K[..., k0:k1, :].mT) * scale
            if causal:
                keep = torch.arange(k0, k1, device=Q.device) <= torch.arange(q0, q1, device=Q.device)[:, None]
                S = torch.where(keep, S, torch.tensor(float("-inf"), dtype=S.dtype, device=S.device))
            P = (S - lse[..., q0:q1].unsqueeze(-1)).exp()
            dV[..., k0:k1, :] += torch.matmul(P.mT, dO[..., q0:q1, :])
            dS = P * (torch.matmul(dO[..., q0:q1, :], V[..., k0:k1, :].mT) - D[..., q0:q1].unsqueeze(-1))
            dQ_i += torch.matmul(dS, K[..., k0:k1, :]) * scale
            dK[..., k0:k1, :] += torch.matmul(dS.mT, Q[..., q0:q1, :]) * scale
        dQ[..., q0:q1, :] = dQ_i
    return dQ, dK, dV
'''

_FUNCTION_SETUP_CONTEXT = '''class TiledAttention(torch.autograd.Function):
    """Tiled attention with its own backward pass (forward and setup_context apart)."""

    @staticmethod
    def forward(Q, K, V, causal=False, block_q=64, block_k=64):
        return tiled_attention_forward(Q, K, V, block_q, block_k, causal)

    @staticmethod
    def setup_context(ctx, inputs, output):
        Q, K, V, causal, block_q, block_k = inputs
        O, lse = output
        ctx.save_for_backward(Q, K, V, O, lse)
        ctx.mark_non_differentiable(lse)
        ctx.settings = dict(block_q=block_q, block_k=block_k, causal=causal)

    @staticmethod
    def backward(ctx, dO, dlse):
        grads = tiled_attention_backward(*ctx.saved_tensors, dO, **ctx.settings)
        return tuple(g if need else None for g, need in zip(grads, ctx.needs_input_grad)) + (None, None, None)

    @classmethod
    def apply(cls, *args):
        return super().apply(*args)[0]
'''

_GQA_GROUPED_EINSUM = '''class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads or num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"need num_heads = {num_heads} dividing d_model = {d_model} and num_kv_heads = "
                             f"{num_kv_heads} dividing num_heads")
        self.h, self.h_kv, self.d_head = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_kv = nn.Linear(d_model, 2 * num_kv_heads * self.d_head, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, X, padding_mask=None, past_kv=None):
        B, T, D = X.shape
        g = self.h // self.h_kv
        # (B, h_kv, g, T, d_head): the g query heads of each group side by side, no repeated keys
        Q = self.W_q(X).view(B, T, self.h_kv, g, self.d_head).permute(0, 2, 3, 1, 4)
        kv = self.W_kv(X).view(B, T, 2, self.h_kv, self.d_head).permute(2, 0, 3, 1, 4)
        K, V = kv[0], kv[1]
        if past_kv is not None:
            K, V = torch.cat([past_kv[0], K], 2), torch.cat([past_kv[1], V], 2)
        P = K.shape[2] - T
        allowed = torch.ones(T, P + T, dtype=torch.bool, device=X.device).tril(P)
        if padding_mask is not None:
            allowed = allowed & padding_mask[:, None, None, None, :]
        scores = torch.einsum("bkgtd,bksd->bkgts", Q, K) * self.d_head ** -0.5
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        weights = torch.where(allowed.any(-1, keepdim=True), weights, torch.zeros_like(weights))
        self.attention_weights = weights.reshape(B, self.h, T, P + T)
        out = torch.einsum("bkgts,bksd->btkgd", self.drop(weights), V).reshape(B, T, D)
        return self.W_o(out), (K, V)
'''

_MASK_TRIANGLES = '''def sliding_window_mask(size, window, device=None):
    if window < 1:
        raise ValueError(f"window = {window}: a window holds at least one position")
    ones = torch.ones(size, size, dtype=torch.bool, device=device)
    return ones.tril() & ~ones.tril(-window)
'''

_GENERATE_NARROW = '''def generate_with_window(model, prompt, max_new_tokens, window):
    new_tokens, rows = [], []
    logits, cache = model(prompt, attn_mask=sliding_window_mask(prompt.shape[1], window, prompt.device))
    position = prompt.shape[1]
    while True:
        rows.append(logits[:, -1].detach())
        new_tokens.append(rows[-1].argmax(-1))
        if len(new_tokens) == max_new_tokens:
            return torch.cat([prompt, torch.stack(new_tokens, 1)], 1), torch.stack(rows, 1)
        kept = min(position, window - 1)
        cache = [(K.narrow(2, K.shape[2] - kept, kept), V.narrow(2, V.shape[2] - kept, kept)) for K, V in cache]
        # one new token after the kept positions: the model's default causal mask lets it see all of them
        logits, cache = model(new_tokens[-1][:, None], past_kv=cache,
                              positions=torch.full((1,), position, dtype=torch.long, device=prompt.device))
        position += 1
'''

_UPDATE_NAN_TO_NUM = '''def update_online_softmax(running_max, running_sum, block):
    new_max = torch.max(running_max, torch.max(block, dim=-1).values)
    # exp(-inf - (-inf)) is NaN exactly where a row has seen only -inf: its sum is 0 there
    old = torch.nan_to_num(torch.exp(running_max - new_max), nan=0.0)
    new = torch.nan_to_num(torch.exp(block - new_max.unsqueeze(-1)), nan=0.0).sum(-1)
    return new_max, running_sum * old + new
'''

_SOFTMAX_DIVIDED = '''def online_softmax(x, block_size):
    state = (torch.full_like(x[..., 0], float("-inf")), torch.zeros_like(x[..., 0]))
    for block in torch.split(x, block_size, dim=-1):
        state = update_online_softmax(*state, block)
    m, s = state
    empty = s == 0
    safe_m = torch.where(empty, torch.zeros_like(m), m)
    probs = torch.exp(x - safe_m[..., None]) / torch.where(empty, torch.ones_like(s), s)[..., None]
    return probs, torch.where(empty, m, m + torch.log(s))
'''

# in log space: log(l') is the log-sum-exp of m - m' + log(l) and the block's entries less m'; the docstring
# forbids nothing here, so torch.logsumexp is a building block of this exercise though online_softmax, which
# calls it, may not call it itself (issue 44: the call is update_online_softmax's, the innermost exercise's)
_UPDATE_LOG_SPACE = '''def update_online_softmax(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
    terms = torch.cat([(running_max - shift + torch.log(running_sum))[..., None], block - shift[..., None]], dim=-1)
    return new_max, torch.exp(torch.logsumexp(terms, dim=-1))
'''

# a helper function of the learner's own for the first pass, plain loops over the blocks for both
_SOFTMAX_HELPER_AND_LOOPS = '''def _max_and_sum(x, block_size):
    """The running maximum and sum of exp(x - maximum) of each row, block by block."""
    m = x.new_full(x.shape[:-1], float("-inf"))
    s = x.new_zeros(x.shape[:-1])
    start = 0
    while start < x.shape[-1]:
        m, s = update_online_softmax(m, s, x[..., start:start + block_size])
        start += block_size
    return m, s


def online_softmax(x, block_size):
    m, s = _max_and_sum(x, block_size)
    seen = m > float("-inf")
    shift = torch.where(seen, m, torch.zeros_like(m))
    total = torch.where(seen, s, torch.ones_like(s))
    probs = torch.empty_like(x)
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]
        probs[..., start:start + block_size] = torch.exp(block - shift[..., None]) / total[..., None]
    return probs, m + torch.log(s)
'''

# einsum for every product, the tile's weights from a helper function of the learner's own
_BACKWARD_EINSUM_HELPER = '''def _tile_weights(Q_i, K_j, lse_i, q0, k0, causal):
    """exp(S - lse) of one tile, S = Q_i K_j^T / sqrt(d), the future keys masked when causal."""
    S = torch.einsum("...qd,...kd->...qk", Q_i, K_j) / math.sqrt(Q_i.shape[-1])
    if causal:
        rows = torch.arange(q0, q0 + Q_i.shape[-2], device=Q_i.device)[:, None]
        cols = torch.arange(k0, k0 + K_j.shape[-2], device=Q_i.device)
        S = S.masked_fill(cols > rows, float("-inf"))
    return torch.exp(S - lse_i[..., None])


def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):
    scale = 1.0 / math.sqrt(Q.shape[-1])
    D = torch.einsum("...qv,...qv->...q", dO, O)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for k0 in range(0, K.shape[-2], block_k):
        k1 = min(k0 + block_k, K.shape[-2])
        for q0 in range(0, Q.shape[-2], block_q):
            q1 = min(q0 + block_q, Q.shape[-2])
            if causal and k0 > q1 - 1:
                continue
            P = _tile_weights(Q[..., q0:q1, :], K[..., k0:k1, :], lse[..., q0:q1], q0, k0, causal)
            dV[..., k0:k1, :] += torch.einsum("...qk,...qv->...kv", P, dO[..., q0:q1, :])
            dS = P * (torch.einsum("...qv,...kv->...qk", dO[..., q0:q1, :], V[..., k0:k1, :]) - D[..., q0:q1, None])
            dQ[..., q0:q1, :] += torch.einsum("...qk,...kd->...qd", dS, K[..., k0:k1, :]) * scale
            dK[..., k0:k1, :] += torch.einsum("...qk,...qd->...kd", dS, Q[..., q0:q1, :]) * scale
    return dQ, dK, dV
'''

CORRECT = {
    "update_online_softmax": {"nan_to_num": _UPDATE_NAN_TO_NUM, "log_space_with_torch_logsumexp": _UPDATE_LOG_SPACE},
    "online_softmax": {"split_and_divide": _SOFTMAX_DIVIDED, "a_helper_of_its_own_and_loops": _SOFTMAX_HELPER_AND_LOOPS},
    "tiled_attention_forward": {"key_blocks_outside_einsum": _FORWARD_KEYS_OUTSIDE},
    "tiled_attention_backward": {"query_blocks_outside_matmul": _BACKWARD_QUERIES_OUTSIDE,
                                 "einsum_and_a_helper_of_its_own": _BACKWARD_EINSUM_HELPER},
    "TiledAttention": {"setup_context_and_needs_input_grad": _FUNCTION_SETUP_CONTEXT},
    "GroupedQueryAttention": {"grouped_einsum_no_repeat": _GQA_GROUPED_EINSUM},
    "sliding_window_mask": {"two_triangles": _MASK_TRIANGLES},
    "generate_with_window": {"narrow_and_default_mask": _GENERATE_NARROW},
    "answer_online_exact": {"upper": right_choice(ASSIGNMENT, "answer_online_exact", "{upper}")},
    "answer_gqa": {"spaces": right_choice(ASSIGNMENT, "answer_gqa", " {lower} ")},
    "answer_window_reach": {"upper": right_choice(ASSIGNMENT, "answer_window_reach", "{upper}")},
}
