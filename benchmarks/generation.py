"""Generation speed of chapter 8's GPT: ``python -m benchmarks.generation`` (and part of
``make bench``).

Greedy generation of one sequence by three models with the *same weights*:

* **course, cache**: :class:`~attention_course.reference.ch08.GPT` through
  :func:`~attention_course.reference.ch08.generate` with ``use_cache=True`` (one forward over
  the prompt, then one new token per step, its keys and values appended to the cache);
* **course, no cache**: the same with ``use_cache=False`` (the whole sequence re-run each step);
* **torch, no cache**: :class:`TorchGPT`, the model built from PyTorch's own modules (a stack
  of ``nn.TransformerEncoderLayer(norm_first=True, activation="gelu")`` run with a causal
  mask), re-run on the whole sequence each step, as PyTorch's layers keep no cache.

For each number of new tokens it reports tokens per second (new tokens over the median time
of ``repeats`` runs, after one warm-up run), on the CPU with one thread (as the course trains;
CPU time of the process) and on CUDA when present (wall time, synchronised before each reading
of the clock), and checks that the three wrote the same tokens.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch import nn

from attention_course.reference.ch08 import GPT, generate, sample_next_token

__all__ = ["TorchGPT", "torch_gpt_twin", "MODEL", "measure", "format_rows", "main"]

#: The benchmarked model: chapter 7's width, a context long enough for the longest run.
MODEL = {"vocab_size": 64, "d_model": 64, "num_heads": 4, "d_ff": 256, "num_layers": 2, "max_len": 520}
PROMPT_LEN = 8
LENGTHS = (64, 128, 256)


class TorchGPT(nn.Module):
    """The decoder-only model of chapter 8 from ``torch.nn`` modules: ``token_embedding``,
    ``position_embedding``, ``layers`` (``nn.TransformerEncoderLayer(d_model, num_heads, d_ff,
    dropout=0, activation="gelu", batch_first=True, norm_first=True)`` each), ``ln_f`` and
    ``lm_head`` (no bias, its weight the token embedding's). ``forward(tokens)`` -> logits
    ``(B, T, V)``, under the causal mask (PyTorch's boolean masks are ``True`` where attending
    is *not* allowed). No cache: PyTorch's layers have none."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, num_layers: int, max_len: int):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True)
            for _ in range(num_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[1]
        positions = torch.arange(T, device=tokens.device)
        X = self.token_embedding(tokens) + self.position_embedding(positions)
        future = torch.ones(T, T, dtype=torch.bool, device=tokens.device).triu(1)
        for layer in self.layers:
            X = layer(X, src_mask=future, is_causal=True)
        return self.lm_head(self.ln_f(X))


def torch_gpt_twin(model: GPT) -> TorchGPT:
    """A :class:`TorchGPT` with ``model``'s sizes and weights (a tied ``model``), on its device.
    PyTorch's ``in_proj_weight`` is ``[W_q; W_k; W_v]``, the row layout of the course's
    fused ``W_qkv``."""
    first = model.blocks[0]
    twin = TorchGPT(model.token_embedding.num_embeddings, model.token_embedding.embedding_dim,
                    first.attention.num_heads, first.dense1.out_features, len(model.blocks),
                    model.position_embedding.num_embeddings)
    with torch.no_grad():
        twin.token_embedding.weight.copy_(model.token_embedding.weight)
        twin.position_embedding.weight.copy_(model.position_embedding.weight)
        for layer, block in zip(twin.layers, model.blocks):
            layer.self_attn.in_proj_weight.copy_(block.attention.W_qkv.weight)
            layer.self_attn.in_proj_bias.copy_(block.attention.W_qkv.bias)
            layer.self_attn.out_proj.load_state_dict(block.attention.W_o.state_dict())
            layer.linear1.load_state_dict(block.dense1.state_dict())
            layer.linear2.load_state_dict(block.dense2.state_dict())
            layer.norm1.load_state_dict(block.ln1.state_dict())
            layer.norm2.load_state_dict(block.ln2.state_dict())
        twin.ln_f.load_state_dict(model.ln_f.state_dict())
    return twin.to(model.token_embedding.weight.device)


@torch.no_grad()
def _torch_generate(twin: TorchGPT, prompt: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy generation by re-running ``twin`` on the whole sequence at every step."""
    tokens = prompt
    for _ in range(max_new_tokens):
        next_token = sample_next_token(twin(tokens)[:, -1], temperature=0.0)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
    return tokens


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _seconds(run, device: torch.device, repeats: int) -> tuple[float, torch.Tensor]:
    """The median time of ``repeats`` calls of ``run()`` after one warm-up call, and its output:
    on the CPU the process's CPU time (one thread: the work itself, without the waiting that a
    shared machine adds to the wall time), on CUDA the wall time."""
    clock = time.process_time if device.type == "cpu" else time.perf_counter
    output = run()
    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = clock()
        output = run()
        _synchronize(device)
        times.append(clock() - start)
    return statistics.median(times), output


@torch.no_grad()
def measure(device: torch.device, lengths=LENGTHS, repeats: int = 3, seed: int = 0) -> list[dict]:
    """One row per number of new tokens: ``device``, ``tokens``, tokens/s of ``cache``,
    ``no_cache`` and ``torch``, and ``same`` (all three wrote the same tokens). The model is
    :data:`MODEL`, drawn after ``torch.manual_seed(seed)``; the prompt has :data:`PROMPT_LEN`
    random tokens. On the CPU, one thread (PyTorch's setting is restored afterwards)."""
    torch.manual_seed(seed)
    model = GPT(**MODEL).to(device).eval()
    twin = torch_gpt_twin(model).eval()
    prompt = torch.randint(MODEL["vocab_size"], (1, PROMPT_LEN), generator=torch.Generator().manual_seed(seed))
    prompt = prompt.to(device)
    agreement = (model(prompt)[0] - twin(prompt)).abs().max().item()
    if agreement > 1e-4:
        raise AssertionError(f"the torch twin's logits differ from the course model's by {agreement:.1e}")
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    rows = []
    try:
        for n in lengths:
            runs = {
                "cache": lambda: generate(model, prompt, n, use_cache=True),
                "no_cache": lambda: generate(model, prompt, n, use_cache=False),
                "torch": lambda: _torch_generate(twin, prompt, n),
            }
            row, outputs = {"device": device.type, "tokens": n}, []
            for name, run in runs.items():
                seconds, output = _seconds(run, device, repeats)
                row[name] = n / seconds
                outputs.append(output)
            row["same"] = all(torch.equal(outputs[0], o) for o in outputs[1:])
            rows.append(row)
    finally:
        torch.set_num_threads(threads)
    return rows


def format_rows(rows: list[dict]) -> list[str]:
    """The table of :func:`measure`'s rows, a header first."""
    headers = ["device", "new tokens", "course+cache tok/s", "course tok/s", "torch tok/s", "cache speed-up",
               "same tokens"]
    lines = [[r["device"], str(r["tokens"]), f"{r['cache']:,.0f}", f"{r['no_cache']:,.0f}", f"{r['torch']:,.0f}",
              f"{r['cache'] / r['no_cache']:.1f}x", "yes" if r["same"] else "NO"] for r in rows]
    widths = [max(len(r[i]) for r in [headers, *lines]) for i in range(len(headers))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
            for r in [headers, *lines]]


def describe() -> str:
    m = MODEL
    return (f"generation: attention_course.reference.ch08.GPT (d_model {m['d_model']}, {m['num_heads']} heads, "
            f"d_ff {m['d_ff']}, {m['num_layers']} layers, vocabulary {m['vocab_size']}) and its twin of "
            f"nn.TransformerEncoderLayer(norm_first=True) layers, the same weights; greedy, one sequence, "
            f"a prompt of {PROMPT_LEN} tokens; tokens/s = new tokens / median time of the runs "
            f"(CPU: process CPU time, one thread; CUDA: wall time)")


def report(devices, repeats: int = 3, lengths=LENGTHS) -> list[str]:
    """The lines ``make bench`` prints for generation on ``devices``."""
    rows = []
    for device in devices:
        print(f"{device}: timing generation with and without the cache ...", flush=True)
        rows += measure(device, lengths, repeats)
    bad = [r for r in rows if not r["same"]]
    if bad:
        raise AssertionError(f"the three ways of generating disagree on the tokens: {bad}")
    return [describe(), *format_rows(rows)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generation", description=(
        "Tokens per second of chapter 8's GPT with and without its key-value cache, and of a twin built from "
        "torch.nn.TransformerEncoderLayer."))
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per model and length (default 3)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no GPU")
    devices = [torch.device(name) for name in ("cpu", "cuda")
               if args.device in (name, "all") and (name == "cpu" or torch.cuda.is_available())]
    print("\n".join(report(devices, args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
