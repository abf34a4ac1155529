"""The kernels that get a profile card, written once.

A profile card (`<!-- course:profile-card LABEL -->`, rendered by course/site/profile_card.py) shows what
Nsight Compute measured on one launch of one kernel of a chapter's main path. This list says which
kernels those are and how each is launched; three readers share it:

- kernels/profiling/profile_cards_ncu.py profiles them (one ncu run per entry, `--kernel-name KERNEL
  --launch-skip SKIP --launch-count 1`) and prints one BENCH row per entry, its `impl` the entry's label;
  the program declares this file (`course: depends`), so an edit here, or to a program named here,
  re-stales its recorded runs;
- the site renders each card from the record's passing run of that program;
- tests/test_profile_cards.py holds every entry's page to its card directive and back.

Each launch is a mode the program already has and that launches the kernel cheaply: a `--profile`
mode (one unchecked launch at the benchmark's size) where the program has one, else a checked run at a
size near the benchmark's. An entry whose program has no such mode at a representative size says so in
`needs_mode` (the card shows it): its card profiles the checked run given, until the program gains one.
"""

from __future__ import annotations

from dataclasses import dataclass

# The program's declared runs, one per group, so that a GPU run can deal them to several GPUs.
GROUPS = ("memory", "matmul", "attention", "serving", "mnist")
# What `{tmp}` in an entry's arguments stands for: a fresh temporary folder (a mode that writes files).
TMP = "{tmp}"


@dataclass(frozen=True)
class CardKernel:
    label: str             # the card's name on a page: <!-- course:profile-card LABEL -->
    title: str             # what the card shows, in a few words
    program: str           # the course program that launches the kernel
    args: tuple[str, ...]  # its command line for one representative launch
    kernel: str            # ncu's --kernel-name filter (a regex on the kernel's function name)
    page: str              # the page that shows the card
    group: str             # which of GROUPS profiles it
    launch_skip: int = 0   # launches matching `kernel` to let pass before the profiled one
    needs_mode: str = ""   # why `args` only stand in for a launch mode the program lacks

    @property
    def command(self) -> str:
        """The program and its arguments, as the card's caption names them."""
        return " ".join([self.program, *self.args])


_M4096 = ("--m", "4096", "--n", "4096", "--k", "4096")
_ATTN_MODE = ("flash_hopper.cu has one: a --profile mode that launches one version once, unchecked, "
              "at the benchmark's shape (b4 h16 s4096 d128), for ncu")
_TRAIN_V4 = ("--loss-curve", TMP, "--version", "4", "--batch", "1024")  # version 4's 50-step training mode

CARDS: tuple[CardKernel, ...] = (
    # First kernels and the memory model
    CardKernel("vector-add-v1", "vector add v1, one thread per element", "kernels/first-kernels/vector_add.cu",
               ("--n", "16777259"), "regex:add_v1", "docs/first-kernels/vector-add.md", "memory"),
    CardKernel("vector-add-v3", "vector add v3, float4", "kernels/first-kernels/vector_add.cu",
               ("--n", "16777259"), "regex:add_v3", "docs/first-kernels/vector-add.md", "memory"),
    CardKernel("coalescing-stride-1", "strided read, stride 1", "kernels/memory-model/coalescing.cu",
               ("--n", "4194304"), "regex:read_strided", "docs/memory-model/coalescing.md", "memory"),
    CardKernel("coalescing-stride-32", "strided read, stride 32", "kernels/memory-model/coalescing.cu",
               ("--n", "4194304"), "regex:read_strided", "docs/memory-model/coalescing.md", "memory",
               launch_skip=5),  # the check reads at strides 1, 2, 4, 8, 16, then 32
    CardKernel("transpose-naive", "transpose v1, naive", "kernels/memory-model/transpose.cu",
               ("--rows", "8192", "--cols", "8192"), "regex:transpose_naive", "docs/memory-model/transpose.md",
               "memory"),
    CardKernel("transpose-tile64", "transpose v7, 64x64 tiles of float4", "kernels/memory-model/transpose.cu",
               ("--rows", "8192", "--cols", "8192"), "regex:transpose_tile64_vec4",
               "docs/memory-model/transpose.md", "memory"),
    CardKernel("reduction-shared", "reduction v2, a shared-memory tree", "kernels/memory-model/reduction.cu",
               ("--n", "268435456"), "regex:^reduce_shared$", "docs/memory-model/reduction.md", "memory"),
    CardKernel("reduction-fused", "reduction v7, chunks of float4, fused", "kernels/memory-model/reduction.cu",
               ("--n", "268435456"), "regex:reduce_chunks_x4_fused", "docs/memory-model/reduction.md", "memory"),
    CardKernel("softmax-naive", "softmax v1, naive", "kernels/memory-model/softmax.cu",
               ("--rows", "8192", "--cols", "8192"), "regex:softmax_naive", "docs/memory-model/softmax.md",
               "memory"),
    CardKernel("softmax-float4", "softmax v5b, a row in registers as float4", "kernels/memory-model/softmax.cu",
               ("--rows", "8192", "--cols", "8192"), "regex:softmax_block_regs_v4_256x8",
               "docs/memory-model/softmax.md", "memory"),
    # Matrix multiplication: --profile V launches version V once at 4096^3, unchecked
    CardKernel("sgemm-v1", "SGEMM v1, naive", "kernels/matmul/sgemm.cu", ("--profile", "1", *_M4096),
               "regex:sgemm_", "docs/fast-matmul-fft/sgemm-memory.md", "matmul"),
    CardKernel("sgemm-v2", "SGEMM v2, coalesced", "kernels/matmul/sgemm.cu", ("--profile", "2", *_M4096),
               "regex:sgemm_", "docs/fast-matmul-fft/sgemm-memory.md", "matmul"),
    CardKernel("sgemm-v5", "SGEMM v5, 2D register blocking", "kernels/matmul/sgemm.cu", ("--profile", "5", *_M4096),
               "regex:sgemm_", "docs/fast-matmul-fft/sgemm-registers.md", "matmul"),
    CardKernel("sgemm-v10", "SGEMM v10, prefetched fragments (candidate 0)", "kernels/matmul/sgemm.cu",
               ("--profile", "10", "--cand", "0", *_M4096), "regex:sgemm_", "docs/fast-matmul-fft/sgemm-warps.md",
               "matmul"),
    CardKernel("hgemm-wmma", "bf16 WMMA GEMM", "kernels/matmul/hgemm_tc.cu", ("--profile", "1", *_M4096),
               "regex:hgemm_wmma", "docs/fast-matmul-fft/tensor-cores.md", "matmul"),
    CardKernel("gemm-wgmma", "wgmma + TMA GEMM", "kernels/matmul/gemm_wgmma.cu", ("--profile", "1", *_M4096),
               "regex:gemm_wgmma", "docs/fast-matmul-fft/wgmma.md", "matmul"),
    CardKernel("hopper-gemm-v3", "Hopper GEMM v3, persistent", "kernels/matmul/gemm_hopper.cu",
               ("--profile", "3", *_M4096), "regex:gemm_ws", "docs/fast-matmul-fft/hopper-gemm.md", "matmul"),
    CardKernel("hopper-gemm-v4", "Hopper GEMM v4, clusters and multicast", "kernels/matmul/gemm_hopper.cu",
               ("--profile", "4", *_M4096), "regex:gemm_ws", "docs/fast-matmul-fft/hopper-gemm-clusters.md",
               "matmul"),
    # Attention
    CardKernel("flash-fwd-v2", "flash forward v2, mma.sync", "kernels/attention/flash_fwd.cu",
               ("--batch", "2", "--heads", "2", "--seq", "1000", "--dim", "128"), "regex:flash_fwd_v2",
               "docs/attention/flash-forward.md", "attention", needs_mode=_ATTN_MODE),
    CardKernel("flash-bwd-v2", "flash backward v2, FlashAttention-2's loop", "kernels/attention/flash_bwd.cu",
               ("--batch", "1", "--heads", "2", "--seq", "777", "--dim", "128", "--causal"), "regex:bwd_v2",
               "docs/attention/backward.md", "attention", needs_mode=_ATTN_MODE),
    CardKernel("attention-hopper-v4", "Hopper attention v4, ping-pong", "kernels/attention/flash_hopper.cu",
               ("--profile", "pingpong"), "regex:flash_fwd_hopper", "docs/attention/hopper-kernel.md", "attention"),
    CardKernel("attention-hopper-v5", "Hopper attention v5, persistent", "kernels/attention/flash_hopper.cu",
               ("--profile", "persistent"), "regex:flash_fwd_persistent", "docs/attention/hopper-kernel.md",
               "attention"),
    CardKernel("attention-hopper-bwd-v4", "Hopper attention backward v4", "kernels/attention/flash_hopper_bwd.cu",
               ("--profile", "v4"), "regex:flash_bwd_hopper", "docs/attention/hopper-backward.md", "attention"),
    # Serving: the checked runs at sizes of their benchmarks
    CardKernel("decode-attention", "decode attention, split-KV", "kernels/serving/decode_attention.cu",
               ("--batch", "4", "--heads", "16", "--kv-heads", "2", "--dim", "64", "--context", "70001"),
               "regex:decode_split", "docs/serving/decode-attention.md", "serving"),
    CardKernel("fused-add-rmsnorm", "fused add + RMSNorm", "kernels/serving/fused_add_rmsnorm.cu",
               ("--tokens", "4096", "--hidden", "4096"), "regex:fused_add_rmsnorm", "docs/serving/fused-small.md",
               "serving"),
    CardKernel("rotary", "rotary embedding", "kernels/serving/rotary.cu", ("--tokens", "4096"), "regex:rotary",
               "docs/serving/fused-small.md", "serving"),
    CardKernel("silu-mul", "SiLU and multiply", "kernels/serving/silu_mul.cu",
               ("--tokens", "4096", "--inter", "8192"), "regex:silu_mul", "docs/serving/fused-small.md", "serving"),
    CardKernel("top-k-sampling", "top-k sampling", "kernels/serving/sampling.cu",
               ("--batch", "64", "--vocab", "128256", "--k", "1024", "--temperature", "0.7"), "regex:top_k_sample",
               "docs/serving/sampling.md", "serving"),
    CardKernel("fp8-gemm", "FP8 GEMM, per-tensor scales, promoted", "kernels/serving/fp8_gemm.cu",
               ("--m", "2100", "--n", "1104", "--k", "1536"), "regex:fp8_gemm_per_tensor", "docs/serving/fp8-gemm.md",
               "serving"),
    CardKernel("w4a16-fp32", "W4A16 GEMV on CUDA cores", "kernels/serving/w4a16_gemv.cu",
               ("--n", "14336", "--k", "4096", "--batch", "8"), "regex:^w4a16_gemv$", "docs/serving/w4a16.md",
               "serving"),
    CardKernel("w4a16-mma", "W4A16 GEMV on tensor cores", "kernels/serving/w4a16_gemv.cu",
               ("--n", "14336", "--k", "4096", "--batch", "8", "--variant", "mma"), "regex:w4a16_gemv_mma",
               "docs/serving/w4a16.md", "serving"),
    # MNIST: version 4's layers, in the training mode that loss_curve.py reads (its first step's launches)
    CardKernel("mnist-conv1", "MNIST v4 conv1 on CUDA cores", "kernels/mnist/mnist_train.cu", _TRAIN_V4,
               "regex:conv3x3_c1", "docs/mnist/tensor-cores.md", "mnist"),
    CardKernel("mnist-gemm", "MNIST v4 bf16 tensor-core GEMM (its first launch)", "kernels/mnist/mnist_train.cu",
               _TRAIN_V4, "regex:gemm_bf16", "docs/mnist/tensor-cores.md", "mnist"),
    CardKernel("mnist-bn-relu-pool", "MNIST fused batch norm, ReLU and pool", "kernels/mnist/mnist_train.cu",
               _TRAIN_V4, "regex:bn_relu_pool_forward", "docs/mnist/fused.md", "mnist"),
)

BY_LABEL = {c.label: c for c in CARDS}


def in_group(group: str) -> list[CardKernel]:
    return [c for c in CARDS if c.group == group]
