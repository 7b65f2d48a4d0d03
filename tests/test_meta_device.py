"""A CPU-side proxy for the commonest GPU bug: a tensor created on the wrong device inside a model.

Every chapter's models (the reference solutions, ``attention_course.reference``, and the shared
layers that the chapters build on) are built on the CPU, moved to PyTorch's ``meta`` device
(shapes and dtypes, no data) and run once, forward and backward, with their generation and
decoding loops: an operation that mixes a meta tensor with a CPU tensor raises ("Tensor on
device cpu is not on the expected device meta"), as it raises on CUDA, so a ``torch.arange(T)``
without ``device=``, a mask or a table kept as a plain attribute (not a buffer, so ``.to()``
leaves it behind) or a ``torch.tensor(...)`` of values made in a loop fails here, in a second,
without a GPU.

A meta tensor has no values, so the loops' data-dependent steps (``if done.all(): break``,
``.item()``, ``.tolist()``) are answered by :class:`MetaValues` with zeros: the loops then run to
their full length, the widest coverage. The proxy is not the GPU: a 0-dimensional CPU tensor mixes
with any device (as on CUDA), and a few operations accept CPU operands on meta that CUDA refuses
(``F.embedding`` with CPU indices, indexing with a CPU index tensor); ``make gpu-check`` on a GPU
is the real check (docs/benchmarks.md).
"""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from attention_course.reference import ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09

META = torch.device("meta")
# what a meta tensor is asked for its values: answered with zeros of its shape and dtype
_VALUES = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.__int__,
           torch.Tensor.__float__, torch.Tensor.__index__}


# operations that take CPU tensors beside CUDA ones on CUDA as well: indexing with a CPU index,
# copies between devices (a module moved by .to()), and the packed sequences' lengths and batch sizes (CPU by PyTorch's rule)
_MAY_MIX = {"__getitem__", "to", "cpu", "copy_", "_has_compatible_shallow_copy_type", "_pack_padded_sequence", "_pad_packed_sequence", "gru"}


class MetaValues(TorchFunctionMode):
    """The meta device made as strict as CUDA, and its loops runnable.

    Strict: a call that mixes a meta tensor with a CPU tensor of one or more dimensions raises,
    where meta's own kernels let some pass (``F.embedding`` with CPU indices, which CUDA refuses).
    Runnable: the data-dependent questions a loop asks of a meta tensor (its values, a copy to the
    CPU) are answered with zeros (ones for a copy to the CPU, so that a length stays valid)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if getattr(func, "__name__", "") not in _MAY_MIX and any(t.is_meta for t in tensors):
            stray = [t for t in tensors if t.device.type == "cpu" and t.dim() > 0]
            if stray:
                raise RuntimeError(f"{getattr(func, '__name__', func)}: a CPU tensor of shape {tuple(stray[0].shape)} "
                                   "mixed with tensors on the model's device: create it on that device")
        first = args[0] if args else None
        if isinstance(first, torch.Tensor) and first.is_meta:
            if func in _VALUES:
                return func(torch.zeros(first.shape, dtype=first.dtype), *args[1:], **kwargs)
            if func is torch.Tensor.cpu or (func is torch.Tensor.to and _to_cpu(args[1:], kwargs)):
                return torch.ones(first.shape, dtype=first.dtype)
        return func(*args, **kwargs)


def _to_cpu(args, kwargs) -> bool:
    target = kwargs.get("device", args[0] if args else None)
    return isinstance(target, (str, torch.device)) and torch.device(target).type == "cpu"


def on_meta(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` built as a learner builds it (on the CPU), then moved as the notebooks move it."""
    return module.to(META)


def tokens(*shape, high=7):
    return torch.randint(3, high, shape).to(META)


def forward_backward(output) -> None:
    """The gradient through every output (a meta ``backward`` runs every backward kernel)."""
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    loss = sum(o.float().sum() for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad)
    loss.backward()


@pytest.fixture(autouse=True)
def meta_values():
    with MetaValues():
        yield


def test_the_proxy_catches_a_cpu_tensor_in_a_model():
    """The proxy fails the bug it stands for: a model that makes its positions without device=."""

    class Forgetful(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(8, 4)

        def forward(self, X):
            return X + self.embedding(torch.arange(X.shape[1]))

    with pytest.raises(RuntimeError, match="device"):
        on_meta(Forgetful())(torch.zeros(2, 3, 4, device=META))


def test_chapter_2():
    B, S, Q, D = 2, 5, 3, 8
    queries, keys, values = (torch.randn(B, n, D).to(META).requires_grad_() for n in (Q, S, S))
    mask = ch02.lengths_to_mask(torch.tensor([5, 2]).to(META), S)[:, None, :]
    out, weights = ch02.scaled_dot_product_attention(queries, keys, values, mask)
    forward_backward(out)
    assert out.device == weights.device == META
    attention = on_meta(ch02.AdditiveAttention(D, D, 6, dropout=0.1))
    forward_backward(attention(queries, keys, values, mask))


def test_chapter_3_training_and_greedy_decoding():
    from attention_course.seq2seq import GRUEncoder, Seq2Seq

    V, B, S, T = 9, 2, 6, 4
    model = on_meta(Seq2Seq(GRUEncoder(V, 4, 8, 2, dropout=0.1), ch03.BahdanauDecoder(V, 4, 8, 2, dropout=0.1)))
    src, src_mask = tokens(B, S), torch.ones(B, S, dtype=torch.bool, device=META)
    logits = model(src, src_mask, tokens(B, T))
    forward_backward(ch03.sequence_loss(logits, tokens(B, T), pad_id=0))
    ids = ch03.greedy_decode(model, src, src_mask, bos_id=1, eos_id=2, pad_id=0, max_len=5)
    assert ids.device == META and ids.shape == (B, 5)


def test_chapters_4_and_5():
    B, T, D = 2, 5, 8
    X = torch.randn(B, T, D).to(META).requires_grad_()
    mask = torch.ones(T, T, dtype=torch.bool).tril().to(META)
    forward_backward(on_meta(ch04.MultiHeadAttention(D, 2, dropout=0.1))(X, X, X, mask))
    forward_backward(on_meta(ch05.PositionalEncoding(D, max_len=16, dropout=0.1))(X))
    patches = ch05.image_to_patches(torch.randn(2, 3, 8, 8).to(META), 4)
    assert patches.device == META


def test_chapter_6_encoder_and_the_taggers():
    from attention_course.tagging import TokenClassifier, WindowMLP

    B, T = 2, 7
    mask = torch.ones(B, T, dtype=torch.bool, device=META)
    encoder = ch06.TransformerEncoder(12, 8, 2, 16, 2, dropout=0.1, max_len=16)
    forward_backward(on_meta(TokenClassifier(encoder, 8, 2))(tokens(B, T), mask))
    forward_backward(on_meta(WindowMLP(12, 2, window=2, embed_size=4, num_hiddens=8))(tokens(B, T), mask))


def test_chapter_7_training_and_greedy_decoding():
    B, S, T = 2, 6, 5
    model = on_meta(ch07.Transformer(9, 10, 8, 2, 16, 2, dropout=0.1, max_len=16))
    src, src_mask = tokens(B, S), torch.ones(B, S, dtype=torch.bool, device=META)
    tgt_in, _labels = ch07.teacher_forcing_pair(tokens(B, T))
    forward_backward(model(src, tgt_in, src_mask))
    assert ch07.causal_mask(4, device=META).device == META
    ids = ch07.greedy_decode(model, src, src_mask, bos_id=1, eos_id=2, pad_id=0, max_len=6)
    assert ids.device == META and ids.shape == (B, 6)


def gpt(**sizes) -> ch08.GPT:
    return on_meta(ch08.GPT(**{"vocab_size": 11, "d_model": 8, "num_heads": 2, "d_ff": 16, "num_layers": 2,
                               "max_len": 24, "dropout": 0.1, **sizes}))


def test_chapter_8_gpt_and_its_generation_loops():
    model = gpt()
    padding = torch.ones(2, 5, dtype=torch.bool, device=META)
    logits, present = model(tokens(2, 5), padding_mask=padding)
    forward_backward(logits)
    model.eval()
    prompt = tokens(2, 3)
    for use_cache in (True, False):
        out = ch08.generate(model, prompt, 6, use_cache=use_cache)
        assert out.device == META and out.shape == (2, 9)
    # sampling, filtered (the generator is PyTorch's global one: a meta generator does not exist)
    out = ch08.generate(model, prompt, 4, temperature=0.8, top_k=5, top_p=0.9)
    assert out.device == META
    best, _score = ch08.beam_search(model, tokens(3), beam_width=3, max_new_tokens=4, eos_id=2)
    assert best.device == META


def test_chapter_9_tiled_attention_grouped_queries_and_the_window():
    from attention_course.masked_gpt import MaskedGPT

    Q, K, V = (torch.randn(2, 2, 10, 4).to(META).requires_grad_() for _ in range(3))
    for causal in (False, True):
        forward_backward(ch09.TiledAttention.apply(Q, K, V, causal, 4, 3))
    assert all(t.device == META for t in ch09.online_softmax(torch.randn(3, 10).to(META), 4))
    model = gpt()
    for block in model.blocks:  # chapter 9's grouped-query GPT (book/figures/ch09.py: make_gqa_gpt)
        block.attention = on_meta(ch09.GroupedQueryAttention(8, 2, 1, dropout=0.1))
    forward_backward(model(tokens(2, 5), padding_mask=torch.ones(2, 5, dtype=torch.bool, device=META))[0])
    model.eval()
    assert ch08.generate(model, tokens(2, 3), 5).device == META
    masked = on_meta(MaskedGPT(11, 8, 2, 16, 2, max_len=24))
    out, logits = ch09.generate_with_window(masked, tokens(2, 4), 6, window=3)
    assert out.device == logits.device == META and out.shape == (2, 10)
