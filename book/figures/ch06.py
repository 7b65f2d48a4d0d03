"""Figures and demonstrations of chapter 6's book page, *The Transformer encoder*.

The layers themselves live in :mod:`attention_course.reference.ch06` (generated from the chapter's solution notebook); this module only builds
on them: it switches the residual connection and the layer norm of an encoder block on
and off to look at the gradients of a deep stack, compares layer and batch normalisation
on padded batches, checks the course's block against PyTorch's, and trains the encoder
and the fixed-window baseline on the duplicate-letter task of
:mod:`attention_course.tagging`. Conventions are those of the course: row vectors, batch
first, ``(B, T, d_model)``; padding masks ``(B, T)`` with ``True`` = a real token.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attention_course.recipes import ENCODER, WINDOW_MLP
from attention_course.reference.ch05 import sinusoidal_positional_encoding
from attention_course.reference.ch06 import EncoderBlock, LayerNorm, TransformerEncoder
from attention_course.tagging import (
    IGNORE,
    PAD_ID,
    TaggingBatch,
    TaggingTask,
    TokenClassifier,
    WindowMLP,
    token_accuracy,
    train_tagger,
)
from attention_course.training import init_transformer_weights
from attention_course.twins import to_torch_encoder_layer
from figures.describe import finding
from figures.i18n import N_, _, padded
from figures.training import recipe_lines

__all__ = [
    "embedding_scales",
    "describe_embedding_scales",
    "SwitchableEncoderBlock",
    "STACKS",
    "gradient_norms_by_depth",
    "gradient_table",
    "plot_gradient_norms",
    "batch_dependence",
    "describe_batch_dependence",
    "plot_batch_dependence",
    "parameter_counts",
    "parameter_table",
    "torch_encoder_agreement",
    "describe_agreement",
    "window_ceiling",
    "describe_ceiling",
    "MODEL_NAMES",
    "describe_recipes",
    "train_duplicate_models",
    "describe_runs",
    "plot_duplicate_training",
    "copy_attention_share",
    "describe_copy_share",
    "plot_copy_attention",
    "describe_copy_attention",
]


# --------------------------------------------------------------------------------------
# Embeddings: why the scale by sqrt(d_model), and why the course initialises them small
# --------------------------------------------------------------------------------------


def padding_to_attention_mask(padding_mask: torch.Tensor | None) -> torch.Tensor | None:
    """A ``(B, S)`` padding mask (``True`` = real token) as a ``(B, 1, S)`` attention mask:
    every query may attend to the real tokens of its own sequence. ``None`` stays ``None``.

    A mask that is not ``(B, S)`` boolean raises ``ValueError``: a 2-D mask given to an
    attention layer as it is would be read as an ``(n, m)`` mask, wrongly."""
    if padding_mask is None:
        return None
    if padding_mask.dtype != torch.bool or padding_mask.dim() != 2:
        raise ValueError(
            "a padding mask is a (B, S) boolean tensor with True = a real token, got "
            f"shape {tuple(padding_mask.shape)} and dtype {padding_mask.dtype}"
        )
    return padding_mask[:, None, :]



def encoder_attention_weights(encoder: TransformerEncoder) -> list[torch.Tensor]:
    """The ``(B, h, S, S)`` weights of every block's last forward call, first block first."""
    return [block.attention.attention_weights for block in encoder.blocks]

def embedding_scales(d_model: int = 64, vocab_size: int = 26, max_len: int = 32, seed: int = 0) -> dict[str, float]:
    """Root-mean-square size of the entries of ``sqrt(d_model) * embedding`` (the input
    of the positional encoding in :class:`~attention_course.reference.ch06.TransformerEncoder`)
    with PyTorch's default ``N(0, 1)`` embeddings and with the course's
    ``N(0, 1/d_model)`` (:func:`~attention_course.training.init_transformer_weights`),
    next to the size of the positional encoding's entries."""
    torch.manual_seed(seed)
    embedding = nn.Embedding(vocab_size, d_model)

    def rms_scaled() -> float:
        return float((embedding.weight.detach() * math.sqrt(d_model)).pow(2).mean().sqrt())

    default = rms_scaled()
    init_transformer_weights(embedding)
    course = rms_scaled()
    P = sinusoidal_positional_encoding(max_len, d_model)
    return {
        _("sqrt(d) * embedding, PyTorch's N(0, 1) init"): default,
        _("sqrt(d) * embedding, course's N(0, 1/d) init"): course,
        _("positional encoding P"): float(P.pow(2).mean().sqrt()),
    }


def describe_embedding_scales(scales: dict[str, float]) -> str:
    """:func:`embedding_scales`' result as the page prints it."""
    rms = _("root mean square of the entries")
    return "\n".join(f"{padded(what, 46)} {rms} {value:5.2f}" for what, value in scales.items())


# --------------------------------------------------------------------------------------
# Figure 1: the gradient reaching each block of a deep stack, with and without residuals
# --------------------------------------------------------------------------------------


class SwitchableEncoderBlock(EncoderBlock):
    """An :class:`~attention_course.reference.ch06.EncoderBlock` whose residual connections and
    layer norms can be switched off, to see what each one does in a deep stack.

    Each sub-layer ``F`` (attention, then the FFN) becomes ``LN(X + F(X))`` (both on: the
    course's block), ``LN(F(X))`` (``residual=False``), ``X + F(X)`` (``layer_norm=False``)
    or ``F(X)`` (both off). Same parameters, same ``forward(X, src_mask=None)`` on
    ``(B, T, d_model)``. Dropout is left out: the block is for looking at gradients.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, residual: bool = True, layer_norm: bool = True):
        super().__init__(d_model, num_heads, d_ff)
        self.residual = residual
        self.layer_norm = layer_norm

    def _wrap(self, X: torch.Tensor, sublayer_output: torch.Tensor, norm: LayerNorm) -> torch.Tensor:
        Z = X + sublayer_output if self.residual else sublayer_output
        return norm(Z) if self.layer_norm else Z

    def forward(self, X: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        Y = self._wrap(X, self.attention(X, X, X, src_mask), self.addnorm1.ln)
        return self._wrap(Y, self.ffn(Y), self.addnorm2.ln)


# (label, residual, layer_norm) of the four stacks of figure 1
STACKS = (
    ("F(X)", False, False),
    ("X + F(X)", True, False),
    ("LN(F(X))", False, True),
    (_("LN(X + F(X))  (the course's block)"), True, True),
)


def _token_spread(X: torch.Tensor) -> float:
    """``|X - mean over tokens| / |X|`` for ``X`` ``(B, T, d)``: 0 when every token of a
    sequence carries the same vector, about 1 for unrelated tokens."""
    return float((X - X.mean(dim=1, keepdim=True)).norm() / X.norm())


def _random_batch(batch_size: int, seq_len: int, d_model: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The input and the target of :func:`gradient_norms_by_depth`, float64."""
    generator = torch.Generator().manual_seed(seed)
    X = torch.randn(batch_size, seq_len, d_model, generator=generator, dtype=torch.float64)
    target = torch.randn(batch_size, seq_len, d_model, generator=generator, dtype=torch.float64)
    return X, target


def gradient_norms_by_depth(num_layers: int = 12, d_model: int = 64, num_heads: int = 4, d_ff: int = 128,
                            batch_size: int = 8, seq_len: int = 16, seed: int = 0) -> dict:
    """Build each of the four :data:`STACKS` of ``num_layers`` blocks (PyTorch's default
    initialisation, the same seed for all four, float64), feed one random batch
    ``(batch_size, seq_len, d_model)``, backpropagate the mean squared error against a
    random target, and measure every block's gradient.

    Returns ``{label: {"all": [...], "query_key": [...], "spread": float}}``: per block
    (first block first) the norm of the gradient of all its parameters and of the
    query and key projections (``W_q``, ``W_k``) alone, and the token spread of the
    stack's output (see :func:`_token_spread`; the random input has about 0.97).
    """
    X, target = _random_batch(batch_size, seq_len, d_model, seed)
    result = {}
    for label, residual, layer_norm in STACKS:
        torch.manual_seed(seed)
        blocks = nn.ModuleList(
            SwitchableEncoderBlock(d_model, num_heads, d_ff, residual, layer_norm) for _repeat in range(num_layers)
        ).double()
        Y = X
        for block in blocks:
            Y = block(Y)
        F.mse_loss(Y, target).backward()

        def norm_of(parameters) -> float:
            # the layer norms of the stacks without one get no gradient at all
            grads = [p.grad for p in parameters if p.grad is not None]
            return float(torch.sqrt(sum((g ** 2).sum() for g in grads)))

        result[label] = {
            "all": [norm_of(block.parameters()) for block in blocks],
            "query_key": [norm_of([*block.attention.W_q.parameters(), *block.attention.W_k.parameters()])
                          for block in blocks],
            "spread": _token_spread(Y.detach()),
        }
    return result


def gradient_orders(norms) -> tuple[float, float]:
    """Of one stack's gradient norms by block: how many orders of magnitude the last block's
    exceeds the first block's, and how many lie between the largest and the smallest."""
    norms = np.asarray(norms, dtype=float)
    return math.log10(norms[-1] / norms[0]), math.log10(norms.max() / norms.min())


def describe_gradient_norms(result: dict, batch_size: int = 8, seq_len: int = 16, d_model: int = 64,
                            seed: int = 0, rounding: float = 1e-12) -> str:
    """What the figure of :func:`gradient_norms_by_depth`'s ``result`` shows, in numbers (the
    other arguments must be those it was computed with): for each stack, how many orders of
    magnitude the gradient of the last block's parameters exceeds the first block's, and the
    mean factor per block; for each stack, the first block from which the gradient of
    ``W_q, W_k`` stays below ``rounding`` times the gradient of the whole block, if there is
    one; and the token spread of the input.

    Checks what the page says of the figure and raises ``AssertionError`` (which stops the
    book's build) when one statement no longer holds: the bare stack loses more than six
    orders of magnitude, and more than a factor of ten per block on average; every other
    stack stays within one order of magnitude (less than a factor of ten between any two
    blocks); the stacks without the residual connection lose the difference between tokens
    (spread below ``rounding``) and their ``W_q, W_k`` stop getting a gradient; the stacks
    with it keep both.
    """
    X, _target = _random_batch(batch_size, seq_len, d_model, seed)
    lines = [_("token spread of the random input: {spread:.2f}", spread=_token_spread(X))]
    facts = {}
    for label, residual, _layer_norm in STACKS:
        norms = np.array(result[label]["all"])
        orders, spread = gradient_orders(result[label]["all"])
        qk = np.array(result[label]["query_key"]) / norms
        dead = [b for b in range(len(qk)) if (qk[b:] < rounding).all()]
        facts[label] = (orders, spread, dead)
        where = (_("|grad W_q, W_k| below {rounding:g} of the block's from block {block} on (largest {largest:.0e})",
                   rounding=rounding, block=dead[0] + 1,
                   largest=np.array(result[label]["query_key"])[dead[0]:].max()) if dead
                 else _("W_q, W_k get a gradient in every block"))
        lines += [label, "    " + _("block {last} / block 1: {orders:.1f} orders of magnitude, x{factor:.2g} per block",
                                    last=len(norms), orders=orders, factor=10 ** (orders / (len(norms) - 1))),
                  f"    {where}"]
        assert (result[label]["spread"] < rounding) == (not residual) and bool(dead) == (not residual), (
            f"{label}: the residual connection no longer decides whether the tokens stay apart")
    (bare_orders, _spread, _dead), *others = facts.values()
    assert bare_orders > 6 and 10 ** (bare_orders / (len(norms) - 1)) > 10, (
        "the stack without residual connection or layer norm no longer loses a factor of ten per block")
    assert all(spread < 1 for _orders, spread, _dead in others), "a stack with a residual connection or a layer norm " \
        "no longer keeps its gradients within one order of magnitude"
    return "\n".join(lines)


def gradient_table(result: dict, blocks=(1, 2, 3, 6, 12)) -> str:
    """:func:`gradient_norms_by_depth`'s ``result`` as a table: per stack, the token spread of its
    output and the gradient of ``W_q, W_k`` in ``blocks``."""
    stack, spread = padded(_("stack"), 36), padded(_("token spread"), 12, ">")
    grads = _("|grad W_q, W_k| in blocks {blocks}", blocks=", ".join(map(str, blocks)))
    lines = [f"{stack} {spread}   {grads}"]
    for label, row in result.items():
        cells = "  ".join(f"{row['query_key'][b - 1]:8.1e}" for b in blocks)
        lines.append(f"{padded(label, 36)} {row['spread']:12.2f}   {cells}")
    return "\n".join(lines)


def plot_gradient_norms(result: dict | None = None, **kwargs):
    """Figure: gradient norm of each block's parameters against its depth, log scale;
    left the bare sub-layers, right with the layer norm (post-norm). ``result`` from
    :func:`gradient_norms_by_depth` (computed with ``kwargs`` when ``None``)."""
    import matplotlib.pyplot as plt

    result = result or gradient_norms_by_depth(**kwargs)
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.6), sharey=True)
    panels = ((_("sub-layers alone"), STACKS[:2]), (_("with layer norm (post-norm)"), STACKS[2:]))
    for ax, (title, stacks) in zip(axes, panels):
        for (label, residual, _layer_norm), style in zip(stacks, ("s--", "o-")):
            norms = result[label]["all"]
            ax.plot(range(1, len(norms) + 1), norms, style, color="tab:blue" if residual else "tab:red",
                    label=_("with residual: {stack}", stack=label) if residual
                    else _("no residual: {stack}", stack=label))
        ax.set_yscale("log")
        ax.set_xlabel(_("block (1 = next to the input)"))
        ax.set_title(title)
        ax.legend(fontsize="small", loc="lower right")
    axes[0].set_ylabel(_("gradient norm of the block's parameters"))
    fig.tight_layout()
    each = []
    for label, _residual, _layer_norm in STACKS:
        orders, spread = gradient_orders(result[label]["all"])
        each.append(_("{stack}: from block 1 to block {last} the gradient changes by {orders:+.1f} orders of magnitude, "
                      "{spread:.1f} between its largest and its smallest", stack=label, orders=orders, last=len(result[label]["all"]),
                      spread=spread))
    return finding(fig, _("Without the residual connection or the layer norm the gradient shrinks block by block "
                          "towards the input; with either it stays within one order of magnitude. {each}.",
                          each="; ".join(each)))


# --------------------------------------------------------------------------------------
# Figure 2: batch norm depends on the batch, layer norm on the token only
# --------------------------------------------------------------------------------------


def _batch_norm(X: torch.Tensor, mask: torch.Tensor | None, eps: float = 1e-5) -> torch.Tensor:
    """Batch normalisation (training mode, no affine) of ``X`` ``(B, T, d)``: every
    feature is normalised with its mean and biased variance over the batch's positions,
    all of them (``mask`` ``None``, what ``nn.BatchNorm1d`` on ``(B, d, T)`` does) or
    the real ones only (``mask`` ``(B, T)``, ``True`` = real)."""
    rows = X.reshape(-1, X.shape[-1]) if mask is None else X[mask]  # (positions, d)
    mean, var = rows.mean(dim=0), rows.var(dim=0, unbiased=False)
    return (X - mean) / torch.sqrt(var + eps)


def _layer_norm(X: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean, var = X.mean(dim=-1, keepdim=True), X.var(dim=-1, unbiased=False, keepdim=True)
    return (X - mean) / torch.sqrt(var + eps)


def batch_dependence(sentence_len: int = 5, d: int = 8, padded_lengths=range(5, 41), num_batches: int = 20,
                     batch_size: int = 4, max_other_len: int = 20, feature_mean: float = 1.0,
                     seed: int = 0) -> dict:
    """One sentence of ``sentence_len`` random token vectors (features drawn from
    ``N(feature_mean, 1)``: activations are rarely centred) normalised in different
    batches by batch norm (padding counted, or real tokens only) and by layer norm.
    Padding vectors are zeros.

    * ``"padding"``: the sentence and one fixed companion of the same length, the batch
      padded to each length in ``padded_lengths`` (as when a longer sentence elsewhere
      sets the batch's width);
    * ``"companions"``: the sentence in ``num_batches`` batches of ``batch_size``
      sentences, the others random, of lengths ``1..max_other_len``, padded to the longest.

    Returns, for each, the normalised value of feature 0 of the sentence's first token
    under each method, and ``"largest_change"``: per method, the largest change of any
    entry of the sentence's normalised vectors over all batches of both experiments.
    """
    generator = torch.Generator().manual_seed(seed)

    def tokens(n: int) -> torch.Tensor:
        return feature_mean + torch.randn(n, d, generator=generator, dtype=torch.float64)

    def padded_batch(sentences: list[torch.Tensor], width: int) -> tuple[torch.Tensor, torch.Tensor]:
        X = torch.zeros(len(sentences), width, d, dtype=torch.float64)
        mask = torch.zeros(len(sentences), width, dtype=torch.bool)
        for row, s in enumerate(sentences):
            X[row, : len(s)], mask[row, : len(s)] = s, True
        return X, mask

    methods = (_("batch norm, padding counted"), _("batch norm, real tokens only"), _("layer norm"))

    def normalise(X: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        # row 0 of every batch is the sentence; keep its real positions
        outputs = (_batch_norm(X, None), _batch_norm(X, mask), _layer_norm(X))
        return {m: out[0, :sentence_len] for m, out in zip(methods, outputs)}

    sentence, companion = tokens(sentence_len), tokens(sentence_len)
    padding = [normalise(*padded_batch([sentence, companion], width)) for width in padded_lengths]
    companions = []
    for _repeat in range(num_batches):
        lengths = torch.randint(1, max_other_len + 1, (batch_size - 1,), generator=generator).tolist()
        sentences = [sentence] + [tokens(n) for n in lengths]
        companions.append(normalise(*padded_batch(sentences, max(sentence_len, *lengths))))
    every = padding + companions
    result = {
        "methods": methods,
        "padded_lengths": list(padded_lengths),
        "padding": {m: [float(out[m][0, 0]) for out in padding] for m in methods},
        "companions": {m: [float(out[m][0, 0]) for out in companions] for m in methods},
        "largest_change": {
            m: float((torch.stack([out[m] for out in every]) - every[0][m]).abs().max()) for m in methods
        },
    }
    # what the page says of the printout: both batch norms change with the batch, layer norm not at all
    *batch_norms, layer_norm = result["largest_change"].values()
    assert layer_norm == 0.0 and min(batch_norms) > 0.01, result["largest_change"]
    return result


def describe_batch_dependence(result: dict) -> str:
    """:func:`batch_dependence`'s largest changes, one line per normalisation."""
    return "\n".join(f"{padded(method, 30)} " + _("largest change of the sentence's normalised vectors over all batches: "
                                           "{change:.2f}", change=change)
                     for method, change in result["largest_change"].items())


def plot_batch_dependence(result: dict | None = None, **kwargs):
    """Figure: the two experiments of :func:`batch_dependence` side by side."""
    import matplotlib.pyplot as plt

    result = result or batch_dependence(**kwargs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.6), sharey=True)
    styles = dict(zip(result["methods"], (("tab:red", "o", "-"), ("tab:orange", "s", "--"), ("tab:blue", "^", ":"))))
    for method, (color, marker, line) in styles.items():  # a marker and a line style each: apart in greyscale
        left.plot(result["padded_lengths"], result["padding"][method], marker=marker, linestyle=line, markevery=5, color=color,
                  label=method)
        right.plot(range(1, len(result["companions"][method]) + 1), result["companions"][method],
                   marker, color=color, label=method)
    left.set_xlabel(_("padded length of the batch"))
    left.set_ylabel(_("normalised feature 0 of token 0"))
    left.set_title(_("same two sentences, more padding"))
    right.set_xlabel(_("batch (other sentences drawn at random)"))
    right.set_title(_("same sentence, other companions"))
    right.set_xticks(range(1, len(result["companions"][result["methods"][0]]) + 1, 2))
    left.legend(fontsize="small")
    fig.tight_layout()
    changes = "; ".join(_("{method}: {change:.2f}", method=method, change=change)
                        for method, change in result["largest_change"].items())
    return finding(fig, _("Under batch norm the same sentence's normalised values move with the batch, on both sides; "
                          "under layer norm they do not move at all. The largest change of the sentence's normalised "
                          "vectors over all batches: {changes}.", changes=changes))


# --------------------------------------------------------------------------------------
# Parameters and the check against PyTorch
# --------------------------------------------------------------------------------------


def parameter_counts(configs=((512, 8, 2048), (64, 4, 128))) -> list[dict]:
    """Parameters of one :class:`~attention_course.reference.ch06.EncoderBlock` per part, counted
    in the modules, for each ``(d_model, num_heads, d_ff)``; also the FFN's formula
    ``2 d d_ff + d_ff + d``."""
    rows = []
    for d_model, num_heads, d_ff in configs:
        block = EncoderBlock(d_model, num_heads, d_ff)

        def count(module: nn.Module) -> int:
            return sum(p.numel() for p in module.parameters())

        rows.append({
            "config": (d_model, num_heads, d_ff),
            "attention": count(block.attention),
            "ffn": count(block.ffn),
            "ffn_formula": 2 * d_model * d_ff + d_ff + d_model,
            "layer_norms": count(block.addnorm1) + count(block.addnorm2),
            "block": count(block),
        })
    return rows


def parameter_table(rows: list[dict]) -> str:
    """:func:`parameter_counts`' rows as the page prints them."""
    header = [padded(_("attention"), 10, ">"), padded(_("FFN"), 10, ">"), padded(_("formula"), 10, ">"),
              padded(_("2 LNs"), 6, ">"), padded(_("block"), 10, ">")]
    lines = [f"{'(d_model, h, d_ff)':>18} " + " ".join(header)]
    for row in rows:
        lines.append(f"{str(row['config']):>18} {row['attention']:>10,} {row['ffn']:>10,} {row['ffn_formula']:>10,} "
                     f"{row['layer_norms']:>6,} {row['block']:>10,}")
    return "\n".join(lines)


def describe_agreement(differences: dict[str, float]) -> str:
    """:func:`torch_encoder_agreement`'s result, one line per comparison."""
    largest = _("max |difference|")
    return "\n".join(f"{padded(what, 58)} {largest} {difference:.1e}" for what, difference in differences.items())


def torch_encoder_agreement(d_model: int = 16, num_heads: int = 4, d_ff: int = 32, batch_size: int = 3,
                            seq_len: int = 7, seed: int = 0) -> dict[str, float]:
    """Largest differences, in float64, between the course's layers and PyTorch's loaded
    with the same weights: :class:`~attention_course.reference.ch06.LayerNorm` (random weight
    and bias) against ``nn.LayerNorm``, and an
    :class:`~attention_course.reference.ch06.EncoderBlock` (dropout 0) against its twin
    ``nn.TransformerEncoderLayer(batch_first=True, norm_first=False)`` from
    :func:`~attention_course.twins.to_torch_encoder_layer`, without a mask and with a
    padding mask (sequences of lengths ``seq_len, seq_len - 2, 2, ...``; compared at the
    real positions, the only ones a padded output is defined at)."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    X = torch.randn(batch_size, seq_len, d_model, generator=generator, dtype=torch.float64)

    ours_ln = LayerNorm(d_model).double()
    with torch.no_grad():
        ours_ln.weight.copy_(torch.randn(d_model, generator=generator))
        ours_ln.bias.copy_(torch.randn(d_model, generator=generator))
    torch_ln = nn.LayerNorm(d_model).double()
    torch_ln.load_state_dict(ours_ln.state_dict())

    block = EncoderBlock(d_model, num_heads, d_ff, dropout=0.0).double().eval()
    twin = to_torch_encoder_layer(block).eval()
    lengths = torch.tensor([seq_len, seq_len - 2] + [2] * (batch_size - 2))
    real = torch.arange(seq_len)[None, :] < lengths[:, None]  # (B, T), True = real token
    with torch.no_grad():
        layer_norm = (ours_ln(X) - torch_ln(X)).abs().max()
        unmasked = (block(X) - twin(X)).abs().max()
        ours = block(X, padding_to_attention_mask(real))
        theirs = twin(X, src_key_padding_mask=~real)  # PyTorch: True = padding
        masked = (ours - theirs)[real].abs().max()
    result = {
        _("LayerNorm vs nn.LayerNorm"): float(layer_norm),
        _("EncoderBlock vs nn.TransformerEncoderLayer, no mask"): float(unmasked),
        _("EncoderBlock vs nn.TransformerEncoderLayer, padding mask"): float(masked),
    }
    # the page calls these "rounding errors of float64"
    assert max(result.values()) < 1e-12, f"the blocks no longer agree to float64 rounding: {result}"
    return result


# --------------------------------------------------------------------------------------
# Why self-attention: the duplicate-letter task, the window baseline and the encoder
# --------------------------------------------------------------------------------------


def _window_features(batch: TaggingBatch, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For every position: ``(copy_in_window, pattern)``, whether a neighbour within
    ``window`` steps holds the same letter, and which neighbours are real letters
    (the number on the left and on the right, as one integer)."""
    tokens = batch.tokens.masked_fill(~batch.mask, PAD_ID)
    windows = F.pad(tokens, (window, window), value=PAD_ID).unfold(1, 2 * window + 1, 1)  # (B, T, 2w + 1)
    neighbours = torch.cat([windows[..., :window], windows[..., window + 1:]], dim=-1)  # (B, T, 2w)
    copy_in_window = ((neighbours == tokens[..., None]) & (neighbours != PAD_ID)).any(dim=-1)
    real = neighbours != PAD_ID
    pattern = real[..., :window].sum(dim=-1) * (window + 1) + real[..., window:].sum(dim=-1)
    return copy_in_window, pattern


def window_ceiling(task: TaggingTask, window: int = 3) -> dict[str, float]:
    """Estimate the best held-out token accuracy of *any* model that sees only the
    ``window`` neighbours on each side of a letter.

    Letters are independent and uniform, so what such a model can know is whether a copy
    of the letter sits in its window (then the label is surely 1) and where the padding
    starts inside the window (which says a little about how much of the string is out of
    sight). The best rule answers the majority label of each such case; the majorities are
    counted on ``task.train`` and the rule is scored on ``task.test``.

    Returns ``copy_in_window`` (the fraction of test letters with a copy in sight),
    ``duplicate_unseen`` (among the others, the fraction that still have a copy),
    ``always_no`` (the accuracy of answering 0 everywhere) and ``ceiling``.
    """
    num_cases = 2 * (window + 1) ** 2

    def cases(batch: TaggingBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        copy_in_window, pattern = _window_features(batch, window)
        real = batch.labels != IGNORE
        case = copy_in_window.long() * (window + 1) ** 2 + pattern
        return case[real], batch.labels[real], copy_in_window[real]

    train_case, train_label, _train_copy = cases(task.train)
    ones = torch.zeros(num_cases).index_add_(0, train_case, train_label.float())
    seen = torch.zeros(num_cases).index_add_(0, train_case, torch.ones(len(train_case)))
    majority = (2 * ones > seen).long()  # unseen cases answer 0
    test_case, test_label, test_copy = cases(task.test)
    return {
        "copy_in_window": float(test_copy.float().mean()),
        "duplicate_unseen": float(test_label[~test_copy].float().mean()),
        "always_no": float((test_label == 0).float().mean()),
        "ceiling": float((majority[test_case] == test_label).float().mean()),
    }


def describe_ceiling(ceiling: dict[str, float]) -> str:
    """:func:`window_ceiling`'s result as the page prints it."""
    return "\n".join([
        _("held-out letters with a copy among their 6 neighbours:   {share:.1%}", share=ceiling["copy_in_window"]),
        _("  of the others, letters that still have a copy:         {share:.1%}", share=ceiling["duplicate_unseen"]),
        _("accuracy of always answering 'no':                       {accuracy:.1%}", accuracy=ceiling["always_no"]),
        _("ceiling of any window-3 model (held out):                {accuracy:.1%}", accuracy=ceiling["ceiling"]),
    ])


def describe_recipes(recipes: dict) -> str:
    """One line per recipe (``{name: Recipe}``): what trains each of the page's models."""
    return "\n".join(_("{name} recipe: {model}; {training}", name=_(name), model=model, training=training)
                     for name, recipe in recipes.items() for model, training in [recipe_lines(recipe)])


def describe_runs(runs: dict) -> str:
    """One line per run of :func:`train_duplicate_models`: its steps, its time and its held-out
    token accuracy."""
    lines = []
    for name, run in runs.items():
        history = run["history"]
        lines.append(padded(_(name), 8) + " " + _("{steps:5d} steps in {cpu:4.1f} s of CPU ({wall:.0f} s wall) on {device}: "
                                          "held-out token accuracy {accuracy:.1%}", steps=history["steps_done"],
                                          cpu=history["cpu_seconds"], wall=history["seconds"],
                                          device=history["device"], accuracy=run["test_accuracy"]))
    return "\n".join(lines)


#: The names of chapter 6's two models, as the pages and :func:`train_duplicate_models` call them.
MODEL_NAMES = (N_("encoder"), N_("window"))


def train_duplicate_models(task: TaggingTask, seed: int = 0, device=None) -> dict:
    """Train the chapter's two models on ``task`` with
    :func:`~attention_course.tagging.train_tagger`, each from its recipe
    (:mod:`attention_course.recipes`):

    * ``"encoder"``: ``TokenClassifier(TransformerEncoder(vocab, **ENCODER.model), d_model, 2)``
      after :func:`~attention_course.training.init_transformer_weights`, as the exercise
      notebook trains it;
    * ``"window"``: ``WindowMLP(vocab, 2, **WINDOW_MLP.model)``, the fixed-window baseline.

    Each model is built right after ``torch.manual_seed(seed)``, so the run is
    reproducible on one machine. Returns ``{name: {"model", "history", "recipe",
    "test_accuracy"}}`` (held-out token accuracy on ``task.test``).
    """
    def encoder() -> nn.Module:
        sizes = ENCODER.model
        return init_transformer_weights(
            TokenClassifier(TransformerEncoder(task.vocab_size, **sizes), sizes["d_model"], task.num_labels)
        )

    def window() -> nn.Module:
        return WindowMLP(task.vocab_size, task.num_labels, **WINDOW_MLP.model)

    plans = {"encoder": (encoder, ENCODER), "window": (window, WINDOW_MLP)}
    runs = {}
    for name, (build, recipe) in plans.items():
        torch.manual_seed(seed)
        model = build()
        history = train_tagger(model, task, **recipe.training, seed=seed, device=device, progress=False)
        runs[name] = {"model": model, "history": history, "recipe": recipe,
                      "test_accuracy": token_accuracy(model, task.test)}
    return runs


def plot_duplicate_training(runs: dict, ceiling: dict | None = None):
    """Figure: validation token accuracy against the training step for the runs of
    :func:`train_duplicate_models`, with the window models' ceiling and the accuracy of
    always answering 0 from :func:`window_ceiling` when given."""
    import matplotlib.pyplot as plt

    labels = {"encoder": _("Transformer encoder (2 blocks)"), "window": _("window MLP (3 letters each side)")}
    colors = {"encoder": "tab:blue", "window": "tab:red"}
    markers = {"encoder": "o-", "window": "s--"}
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, run in runs.items():
        history = run["history"]
        # a marker each as well as a colour: the runs stay apart in greyscale
        ax.plot(history["valid_step"], 100 * np.asarray(history["valid_accuracy"]), markers[name], color=colors[name],
                label=_("{model}: held-out {accuracy:.1%}", model=labels[name], accuracy=run["test_accuracy"]))
    if ceiling is not None:
        ax.axhline(100 * ceiling["ceiling"], color="tab:red", linestyle="--", linewidth=1,
                   label=_("best any window model can do: {accuracy:.1%}", accuracy=ceiling["ceiling"]))
        ax.axhline(100 * ceiling["always_no"], color="0.5", linestyle=":", linewidth=1,
                   label=_("always answer 'no': {accuracy:.1%}", accuracy=ceiling["always_no"]))
    batch_sizes = sorted({run["recipe"].training["batch_size"] for run in runs.values()})
    ax.set_xlabel(_("training step (batches of {sizes} strings)", sizes="/".join(map(str, batch_sizes))))
    ax.set_ylabel(_("validation token accuracy (%)"))
    ax.set_ylim(40, 101)
    ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    accuracy = {name: run["test_accuracy"] for name, run in runs.items()}
    if ceiling is not None and set(accuracy) == {"encoder", "window"}:
        return finding(fig, _("Held out, the encoder ends at {encoder:.1%} token accuracy and the window MLP at "
                              "{window:.1%}, against a ceiling of {ceiling:.1%} for any window model and {no:.1%} for "
                              "always answering 'no'.", encoder=accuracy["encoder"], window=accuracy["window"],
                              ceiling=ceiling["ceiling"], no=ceiling["always_no"]))
    return fig


@torch.no_grad()
def copy_attention_share(model: TokenClassifier, batch: TaggingBatch, num_letters: int = 25) -> dict:
    """How much attention a duplicated letter gives to its copies, in a trained
    ``TokenClassifier`` around a :class:`~attention_course.reference.ch06.TransformerEncoder`.

    Over the duplicated letters of ``batch`` (token ids ``1..num_letters``), the share of
    a letter's attention row that lands on the *other* positions holding the same letter:

    * ``"copies"`` ``(num_layers, num_heads)``: its mean in every head;
    * ``"best_head"`` ``(num_layers,)``: for every letter of the alphabet the mean share in
      the head that gives that letter the most, averaged over the alphabet;
    * ``"uniform"``: the share if the weights were spread evenly over the string
      (number of other copies / length).
    """
    model.eval()
    model(batch.tokens, batch.mask)
    weights = torch.stack(encoder_attention_weights(model.encoder), dim=1)  # (B, layers, h, T, T)
    tokens, mask = batch.tokens, batch.mask
    same = (tokens[:, :, None] == tokens[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    other_copy = same & ~torch.eye(tokens.shape[1], dtype=torch.bool)  # (B, T, T)
    duplicated = other_copy.any(dim=-1)  # (B, T)
    share = (weights * other_copy[:, None, None]).sum(dim=-1).permute(0, 3, 1, 2)  # (B, T, layers, h)
    by_letter = torch.stack([share[duplicated & (tokens == letter)].mean(dim=0)
                             for letter in range(1, num_letters + 1)])  # (letters, layers, h)
    lengths = mask.sum(dim=-1, keepdim=True).expand_as(mask)
    uniform = (other_copy.sum(dim=-1) / lengths)[duplicated].mean()
    return {
        "copies": share[duplicated].mean(dim=0).numpy(),
        "best_head": by_letter.max(dim=-1).values.mean(dim=0).numpy(),
        "uniform": float(uniform),
    }


def describe_copy_share(share: dict) -> str:
    """:func:`copy_attention_share`'s result as the page prints it."""
    lines = []
    for block, (heads, best) in enumerate(zip(share["copies"], share["best_head"]), start=1):
        lines.append(_("block {block}: share on the copies per head {shares}; "
                       "in the head that looks hardest for each letter {best:.0%}",
                       block=block, shares=", ".join(f"{s:.0%}" for s in heads), best=best))
    lines.append(_("evenly spread weights would give {share:.0%}", share=share["uniform"]))
    return "\n".join(lines)


def _short_example(model: TokenClassifier, task: TaggingTask, layer: int, max_letters: int):
    """The first held-out string of at most ``max_letters`` letters, as a list of letters, and
    the attention weights ``(h, n, n)`` of block ``layer`` of ``model`` reading it."""
    index = int(torch.nonzero(task.test.mask.sum(dim=-1) <= max_letters)[0])
    example = task.test[index:index + 1]
    length = int(example.mask.sum())
    model.eval()
    with torch.no_grad():
        model(example.tokens, example.mask)
    weights = encoder_attention_weights(model.encoder)[layer][0, :, :length, :length]
    return list(task.decode(example.tokens[0])), weights


def plot_copy_attention(model: TokenClassifier, task: TaggingTask, layer: int = 0, max_letters: int = 15,
                        factor: float = 3.0):
    """Figure: the attention weights of every head of block ``layer`` on the first
    held-out string of at most ``max_letters`` letters; rows are queries, columns keys,
    both labelled by their letters, and the cells where the key is another copy of the
    query's letter are outlined."""
    from matplotlib.patches import Rectangle

    from attention_course.plotting import show_heatmaps

    letters, weights = _short_example(model, task, layer, max_letters)  # weights (h, n, n)
    length = len(letters)
    num_heads = weights.shape[0]
    cols = 2 if num_heads % 2 == 0 else num_heads
    fig = show_heatmaps(weights.reshape(num_heads // cols, cols, length, length), xlabel=_("key letter"),
                        ylabel=_("query letter"),
                        titles=[_("block {block}, head {head}", block=layer + 1, head=h) for h in range(num_heads)],
                        xticklabels=letters, yticklabels=letters, figsize=(8.4, 7.6))
    for ax in fig.axes[:num_heads]:
        for i in range(length):
            for j in range(length):
                if i != j and letters[i] == letters[j]:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="tab:blue", linewidth=1.5))
        ax.tick_params(axis="x", rotation=0)
    fig.suptitle(_("held-out string '{string}'; blue box: another copy of the row's letter", string="".join(letters)))
    rows = _copy_rows(letters, weights, factor)
    counts = _looking_counts(rows)
    return finding(fig, _("{rows} rows have boxes, each a letter with another copy in the string; the heads giving the "
                          "copies at least {factor:g} times the share evenly spread weights would give: none in {none} "
                          "of those rows, one in {one}, two in {two}, more in {more} (of {heads} heads).",
                          rows=len(rows), factor=factor, none=counts[0], one=counts[1], two=counts[2],
                          more=counts[3], heads=num_heads))


def describe_copy_attention(model: TokenClassifier, task: TaggingTask, layer: int = 0, max_letters: int = 15,
                            factor: float = 3.0) -> str:
    """What the rows with boxes of :func:`plot_copy_attention` (same arguments) show, in
    numbers: for every duplicated letter of the string, the share of its row on its other
    copies in each head, next to the share evenly spread weights would give; and how many of
    those rows give their copies at least ``factor`` times the even share in no head, one,
    two, or more."""
    letters, weights = _short_example(model, task, layer, max_letters)
    num_heads = weights.shape[0]
    lines = [_("block {block}, share of each duplicated letter's row on its copies, heads 0 to {last}:",
                block=layer + 1, last=num_heads - 1)]
    rows = _copy_rows(letters, weights, factor)
    for i, letter, share, even, _looking in rows:
        lines.append(_("{letter!r} at {i:2d}: on its copies {shares}   (even {even:.0%})", letter=letter, i=i,
                       shares=" ".join(f"{float(s):4.0%}" for s in share), even=even))
    counts = _looking_counts(rows)
    lines.append(_("{rows} rows with boxes; heads giving the copies at least {factor:g} times the even share: "
                   "none in {none}, one in {one}, two in {two}, more in {more} (of {heads} heads)",
                   rows=len(rows), factor=factor, none=counts[0], one=counts[1], two=counts[2],
                   more=counts[3], heads=num_heads))
    return "\n".join(lines)


def _copy_rows(letters: list[str], weights: torch.Tensor, factor: float) -> list[tuple]:
    """The rows with boxes of :func:`plot_copy_attention` (``weights`` ``(h, n, n)``): for each
    letter with another copy in the string, ``(position, letter, share of its row on its copies
    per head, share evenly spread weights would give, number of heads giving at least ``factor``
    times that)``."""
    length, rows = len(letters), []
    for i, letter in enumerate(letters):
        copies = [j for j in range(length) if j != i and letters[j] == letter]
        if not copies:
            continue
        share = weights[:, i, copies].sum(dim=-1)  # (h,)
        even = len(copies) / length
        rows.append((i, letter, share, even, int((share >= factor * even).sum())))
    return rows


def _looking_counts(rows: list[tuple]) -> list[int]:
    """Of :func:`_copy_rows`, how many rows have no, one, two, or more heads looking for the copies."""
    counts = [sum(1 for row in rows if row[-1] == c) for c in range(3)]
    return [*counts, len(rows) - sum(counts)]
