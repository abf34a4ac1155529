// cuda_graphs.cu: a launch-bound workload, a chain of many tiny kernels (each x = a_i * x + b_i on a
// short vector), launched four ways, all checked against a CPU reference and timed in the same run:
//   stream launches      one <<<>>> launch per kernel: the host's launch rate limits the chain
//   CUDA graph           the chain captured once from a stream, instantiated, relaunched whole
//   PDL stream launches  cudaLaunchKernelEx with programmatic stream serialization (compute
//                        capability 9.0+): each kernel may start while the one before finishes
//   PDL in a graph       the PDL launches captured into a graph (programmatic edges)
// and what changing a graph's parameters costs: re-capture + instantiate, re-capture +
// cudaGraphExecUpdate, or cudaGraphExecKernelNodeSetParams on every node.
//
// Taught in docs/first-kernels/cuda-graphs.md.
// Build: nvcc -O3 -arch=native -o build/first-kernels/cuda_graphs kernels/first-kernels/cuda_graphs.cu
// Run:   ./build/first-kernels/cuda_graphs --n 4099 --kernels 100
//        ./build/first-kernels/cuda_graphs --bench     (times a chain of 1000 kernels on 16384 floats)
//
// course: gpu
// course: run --n 1 --kernels 3
// course: run --n 4099 --kernels 100
// course: run --n 100003 --kernels 1000
// course: bench --bench
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

// The chain's coefficients: exact in float, |a| < 1 so the values stay bounded.
static float coef_a(int step) { return 0.5f + 0.125f * static_cast<float>(step % 4); }
static float coef_b(int step) { return 0.0625f * static_cast<float>(step % 9 - 4); }

// --8<-- [start:reference]
// fmaf on both sides rounds once, as the GPU's fma does: the results must match exactly.
static void chain_cpu(std::vector<float>& x, int kernels, float shift) {
  for (int k = 0; k < kernels; ++k)
    for (float& v : x) v = std::fmaf(coef_a(k), v, coef_b(k) + shift);
}
// --8<-- [end:reference]

// --8<-- [start:kernels]
__global__ void chain_step(float* x, int n, float a, float b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = fmaf(a, x[i], b);
}

// The same step for programmatic dependent launch. The trigger lets the next kernel in the stream be
// scheduled now (its blocks start and wait); the wait blocks until the kernel before this one has
// finished and its writes are visible. Everything after the wait may read what that kernel wrote.
__global__ void chain_step_pdl(float* x, int n, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
#endif
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = fmaf(a, x[i], b);
}
// --8<-- [end:kernels]

constexpr int kThreads = 256;

// --8<-- [start:launchers]
static void launch_chain(float* x, int n, int kernels, float shift, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>(course::ceil_div(n, kThreads));
  for (int k = 0; k < kernels; ++k) {
    chain_step<<<blocks, kThreads, 0, s>>>(x, n, coef_a(k), coef_b(k) + shift);
    CUDA_CHECK_LAUNCH();
  }
}

static void launch_chain_pdl(float* x, int n, int kernels, float shift, cudaStream_t s) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(course::ceil_div(n, kThreads)));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  for (int k = 0; k < kernels; ++k)
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, chain_step_pdl, x, n, coef_a(k), coef_b(k) + shift));
}
// --8<-- [end:launchers]

// --8<-- [start:capture]
// Record what the launcher enqueues on `s` into a graph instead of running it.
template <typename Launcher>
static cudaGraph_t capture(Launcher&& launcher, cudaStream_t s) {
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  launcher();
  CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  return graph;
}

static cudaGraphExec_t instantiate(cudaGraph_t graph) {
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  return exec;
}

// Whole-graph update: a freshly captured graph with the same topology (the same kernels in the same
// order) but other arguments replaces the executable graph's parameters, without re-instantiating.
static void update_exec(cudaGraphExec_t exec, cudaGraph_t fresh) {
  cudaGraphExecUpdateResultInfo info{};
  const cudaError_t err = cudaGraphExecUpdate(exec, fresh, &info);
  if (err != cudaSuccess || info.result != cudaGraphExecUpdateSuccess) {
    std::fprintf(stderr, "cudaGraphExecUpdate refused the update (result %d)\n", static_cast<int>(info.result));
    CUDA_CHECK(err);
    std::exit(course::kExitFail);
  }
}

// Node-by-node update: add `delta` to the offset b of every kernel node of the executable graph.
// Parameters are read from the template graph's nodes (which this does not change).
static void shift_every_node(cudaGraphExec_t exec, cudaGraph_t graph, float delta) {
  size_t count = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  for (cudaGraphNode_t node : nodes) {
    cudaKernelNodeParams p{};
    CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &p));
    float* x = *static_cast<float**>(p.kernelParams[0]);
    int n = *static_cast<int*>(p.kernelParams[1]);
    float a = *static_cast<float*>(p.kernelParams[2]);
    float b = *static_cast<float*>(p.kernelParams[3]) + delta;
    void* args[] = {&x, &n, &a, &b};  // copied by the call: locals are fine
    p.kernelParams = args;
    CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &p));
  }
}
// --8<-- [end:capture]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const bool bench = args.has("--bench");
  const int n = static_cast<int>(args.get_int("--n", bench ? 16384 : 4099, 1, 1 << 26));
  const int kernels = static_cast<int>(args.get_int("--kernels", bench ? 1000 : 100, 1, 100000));
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  args.finish();

  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const bool has_pdl = major >= 9;

  std::vector<float> x0(n), got(n);
  course::fill_uniform(x0, seed);
  float* d_x = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(float)));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));  // blocking: the timer's events on the default stream wait for it

  // Run `launch` on a fresh copy of x0 (the output poisoned first), then compare with the CPU chain
  // applied `passes` times with the offsets shifted by `shift`.
  bool ok = true;
  auto check = [&](const char* name, auto&& launch, int passes, float shift) {
    course::poison(d_x, n * sizeof(float));
    CUDA_CHECK(cudaMemcpy(d_x, x0.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    launch();
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(got.data(), d_x, n * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<float> want = x0;
    for (int p = 0; p < passes; ++p) chain_cpu(want, kernels, shift);
    ok = course::check_close(name, got.data(), want.data(), static_cast<size_t>(n), 0.0, 0.0) && ok;
  };

  const auto plain = [&] { launch_chain(d_x, n, kernels, 0.0f, s); };
  const auto pdl = [&] { launch_chain_pdl(d_x, n, kernels, 0.0f, s); };
  check("stream_launches", plain, 1, 0.0f);

  // --8<-- [start:graph]
  cudaGraph_t graph = capture(plain, s);   // nothing runs yet: the launches are recorded
  cudaGraphExec_t exec = instantiate(graph);
  check("graph_launch", [&] { CUDA_CHECK(cudaGraphLaunch(exec, s)); }, 1, 0.0f);
  check("graph_relaunched", [&] { for (int r = 0; r < 2; ++r) CUDA_CHECK(cudaGraphLaunch(exec, s)); }, 2, 0.0f);
  // --8<-- [end:graph]

  // --8<-- [start:update]
  cudaGraph_t shifted = capture([&] { launch_chain(d_x, n, kernels, 0.25f, s); }, s);
  update_exec(exec, shifted);  // exec now runs the chain with every offset + 0.25
  check("graph_exec_update", [&] { CUDA_CHECK(cudaGraphLaunch(exec, s)); }, 1, 0.25f);
  shift_every_node(exec, graph, -0.125f);  // from graph's offsets: every offset - 0.125
  check("kernel_node_set_params", [&] { CUDA_CHECK(cudaGraphLaunch(exec, s)); }, 1, -0.125f);
  // --8<-- [end:update]

  cudaGraph_t pdl_graph = nullptr;
  cudaGraphExec_t pdl_exec = nullptr;
  if (has_pdl) {
    check("pdl_stream_launches", pdl, 1, 0.0f);
    pdl_graph = capture(pdl, s);
    pdl_exec = instantiate(pdl_graph);
    check("pdl_graph_launch", [&] { CUDA_CHECK(cudaGraphLaunch(pdl_exec, s)); }, 1, 0.0f);
  } else {
    std::printf("SKIP pdl: programmatic dependent launch needs compute capability 9.0; this GPU is %d.%d\n", major,
                minor);
  }

  if (ok && bench) {
    // --8<-- [start:bench]
    char name[96];
    std::snprintf(name, sizeof(name), "chain of %d kernels on %d floats", kernels, n);
    const double moved = 2.0 * kernels * n * sizeof(float);  // each kernel reads and writes x
    const double flops = 2.0 * kernels * n;
    auto row = [&](const char* impl, auto&& fn) {
      course::print_bench(name, impl, course::time_kernel_ms(fn), moved, flops);
    };
    row("stream launches", plain);
    row("CUDA graph", [&] { CUDA_CHECK(cudaGraphLaunch(exec, s)); });
    if (has_pdl) {
      row("PDL stream launches", pdl);
      row("PDL in a graph", [&] { CUDA_CHECK(cudaGraphLaunch(pdl_exec, s)); });
    } else {
      std::printf("SKIP PDL rows: this GPU is %d.%d, programmatic dependent launch needs 9.0\n", major, minor);
    }
    // What a change of parameters costs before the relaunch (host time counts: the GPU waits for it).
    row("graph: re-capture + instantiate + launch", [&] {
      cudaGraph_t g = capture(plain, s);
      cudaGraphExec_t e = instantiate(g);
      CUDA_CHECK(cudaGraphLaunch(e, s));
      CUDA_CHECK(cudaGraphExecDestroy(e));  // destroying a launched exec is allowed: the launch completes
      CUDA_CHECK(cudaGraphDestroy(g));
    });
    row("graph: re-capture + cudaGraphExecUpdate + launch", [&] {
      cudaGraph_t g = capture(plain, s);
      update_exec(exec, g);
      CUDA_CHECK(cudaGraphLaunch(exec, s));
      CUDA_CHECK(cudaGraphDestroy(g));
    });
    row("graph: cudaGraphExecKernelNodeSetParams on every node + launch", [&] {
      shift_every_node(exec, graph, 0.0f);
      CUDA_CHECK(cudaGraphLaunch(exec, s));
    });
    // --8<-- [end:bench]
  }

  if (pdl_exec) CUDA_CHECK(cudaGraphExecDestroy(pdl_exec));
  if (pdl_graph) CUDA_CHECK(cudaGraphDestroy(pdl_graph));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(shifted));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaFree(d_x));
  return ok ? 0 : course::kExitFail;
}
