"""decode_step_torch.py: why decode is memory-bound, measured. One decode step of a Llama-3.2-1B-shaped
model in PyTorch (random bf16 weights of the real shapes: hidden 2048, 16 layers, 32 query heads, 8 KV
heads, head dimension 64, MLP 8192, vocabulary 128,256, tied embeddings; a KV cache of 1,024 tokens per
sequence), each way a performance engineer would run it (eager, eager captured in a CUDA graph,
torch.compile in each mode), beside a copy of the same bytes: the time a step would take if it only
read its bytes once at copy speed.

Taught in docs/serving/memory-bound.md. A step reads every weight once (the embedding once, by the
output layer; the lookup reads one row per sequence) and each sequence's whole KV cache; the BENCH rows
carry those bytes, the batch and the bytes read per generated token.

The new token's K and V are attended to directly, beside the cache (the same softmax over 1,025 keys);
writing them into the cache, a few KiB, is left out so that every configuration runs the same pure
function, with no input mutated (reduce-overhead's CUDA graphs would otherwise skip mutated inputs).

Checks: the same code in float32 against float64 on a tiny configuration of the same structure (the
code is right), then every configuration in bf16 there against float64 with the course's data-scaled
tolerance, taking eager bf16 as the computation in the kernels' precision (twice its error allowed);
at the real size, each configuration's logits against eager's.

Run: python kernels/serving/decode_step_torch.py           (checks, on the tiny configuration)
     python kernels/serving/decode_step_torch.py --bench   (also times the real shapes, batch 1, 8, 64)

# course: gpu
# course: run
# course: bench --bench
"""

import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

DEVICE = "cuda"  # where the model is built (a CPU test of the model's code sets "cpu")


# --8<-- [start:config]
@dataclass(frozen=True)
class Config:
    hidden: int = 2048
    layers: int = 16
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 64
    mlp: int = 8192
    vocab: int = 128256
    context: int = 1024      # tokens already in each sequence's cache; the new one is at this position
    rope_theta: float = 500000.0
    eps: float = 1e-5

    def weight_elements(self) -> int:
        qkv = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim
        per_layer = qkv + self.heads * self.head_dim * self.hidden + 3 * self.hidden * self.mlp + 2 * self.hidden
        return self.layers * per_layer + self.hidden + self.vocab * self.hidden  # final norm, tied embedding

    def cache_elements(self) -> int:  # per sequence: K and V of every layer
        return self.layers * 2 * self.kv_heads * self.context * self.head_dim

    def step_bytes(self, batch: int, itemsize: int = 2) -> int:
        """The fewest bytes one step reads: every weight once, each sequence's cache and embedding row."""
        return itemsize * (self.weight_elements() + batch * (self.cache_elements() + self.hidden))


LLAMA_1B = Config()
TINY = Config(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, mlp=96, vocab=1003, context=37)
# --8<-- [end:config]


def build_model(torch, c: Config, dtype, batch: int, seed: int):
    """The model as a module (its weights and caches are parameters and buffers: static inputs to a
    CUDA graph), with random weights rounded to bf16 whatever `dtype` is, so that models of one seed
    in different dtypes compute the same function, and random caches and tokens."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)

    def weight(*shape, std, mean=0.0):
        w = torch.randn(shape, generator=g, device=DEVICE) * std + mean
        return torch.nn.Parameter(w.bfloat16().to(dtype), requires_grad=False)

    def norm_weight():
        return weight(c.hidden, std=0.1, mean=1.0)

    class DecodeModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            qkv_out = (c.heads + 2 * c.kv_heads) * c.head_dim
            self.embed = weight(c.vocab, c.hidden, std=1.0)
            self.attn_norm = torch.nn.ParameterList(norm_weight() for _ in range(c.layers))
            self.qkv = torch.nn.ParameterList(weight(c.hidden, qkv_out, std=c.hidden**-0.5) for _ in range(c.layers))
            self.o = torch.nn.ParameterList(
                weight(c.heads * c.head_dim, c.hidden, std=(c.heads * c.head_dim)**-0.5) for _ in range(c.layers))
            self.mlp_norm = torch.nn.ParameterList(norm_weight() for _ in range(c.layers))
            self.gate_up = torch.nn.ParameterList(
                weight(c.hidden, 2 * c.mlp, std=c.hidden**-0.5) for _ in range(c.layers))
            self.down = torch.nn.ParameterList(weight(c.mlp, c.hidden, std=c.mlp**-0.5) for _ in range(c.layers))
            self.final_norm = norm_weight()
            cache_shape = (c.layers, batch, c.kv_heads, c.context, c.head_dim)
            self.register_buffer("cache_k", weight(*cache_shape, std=1.0).data)
            self.register_buffer("cache_v", weight(*cache_shape, std=1.0).data)
            acc = torch.float64 if dtype == torch.float64 else torch.float32
            inv_freq = c.rope_theta ** (-torch.arange(0, c.head_dim, 2, dtype=torch.float64, device=DEVICE)
                                        / c.head_dim)
            angle = c.context * inv_freq                    # the new token's position
            self.register_buffer("cos", angle.cos().to(acc))
            self.register_buffer("sin", angle.sin().to(acc))

        forward = decode_step(torch, c)

    return DecodeModel(), torch.randint(0, c.vocab, (batch,), generator=g, device=DEVICE)


# --8<-- [start:step]
def decode_step(torch, c: Config):
    """forward(self, tokens): logits (batch, vocab) in fp32 for one new token per sequence.
    Matrix products in the weights' dtype; norms, rotary embedding and softmax in fp32 (float64 for a
    float64 model), as Hugging Face's Llama computes them."""
    F = torch.nn.functional

    def rms_norm(x, weight):
        xf = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + c.eps)).to(x.dtype) * weight

    def rope(x, cos, sin):                                  # x: (batch, heads, head_dim), rotate-half form
        xf = x.to(cos.dtype)
        x1, x2 = xf.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)

    def attention(self, layer, q, k_new, v_new):
        """softmax(q K^T / sqrt(d)) V over the cache's tokens and the new one; query heads grouped by
        KV head: q (batch, kv_heads, group, head_dim) against K (batch, kv_heads, tokens, head_dim)."""
        b, group = q.shape[0], c.heads // c.kv_heads
        q = q.view(b, c.kv_heads, group, c.head_dim)
        k_new, v_new = k_new.view(b, c.kv_heads, 1, c.head_dim), v_new.view(b, c.kv_heads, 1, c.head_dim)
        scores = torch.cat((q @ self.cache_k[layer].transpose(-1, -2), q @ k_new.transpose(-1, -2)), dim=-1)
        p = torch.softmax(scores.to(self.cos.dtype) / math.sqrt(c.head_dim), dim=-1).to(q.dtype)
        out = p[..., :c.context] @ self.cache_v[layer] + p[..., c.context:] @ v_new
        return out.reshape(b, c.heads * c.head_dim)

    def forward(self, tokens):
        b, hd = tokens.shape[0], c.head_dim
        x = self.embed[tokens]                              # (batch, hidden)
        for i in range(c.layers):
            q, k, v = (rms_norm(x, self.attn_norm[i]) @ self.qkv[i]).split(
                [c.heads * hd, c.kv_heads * hd, c.kv_heads * hd], dim=-1)
            q = rope(q.view(b, c.heads, hd), self.cos, self.sin)
            k = rope(k.view(b, c.kv_heads, hd), self.cos, self.sin)
            x = x + attention(self, i, q, k, v) @ self.o[i]
            gate, up = (rms_norm(x, self.mlp_norm[i]) @ self.gate_up[i]).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ self.down[i]
        logits = rms_norm(x, self.final_norm) @ self.embed.T  # tied embedding: the output layer reads it
        return logits.float() if logits.dtype != torch.float64 else logits

    return forward
# --8<-- [end:step]


def configurations(torch, model, tokens, label, modes):
    """course_tools.torch_peers over the step. Its rule that prunes CUDA graphs for an operation moving
    more than LAUNCH_BOUND_BYTES is about one large kernel; a decode step is hundreds of small kernels,
    launch-bound by nature, so every configuration is kept (nbytes 0)."""
    return course_tools.torch_peers(model, (tokens,), label, 0, modes=modes)


def check_tiny(torch, seed, modes):
    """float32 against float64 with a tight tolerance, then every bf16 configuration against float64."""
    batch = 3
    model64, tokens = build_model(torch, TINY, torch.float64, batch, seed)
    exact = model64(tokens)
    model32, _ = build_model(torch, TINY, torch.float32, batch, seed)
    rms = float(exact.pow(2).mean().sqrt())
    ok = course_tools.check_close("decode_step_float32_tiny_vs_float64", model32(tokens), exact, 1e-4, 1e-5 * rms)
    model16, _ = build_model(torch, TINY, torch.bfloat16, batch, seed)
    eager = model16(tokens).double()
    for impl, run in configurations(torch, model16, tokens, "tiny step (bf16)", modes):
        ok &= course_tools.check_scaled(course_tools.slug(impl), run(), exact, eager, TINY.vocab, group_rows=1)
    return ok


def matches_eager(torch, name: str, got, eager, rms: float, limit: float = 0.125) -> bool:
    """The RMS of got - eager over eager's RMS, at most `limit`; NaN never passes."""
    diff = float((got.double() - eager.double()).pow(2).mean().sqrt()) / rms if rms > 0 else float("nan")
    ok = diff <= limit  # NaN compares false
    print(f"CHECK {'PASS' if ok else 'FAIL'} {name} n={got.numel()} rms_diff_over_rms={diff:.3g} limit={limit}")
    return ok


# --8<-- [start:bench]
STEPS = 8  # steps timed back to back per repeat: a step's host work overlaps the previous step's GPU work


def bench(torch, batch, modes, seed):
    c = LLAMA_1B
    model, tokens = build_model(torch, c, torch.bfloat16, batch, seed)
    case, nbytes = f"b{batch} ctx{c.context}", c.step_bytes(batch)
    fields = {"batch": batch, "bytes_per_token": nbytes // batch}
    ok, eager = True, model(tokens)
    rms = float(eager.double().pow(2).mean().sqrt())
    for impl, run in configurations(torch, model, tokens, "Llama-3.2-1B step (bf16)", modes):
        # The same function as eager: a stale graph output or a miscompiled step fails here. Element by
        # element the two differ: 16 bf16 layers amplify a rounding that a fused kernel makes differently
        # (the tiny model's check above holds every configuration to float64). So the whole logits
        # vector must agree: its RMS difference from eager's within an eighth of eager's RMS.
        ok &= matches_eager(torch, course_tools.slug(f"{impl} b{batch} matches eager"), run(), eager, rms)
        ms = course_tools.time_ms(lambda: [run() for _ in range(STEPS)], repeats=10) / STEPS
        course_tools.bench(case, impl, ms, nbytes, 2.0 * batch * c.weight_elements(), **fields)
    # The reference: a copy that reads half the step's bytes and writes the other half.
    half = nbytes // 2
    src, dst = (torch.empty(half, dtype=torch.uint8, device=DEVICE),
                torch.empty(half, dtype=torch.uint8, device=DEVICE))
    ms = course_tools.time_ms(lambda: dst.copy_(src), repeats=10)
    course_tools.bench(case, "Tensor.copy_ (copy, same bytes)", ms, 2 * half, 0, peer=False, **fields)
    print(f"{case}: {nbytes / 1e9:.3f} GB read per step, {nbytes / batch / 1e6:.1f} MB per generated token")
    del model, src, dst
    torch.cuda.empty_cache()
    return ok
# --8<-- [end:bench]


def main():
    args, torch = course_tools.peer_start(
        "A Llama-3.2-1B-shaped decode step in PyTorch: checked, timed against a copy",
        "time the real shapes at batch 1, 8 and 64")
    with torch.no_grad():
        # The compile modes are checked against float64 in the checked run; the benchmark run checks
        # each at the real size against eager, and keeps its minutes for the real shapes.
        ok = check_tiny(torch, args.seed, () if args.bench else course_tools.COMPILE_MODES)
        if ok and args.bench:
            for batch in (1, 8, 64):
                modes = course_tools.COMPILE_MODES if batch == 1 else ()
                if not modes:
                    course_tools.pruned(f"b{batch} torch.compile", "compiled at batch 1 only: each mode takes "
                                        "tens of seconds to compile the 16 layers for each batch size")
                ok &= bench(torch, batch, modes, args.seed)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
