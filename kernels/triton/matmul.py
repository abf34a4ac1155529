# matmul.py: C = A @ B (fp16 or bf16 inputs, fp32 accumulation, output in the input type) in Triton, one program per
# output tile, with the tile shape chosen by @triton.autotune and grouped tile ordering for L2 reuse.
#
# Taught in docs/triton/matmul.md. Without a CUDA GPU the kernel runs in Triton's interpreter on
# the CPU (TRITON_INTERPRET=1) with one fixed tile shape (the interpreter cannot time candidates).
# Run:   python kernels/triton/matmul.py --m 129 --n 67 --k 257
# Timed against cuBLAS (through PyTorch, same precision and accumulation) by kernels/triton/bench.py.
#
# course: run --m 1 --n 1 --k 1
# course: run --m 129 --n 67 --k 257
# course: run --m 61 --n 200 --k 31
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"


# --8<-- [start:configs]
def tile_configs():
    """Candidate tile shapes: autotuning times each one on the first call for a new (M, N, K)."""
    if INTERPRET:  # the interpreter cannot time anything; one config means nothing is tuned
        return [triton.Config({"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 4})]
    return [
        triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in [
            (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 64, 64, 4, 4),
            (64, 128, 64, 4, 4), (128, 128, 32, 4, 4), (64, 64, 64, 4, 5), (64, 32, 32, 2, 5),
        ]
    ]
# --8<-- [end:configs]


# --8<-- [start:kernel]
@triton.autotune(configs=tile_configs(), key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped ordering: consecutive programs walk down GROUP_M tile rows before moving right, so
    # the tiles of A and B they load are still in L2 when neighbours need them.
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * tiles_n)) % group_rows
    pid_n = (pid % (GROUP_M * tiles_n)) // group_rows

    rm = pid_m * BM + tl.arange(0, BM)               # the rows of C this program owns
    rn = pid_n * BN + tl.arange(0, BN)               # and its columns
    rk = tl.arange(0, BK)
    a_tile = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak   # a BM x BK block of pointers
    b_tile = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn   # a BK x BN block of pointers
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_tile, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_tile, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)                      # a tile product: tensor cores on the GPU
        a_tile += BK * stride_ak
        b_tile += BK * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)               # one rounding, to fp16 or bf16, at the end
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c,
             mask=(rm[:, None] < M) & (rn[None, :] < N))
# --8<-- [end:kernel]


# --8<-- [start:launch]
def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply")
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        raise TypeError(f"matmul: takes two float16 or two bfloat16 inputs, got {a.dtype} and {b.dtype}")
    M, K = a.shape
    N = b.shape[1]
    if max(M * K, K * N, M * N) >= 2**31:
        raise ValueError("matmul: the kernel's offsets are 32-bit; every matrix needs fewer than 2^31 elements")
    c = torch.empty((M, N), device=a.device, dtype=a.dtype) if out is None else out
    if c.shape != (M, N) or c.dtype != a.dtype:
        raise ValueError(f"matmul: out must be {M}x{N} {a.dtype}")
    if c.numel() == 0:
        return c
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1))
    return c
# --8<-- [end:launch]


def main() -> int:
    p = course_tools.parser("autotuned fp16 matmul in Triton (the interpreter on the CPU without a GPU)")
    for name, default in (("m", 129), ("n", 67), ("k", 257)):
        p.add_argument(f"--{name}", type=course_tools.int_in(1, 1 << 14), default=default)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    a = (torch.rand(args.m, args.k, device=DEVICE) * 2 - 1).half()
    b = (torch.rand(args.k, args.n, device=DEVICE) * 2 - 1).half()
    c = torch.full((args.m, args.n), float("nan"), device=DEVICE, dtype=torch.float16)
    print(f"triton {triton.__version__}, {'interpreter on the CPU' if INTERPRET else torch.cuda.get_device_name()}")
    want = a.double() @ b.double()                   # exact products of the fp16 inputs, in float64
    # fp32 accumulation, then one rounding to fp16 (relative error 2^-11) on the way out.
    ok = course_tools.check_close("triton_matmul", matmul(a, b, out=c), want, rtol=2e-3, atol=1e-3 * args.k ** 0.5)
    if not INTERPRET:
        print(f"autotuning chose: {matmul_kernel.best_config}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
