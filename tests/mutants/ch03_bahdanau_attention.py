"""Mutants of chapter 3 (Bahdanau attention).

``WRONG``: plausible mistakes, each must fail at least one graded test cell (most fail a
fast unit test before the training cell runs).
``CORRECT``: differently written right answers, each must pass every test, the
training included.
"""

from mutant_source import class_cell as _class
from mutant_source import function_cell as _function
from mutant_source import replaced as _replaced


_INIT = """
self.embedding = nn.Embedding(vocab_size, embed_size)
self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout, batch_first=True)
self.dense = nn.Linear(num_hiddens, vocab_size)
self.attention_weights = None
"""

_INIT_STATE = "return enc_outputs, enc_hidden, src_mask"

_FORWARD = """
enc_outputs, hidden, src_mask = state
embedded = self.embedding(tgt_in)
mask = src_mask[:, None, :]
outputs, weights = [], []
for t in range(tgt_in.shape[1]):
    query = hidden[-1].unsqueeze(1)
    context = self.attention(query, enc_outputs, enc_outputs, mask)
    weights.append(self.attention.attention_weights)
    output, hidden = self.rnn(torch.cat([embedded[:, t:t + 1], context], dim=-1), hidden)
    outputs.append(output)
self.attention_weights = torch.cat(weights, dim=1)
return self.dense(torch.cat(outputs, dim=1)), (enc_outputs, hidden, src_mask)
"""


def _decoder(init: str = _INIT, init_state: str = _INIT_STATE, forward: str = _FORWARD) -> str:
    return _class(
        "BahdanauDecoder",
        "def __init__(self, vocab_size, embed_size, num_hiddens, num_layers=1, dropout=0.0):",
        init,
        {"def init_state(self, enc_outputs, enc_hidden, src_mask):": init_state, "def forward(self, tgt_in, state):": forward},
    )


def _forward_with(old: str, new: str) -> str:
    return _decoder(forward=_replaced(_FORWARD, old, new))


LOSS = "def sequence_loss(logits, labels, pad_id):"
GREEDY = "def greedy_decode(model, src, src_mask, bos_id, eos_id, pad_id, max_len):"

_GREEDY_BODY = """
model.eval()
with torch.no_grad():
    enc_outputs, enc_hidden = model.encoder(src, src_mask)
    state = model.decoder.init_state(enc_outputs, enc_hidden, src_mask)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    produced = []
    for _ in range(max_len):
        logits, state = model.decoder(tokens, state)
        tokens = logits[:, -1, :].argmax(dim=-1, keepdim=True)
        produced.append(tokens.masked_fill(done[:, None], pad_id))
        done = done | (tokens[:, 0] == eos_id)
        if done.all():
            break
    return torch.cat(produced, dim=1)
"""


def _greedy_with(old: str, new: str) -> str:
    return _function(GREEDY, _replaced(_GREEDY_BODY, old, new))


WRONG = {
    "BahdanauDecoder": {
        # the query is the state AFTER the GRU step (Luong style), not the previous one
        "query_is_current_state": _decoder(forward="""
            enc_outputs, hidden, src_mask = state
            embedded = self.embedding(tgt_in)
            outputs, weights = [], []
            context = torch.zeros_like(enc_outputs[:, :1])
            for t in range(tgt_in.shape[1]):
                output, hidden = self.rnn(torch.cat([embedded[:, t:t + 1], context], dim=-1), hidden)
                context = self.attention(output, enc_outputs, enc_outputs, src_mask[:, None, :])
                weights.append(self.attention.attention_weights)
                outputs.append(output)
            self.attention_weights = torch.cat(weights, dim=1)
            return self.dense(torch.cat(outputs, dim=1)), (enc_outputs, hidden, src_mask)
            """),
        "query_from_first_layer": _forward_with("hidden[-1].unsqueeze(1)", "hidden[0].unsqueeze(1)"),
        "mask_ignored": _forward_with("mask = src_mask[:, None, :]", "mask = None"),
        "mask_inverted": _forward_with("mask = src_mask[:, None, :]", "mask = ~src_mask[:, None, :]"),
        "values_are_the_keys_projected": _forward_with(
            "context = self.attention(query, enc_outputs, enc_outputs, mask)",
            "context = self.attention(query, enc_outputs, self.attention.W_k(enc_outputs), mask)"),
        "values_all_the_first_position": _forward_with(
            "context = self.attention(query, enc_outputs, enc_outputs, mask)",
            "context = self.attention(query, enc_outputs, enc_outputs[:, :1].expand_as(enc_outputs), mask)"),
        "context_not_fed_to_gru": _forward_with(
            "torch.cat([embedded[:, t:t + 1], context], dim=-1)",
            "torch.cat([embedded[:, t:t + 1], torch.zeros_like(context)], dim=-1)"),
        "context_first_in_concat": _forward_with(
            "torch.cat([embedded[:, t:t + 1], context], dim=-1)", "torch.cat([context, embedded[:, t:t + 1]], dim=-1)"),
        "old_state_returned": _forward_with(
            "return self.dense(torch.cat(outputs, dim=1)), (enc_outputs, hidden, src_mask)",
            "return self.dense(torch.cat(outputs, dim=1)), state"),
        "only_last_step_weights": _forward_with(
            "self.attention_weights = torch.cat(weights, dim=1)", "self.attention_weights = weights[-1]"),
        "weights_time_axis_last": _forward_with(
            "self.attention_weights = torch.cat(weights, dim=1)",
            "self.attention_weights = torch.cat(weights, dim=1).transpose(1, 2)"),
        "zero_initial_state": _decoder(init_state="return enc_outputs, torch.zeros_like(enc_hidden), src_mask"),
        "initial_state_is_mean_of_outputs": _decoder(
            init_state="return enc_outputs, enc_outputs.mean(dim=1)[None].expand_as(enc_hidden).contiguous(), src_mask"),
        "same_attention_for_every_step": _forward_with(
            "    query = hidden[-1].unsqueeze(1)\n", "    query = state[1][-1].unsqueeze(1)\n"),
        "dense_on_context": _forward_with("outputs.append(output)", "outputs.append(context)"),
        "dense_renamed_out": _decoder().replace("self.dense", "self.out"),
        # dropout in the wrong places: only a decoder in training mode with dropout > 0 shows them
        "attention_without_dropout": _decoder(init=_replaced(
            _INIT, "AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)",
            "AdditiveAttention(num_hiddens, num_hiddens, num_hiddens)")),
        "gru_without_dropout": _decoder(init=_replaced(_INIT, ", dropout=dropout, batch_first=True", ", batch_first=True")),
        "dropout_on_the_embeddings": _decoder(
            init=_INIT + "self.dropout = nn.Dropout(dropout)\n",
            forward=_replaced(_FORWARD, "embedded = self.embedding(tgt_in)", "embedded = self.dropout(self.embedding(tgt_in))")),
        "dropout_on_the_context_not_the_weights": _decoder(
            init=_replaced(_INIT, "AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)",
                           "AdditiveAttention(num_hiddens, num_hiddens, num_hiddens)") + "self.dropout = nn.Dropout(dropout)\n",
            forward=_replaced(_FORWARD, "torch.cat([embedded[:, t:t + 1], context], dim=-1)",
                              "torch.cat([embedded[:, t:t + 1], self.dropout(context)], dim=-1)")),
        "dropout_on_the_outputs": _decoder(
            init=_INIT + "self.dropout = nn.Dropout(dropout)\n",
            forward=_replaced(_FORWARD, "return self.dense(torch.cat(outputs, dim=1))",
                              "return self.dense(self.dropout(torch.cat(outputs, dim=1)))")),
    },
    "sequence_loss": {
        "mean_over_pads_too": _function(
            LOSS, "return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))"),
        "sum_not_mean": _function(
            LOSS,
            "return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), "
            "ignore_index=pad_id, reduction='sum')"),
        "pads_zeroed_but_counted": _function(LOSS, """
            losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
            return (losses * (labels.reshape(-1) != pad_id)).mean()
            """),
        "mean_of_row_means": _function(LOSS, """
            losses = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=pad_id, reduction="none")
            real = (labels != pad_id).float()
            return ((losses * real).sum(1) / real.sum(1).clamp_min(1)).mean()
            """),
        "labels_shifted_again": _function(LOSS, """
            logits, labels = logits[:, :-1], labels[:, 1:]
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=pad_id)
            """),
        "pad_id_zero_hard_coded": _function(
            LOSS, "return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=0)"),
        "softmax_twice": _function(LOSS, """
            probs = torch.softmax(logits, dim=-1)
            return F.cross_entropy(probs.reshape(-1, probs.shape[-1]), labels.reshape(-1), ignore_index=pad_id)
            """),
        "returns_float": _function(
            LOSS,
            "return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), "
            "ignore_index=pad_id).item()"),
    },
    "greedy_decode": {
        "bos_kept": _greedy_with("return torch.cat(produced, dim=1)",
                                 "return torch.cat([torch.full_like(produced[0], bos_id)] + produced, dim=1)"),
        "eos_dropped": _greedy_with("produced.append(tokens.masked_fill(done[:, None], pad_id))",
                                    "produced.append(tokens.masked_fill(done[:, None] | (tokens == eos_id), pad_id))"),
        "no_pad_after_eos": _greedy_with("produced.append(tokens.masked_fill(done[:, None], pad_id))",
                                         "produced.append(tokens)"),
        "stops_when_first_row_ends": _greedy_with("if done.all():", "if done.any():"),
        "stops_when_row_0_ends": _greedy_with("if done.all():", "if done[0]:"),
        "bos_fed_at_every_step": _greedy_with("logits, state = model.decoder(tokens, state)",
                                              "logits, state = model.decoder(torch.full_like(tokens, bos_id), state)"),
        "state_not_kept": _greedy_with("logits, state = model.decoder(tokens, state)",
                                       "logits, _ = model.decoder(tokens, state)"),
        "one_token_too_many": _greedy_with("for _ in range(max_len):", "for _ in range(max_len + 1):"),
        "eos_hard_coded": _greedy_with("done = done | (tokens[:, 0] == eos_id)", "done = done | (tokens[:, 0] == 2)"),
        "pad_is_zero_hard_coded": _greedy_with("produced.append(tokens.masked_fill(done[:, None], pad_id))",
                                               "produced.append(tokens.masked_fill(done[:, None], 0))"),
        "returns_on_cpu": _greedy_with("return torch.cat(produced, dim=1)", "return torch.cat(produced, dim=1).cpu().float()"),
        "samples_instead_of_argmax": _greedy_with(
            "tokens = logits[:, -1, :].argmax(dim=-1, keepdim=True)",
            "tokens = torch.multinomial(torch.softmax(logits[:, -1, :], dim=-1), 1)"),

        # decodes with the dropout of a model left in training mode
        "no_eval_mode": _greedy_with("model.eval()\n", ""),
    },
}

CORRECT = {
    "BahdanauDecoder": {
        # the state as a dict, the keys projected by hand once, weights computed explicitly
        "dict_state_manual_attention": _decoder(
            init_state="return {'memory': enc_outputs, 'hidden': enc_hidden, 'mask': src_mask}",
            forward="""
            memory, hidden, src_mask = state["memory"], state["hidden"], state["mask"]
            keys = self.attention.W_k(memory)
            logits, weights = [], []
            for token in tgt_in.unbind(dim=1):
                q = self.attention.W_q(hidden[-1])
                scores = self.attention.w_v(torch.tanh(q.unsqueeze(1) + keys)).squeeze(-1)
                alpha = torch.softmax(scores.masked_fill(~src_mask, float("-inf")), dim=-1)
                # functional dropout on the weights, as the attention's own dropout would do it
                context = torch.einsum("bs,bsh->bh", F.dropout(alpha, self.attention.dropout.p, self.training), memory)
                x = torch.cat([self.embedding(token), context], dim=-1).unsqueeze(1)
                out, hidden = self.rnn(x, hidden)
                logits.append(self.dense(out[:, 0]))
                weights.append(alpha)
            self.attention_weights = torch.stack(weights, dim=1)
            return torch.stack(logits, dim=1), {"memory": memory, "hidden": hidden, "mask": src_mask}
            """),
    },
    "sequence_loss": {
        "log_softmax_gather": _function(LOSS, """
            log_probs = torch.log_softmax(logits, dim=-1)
            picked = log_probs.gather(-1, labels.clamp_min(0).unsqueeze(-1)).squeeze(-1)
            real = labels != pad_id
            return -(picked * real).sum() / real.sum()
            """),
    },
    "greedy_decode": {
        # always max_len columns, re-running the decoder over the whole prefix each step
        "full_prefix_every_step_max_len_columns": _function(GREEDY, """
            model.eval()
            with torch.no_grad():
                enc_outputs, enc_hidden = model.encoder(src, src_mask)
                prefix = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
                for _ in range(max_len):
                    state = model.decoder.init_state(enc_outputs, enc_hidden, src_mask)
                    logits, _ = model.decoder(prefix, state)
                    prefix = torch.cat([prefix, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
                out = prefix[:, 1:]
                ended = (out == eos_id).long().cumsum(dim=1)
                after = (ended - (out == eos_id).long()) > 0
                return out.masked_fill(after, pad_id)
            """),
    },
}

# What the failure must say (exercise -> wrong variant -> words of its message): the mistakes that
# only the 2-layer, training-mode and other-ids checks see name what they check.
MESSAGES = {
    "BahdanauDecoder": {
        "query_from_first_layer": "hidden[-1]",
        "dropout_on_the_embeddings": "training mode",
    },
    "sequence_loss": {"pad_id_zero_hard_coded": "pad_id=1"},
    "greedy_decode": {"eos_hard_coded": "eos_id=5", "pad_is_zero_hard_coded": "pad_id=6"},
}
