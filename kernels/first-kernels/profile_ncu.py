"""profile_ncu.py: build vector_add.cu, profile its float4 kernel with Nsight Compute (ncu), print
ncu's report, and check that the Speed Of Light and Occupancy sections are in it.

Taught in docs/first-kernels/profiling.md. Needs ncu (part of the CUDA toolkit) and permission to
read the GPU's performance counters (root, or NVreg_RestrictProfilingToAdminUsers=0).
Run: python kernels/first-kernels/profile_ncu.py
"""
# course: gpu
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import course_tools  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "kernels/first-kernels/vector_add.cu"
BINARY = ROOT / "build/first-kernels/profile/vector_add"


def find(tool: str) -> str | None:
    return shutil.which(tool) or next((str(p) for p in Path("/usr/local").glob(f"cuda*/bin/{tool}")), None)


def main() -> int:
    course_tools.parser("Profile vector_add.cu's add_v3 with Nsight Compute and check the report.").parse_args()
    course_tools.require_cuda("torch")  # a GPU first: without one, ncu has nothing to profile
    ncu, nvcc = find("ncu"), find("nvcc")
    if not ncu or not nvcc:
        print(f"WAIVED needs ncu and nvcc on PATH (found ncu={ncu}, nvcc={nvcc})")
        return 2
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    # -lineinfo lets ncu map its measurements to source lines (the Source page of the GUI).
    build = subprocess.run([nvcc, "-O3", "-lineinfo", "-arch=native", "-o", str(BINARY), str(SOURCE)],
                           capture_output=True, text=True)
    if build.returncode != 0:
        print(build.stderr, file=sys.stderr)
        return 1
    # --8<-- [start:command]
    cmd = [ncu, "--section", "SpeedOfLight", "--section", "Occupancy",
           "--nvtx",                        # show the NVTX ranges each profiled kernel ran inside
           "-k", "regex:add_v3", "-c", "1",  # only the first launch of add_v3
           str(BINARY), "--n", "16777259"]
    # --8<-- [end:command]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    report = proc.stdout
    # Print the report as ncu wrote it, with the program's own
    # CHECK lines marked as the program's, so the harness counts only this script's checks below.
    for line in report.splitlines():
        print(("  [program] " + line) if line.startswith("CHECK ") else line)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        course_tools.check_true("ncu_ran", False, 1, f"exit_code={proc.returncode}")
        return 1
    facts = {
        "ncu_profiled_add_v3": "add_v3" in report and "==PROF== Profiling" in proc.stdout + proc.stderr,
        "ncu_speed_of_light_section": "GPU Speed Of Light Throughput" in report and "Memory Throughput" in report,
        "ncu_occupancy_section": "Achieved Occupancy" in report and "Theoretical Occupancy" in report,
        "program_checked_itself": report.count("CHECK PASS add_v") == 3 and "CHECK FAIL" not in report,
    }
    for name, ok in facts.items():
        course_tools.check_true(name, ok, 1)
    return 0 if all(facts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
