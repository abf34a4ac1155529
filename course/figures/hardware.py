"""The GPU and its toolchain (chapters GPU introduction and Setup): one Hopper SM, the memory
hierarchy, what a fat binary holds, and the copies between host and device."""

from __future__ import annotations

from ..svg import (BLUE, CARD, GREEN, GREY, INK, MUTED, ORANGE, PANEL, PURPLE, STRONG_BLUE, STRONG_GREEN,
                   STRONG_ORANGE, Svg)
from .card import figure


@figure(560, "One Hopper SM (compute capability 9.0); the H200 and the H100 SXM have 132")
def h100_sm(s: Svg) -> None:
    """One streaming multiprocessor (SM) of the H100, the same in the H200, after NVIDIA's Hopper whitepaper"""
    s.rect(20, 40, 720, 470, fill=CARD, width=1.5)
    s.box(40, 52, 680, 26, "L1 instruction cache", GREY)
    pw, ph = 330, 180  # the four partitions, a 2 x 2 grid
    for i in range(4):
        x = 40 + (i % 2) * (pw + 20)
        y = 88 + (i // 2) * (ph + 10)
        s.rect(x, y, pw, ph, fill=PANEL, width=1.2)
        s.text(x + 8, y + 16, f"Partition {i}", 12, anchor="start", weight="bold")
        s.box(x + 100, y + 5, 222, 18, "L0 instruction cache", GREY, size=11)
        s.box(x + 8, y + 28, 314, 20, "Warp scheduler (one warp's instruction per clock)", ORANGE, size=11)
        s.box(x + 8, y + 52, 314, 24, "Register file: 16,384 x 32-bit (64 KB)", BLUE, size=11)
        s.box(x + 8, y + 80, 74, 44, "INT32", GREEN, size=11, sub="x16")
        s.box(x + 86, y + 80, 74, 44, "FP32", GREEN, size=11, sub="x32")
        s.box(x + 164, y + 80, 74, 44, "FP64", GREEN, size=11, sub="x16")
        s.box(x + 242, y + 80, 80, 44, "Tensor core", PURPLE, size=11, sub="4th gen")
        s.box(x + 8, y + 130, 232, 22, "LD/ST units (loads and stores)", GREY, size=11)
        s.box(x + 244, y + 130, 78, 22, "SFU", GREY, size=11)
        s.text(x + pw / 2, y + 170, "up to 16 resident warps scheduled here", 10, fill=MUTED)
    s.box(40, 466, 300, 34, "Tensor Memory Accelerator (TMA)", PURPLE, size=12)
    s.box(350, 466, 370, 34, "256 KB L1 data cache / shared memory", BLUE, size=12, weight="bold")
    s.text(380, 532, "Per SM: 65,536 registers, up to 228 KB of the 256 KB as shared memory, "
           "up to 64 resident warps.", 11, fill=MUTED)
    s.caption(550, "Datasheet facts: NVIDIA H100 Tensor Core GPU Architecture whitepaper.")


@figure(420, "Memory hierarchy of the H200 SXM: smaller and faster at the top")
def memory_hierarchy(s: Svg) -> None:
    """The H200's memory hierarchy, from registers to host memory, with datasheet sizes (its L2 as it reports it)"""
    levels = [
        ("Registers", "private to a thread", "64K x 32-bit per SM (256 KB)", BLUE),
        ("Shared memory / L1 cache", "shared by a block, on the SM", "256 KB per SM, up to 228 KB shared", BLUE),
        ("L2 cache", "shared by all 132 SMs", "60 MiB (as the H200 reports it)", GREEN),
        ("Global memory (HBM3e)", "every thread, and the host by copies", "141 GB, 4.8 TB/s (datasheet)", ORANGE),
        ("Host memory", "across PCIe, from the CPU side", "the CPU's DRAM", GREY),
    ]
    top, step = 46, 66
    for i, (name, who, size, fill) in enumerate(levels):
        inset = 150 - i * 32
        x, w = 40 + inset, 680 - 2 * inset
        y = top + i * step
        s.rect(x, y, w, step - 10, fill=fill, width=1.2)
        s.text(380, y + 22, name, 14, weight="bold")
        s.text(380, y + 42, f"{who}; {size}", 12, fill=INK)
    s.line(28, top + 6, 28, top + 5 * step - 14, arrow=True)
    s.text(20, top + 5 * step / 2, "slower, larger", 11, fill=MUTED, anchor="middle")
    s.items[-1] = s.items[-1].replace("<text ", f'<text transform="rotate(-90 20 {top + 5 * step / 2:g})" ')
    s.caption(400, "Datasheet figures (H200 SXM), but the L2 as the H200 reports it; measured bandwidths "
               "are on the pages' results tables.")


@figure(380, "One fat binary, many GPUs: matching SASS, or else the newest PTX, JIT-compiled")
def fat_binary(s: Svg) -> None:
    """What the driver loads from a fat binary holding SASS for sm_75, sm_80 and sm_90 and PTX for compute_90: a Turing
    GPU (7.5) runs the sm_75 SASS, an A100 (8.0) and an 8.6 or 8.9 GPU the sm_80 SASS, an H100 (9.0) the sm_90 SASS,
    and a Blackwell GPU (10.0 or 12.0) JIT-compiles the compute_90 PTX"""
    s.panel(30, 50, 250, 270, "the binary")
    images = [("SASS sm_75", BLUE, 86), ("SASS sm_80", BLUE, 146), ("SASS sm_90", BLUE, 206),
              ("PTX compute_90", ORANGE, 266)]
    for label, fill, y in images:
        s.box(50, y, 210, 40, label, fill, size=13, weight="bold")
    gpus = [("Turing (7.5): sm_75 SASS", 80, 86), ("A100 (8.0): sm_80 SASS", 126, 146),
            ("8.6, 8.9 (consumer): sm_80 SASS", 172, 146), ("H100, H200 (9.0): sm_90 SASS", 218, 206),
            ("Blackwell (10.0, 12.0): PTX, JIT", 272, 266)]
    for name, y, target in gpus:
        s.box(440, y, 290, 36, name, GREEN if "JIT" not in name else ORANGE, size=12)
        s.line(438, y + 18, 262, target + 20, arrow=True, stroke=STRONG_BLUE if "JIT" not in name else STRONG_ORANGE,
               width=1.2)
    s.lines(380, 340, ["SASS runs on its own major version at the same or a higher minor; PTX runs on any GPU of "
                       "at least its",
                       "compute capability. Built with -gencode for sm_75, sm_80, sm_90 and compute_90 (page's "
                       "example)."])


@figure(360, "Pageable, pinned and device-to-device copies")
def host_device_copies(s: Svg) -> None:
    """Three copies the bandwidth page times: from pageable host memory the driver first copies into a pinned staging
    buffer and the GPU's copy engine reads that; from pinned memory the copy engine reads directly across PCIe; a
    device-to-device copy reads and writes device memory, so it moves twice the buffer's size"""
    s.panel(30, 50, 300, 250, "host (CPU memory)")
    s.panel(430, 50, 300, 250, "device (GPU memory)")
    s.box(50, 84, 150, 40, "pageable (malloc)", GREY, size=12)
    s.box(50, 150, 150, 40, "pinned staging", ORANGE, size=12)
    s.line(125, 126, 125, 148, arrow=True)
    s.text(135, 141, "the driver copies", 12, anchor="start")
    s.box(50, 220, 190, 40, "pinned (cudaMallocHost)", ORANGE, size=12)
    s.box(450, 150, 120, 40, "copy engine", PURPLE, size=12)
    s.line(202, 170, 448, 170, arrow=True, stroke=STRONG_BLUE, width=1.5)
    s.line(242, 240, 448, 180, arrow=True, stroke=STRONG_BLUE, width=1.5)
    s.text(380, 160, "PCIe (DMA)", 12)
    s.box(590, 150, 120, 40, "buffer", BLUE, size=12)
    s.line(572, 170, 588, 170, arrow=True)
    s.box(590, 220, 120, 40, "copy of it", BLUE, size=12)
    s.line(650, 192, 650, 218, arrow=True, stroke=STRONG_GREEN, width=1.5)
    s.text(644, 210, "read + write", 12, anchor="end")
    s.text(380, 326, "A device-to-device copy of B bytes moves 2 x B bytes through device memory: the copy "
           "bandwidth counts both.", 12)
    s.caption(346, "Pinned memory is also what asynchronous copies need; pin what you transfer often.", 12)


@figure(400, "hello<<<2, 4>>>: the host launches and waits; eight threads each write their mark", heading_size=14)
def hello_launch(s: Svg) -> None:
    """hello_gpu: the host allocates marks on the device, launches hello with 2 blocks of 4 threads, which returns at
    once, checks the launch, then waits with cudaDeviceSynchronize, which also prints the kernel's printf output, and
    copies marks back. On the device each of the 8 threads computes its global id, blockIdx.x times blockDim.x plus
    threadIdx.x, 0 to 7, and writes id + 1 into marks at that index"""
    s.panel(30, 48, 250, 300, "host (CPU)")
    steps = [("cudaMalloc(&marks)", GREY), ("hello<<<2, 4>>>(marks)", PURPLE), ("CUDA_CHECK_LAUNCH()", GREY),
             ("cudaDeviceSynchronize()", ORANGE), ("cudaMemcpy(..., DeviceToHost)", GREY)]
    for i, (label, fill) in enumerate(steps):
        s.box(46, 76 + i * 50, 218, 34, label, fill, size=12)
        if i:
            s.line(155, 76 + i * 50 - 16, 155, 76 + i * 50 - 2, arrow=True)
    s.panel(310, 48, 420, 300, "device (GPU): a grid of 2 blocks")
    for b in range(2):
        x = 326 + b * 202
        s.rect(x, 80, 186, 120, fill=BLUE if b == 0 else GREEN)
        s.text(x + 93, 100, f"block {b}: threads 0 to 3", 12, weight="bold")
        for t in range(4):
            s.box(x + 10 + t * 42, 112, 38, 34, str(t), GREY, size=13)
            s.text(x + 29 + t * 42, 176, str(b * 4 + t), 13, weight="bold")
        s.text(x + 93, 194, "global id", 12)
    s.text(520, 226, "global id = blockIdx.x * blockDim.x + threadIdx.x, blockDim.x = 4", 12)
    s.text(326, 262, "marks", 12, anchor="start", weight="bold")
    for i in range(8):
        s.box(380 + i * 42, 246, 38, 28, str(i + 1), BLUE if i < 4 else GREEN, size=12)
    s.text(548, 296, "thread i writes marks[i] = i + 1; the host checks all eight", 12)
    s.line(264, 143, 324, 143, arrow=True, dash="4 3")
    s.text(294, 135, "launch", 11, fill=MUTED)
    s.text(155, 334, "the sync waits for the kernel", 12, fill=MUTED)
    s.caption(380, "printf output is buffered on the device and printed when the host next waits for it.", 12)


@figure(420, "What the device query asks, and where the course uses each answer")
def device_query(s: Svg) -> None:
    """Two ways to ask the runtime about a GPU: cudaGetDeviceProperties fills the whole cudaDeviceProp struct;
    cudaDeviceGetAttribute returns one value, and in CUDA 13 is the only way to read the clock rates that the struct
    no longer has. The facts the program prints and where the course uses them: the compute capability chooses the
    sm_ target and what is waived; the SM count sizes grids; shared memory per block and per SM bound tiles and
    occupancy; registers per SM bound occupancy; the warp size, 32, underlies shuffles and reductions; the memory
    clock and bus width give the bandwidth ceiling"""
    s.box(30, 60, 220, 48, "cudaGetDeviceProperties", BLUE, size=12, weight="bold", sub="the whole cudaDeviceProp")
    s.box(30, 130, 220, 48, "cudaDeviceGetAttribute", BLUE, size=12, weight="bold",
          sub="one value; clocks in CUDA 13")
    facts = [("compute capability", "sm_ target, waivers"), ("SM count", "grid sizes, grid-stride loops"),
             ("shared memory per block, per SM", "tile sizes, occupancy"), ("registers per SM", "occupancy"),
             ("warp size: 32", "shuffles, reductions"), ("memory clock x bus width", "the bandwidth ceiling")]
    s.rect(286, 46, 248, 302, fill=PANEL, width=1.0)
    for i, (fact, use) in enumerate(facts):
        y = 56 + i * 50
        s.box(300, y, 220, 38, fact, GREY, size=12)
        s.line(534, y + 19, 550, y + 19, arrow=True)
        s.text(556, y + 23, use, 12, anchor="start")
    s.line(250, 84, 284, 150, arrow=True)
    s.line(250, 154, 284, 190, arrow=True)
    s.text(140, 214, "the program checks", 12, fill=MUTED)
    s.text(140, 230, "that the two agree", 12, fill=MUTED)
    s.lines(380, 372, ["Bandwidth = 2 transfers per memory clock x the bus width in bytes: the theoretical peak,",
                       "which measured copies never quite reach."], step=18, size=12)
