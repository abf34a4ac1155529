/* sgemm_cpu.c: C = alpha * A * B + beta * C on one CPU core, in C, two loop orders.
 *
 * Taught in docs/fast-matmul-fft/cpu.md. Row-major float matrices, as in sgemm.cu.
 *   ijk: the textbook order; the inner loop walks down a column of B (stride N floats)
 *   ikj: the same arithmetic reordered; the inner loop walks along rows of B and C (stride 1), so
 *        every cache line fetched is used fully and the compiler can vectorise it
 * Both are checked against a float64 product. --time S also times both on S x S x S.
 * Build: gcc -std=c11 -O2 -o build/matmul/sgemm_cpu kernels/matmul/sgemm_cpu.c
 * Run:   ./build/matmul/sgemm_cpu --m 127 --n 255 --k 65
 *
 * course: run --m 127 --n 255 --k 65
 * course: run --m 1 --n 1 --k 1
 */
#define _POSIX_C_SOURCE 199309L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --8<-- [start:loops] */
static void sgemm_ijk(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j]; /* B: stride N */
      C[i * N + j] = alpha * acc + (beta != 0.0f ? beta * C[i * N + j] : 0.0f);
    }
}

static void sgemm_ikj(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  for (int i = 0; i < M; ++i) {
    float* c = C + (size_t)i * N;
    for (int j = 0; j < N; ++j) c[j] = (beta != 0.0f ? beta * c[j] : 0.0f);
    for (int k = 0; k < K; ++k) {
      const float a = alpha * A[(size_t)i * K + k];
      const float* b = B + (size_t)k * N;
      for (int j = 0; j < N; ++j) c[j] += a * b[j]; /* B and C: stride 1 */
    }
  }
}
/* --8<-- [end:loops] */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill(float* x, size_t n, unsigned* state) {
  for (size_t i = 0; i < n; ++i) {
    *state = *state * 1664525u + 1013904223u; /* a small LCG: reproducible, no dependencies */
    x[i] = (float)((*state >> 8) * (2.0 / 16777216.0) - 1.0);
  }
}

static int check(const char* name, const float* got, const double* want, size_t n, double rtol, double atol) {
  double max_err = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double err = fabs((double)got[i] - want[i]);
    if (!(err <= atol + rtol * fabs(want[i]))) {
      printf("CHECK FAIL %s n=%zu first_bad=%zu got=%.9g want=%.9g\n", name, n, i, got[i], want[i]);
      return 0;
    }
    if (err > max_err) max_err = err;
  }
  printf("CHECK PASS %s n=%zu max_abs_err=%.3g rtol=%.1g atol=%.1g\n", name, n, max_err, rtol, atol);
  return n > 0;
}

/* Options: --m, --n, --k and --time, each with an integer. Anything else, a missing value or a malformed
 * or out-of-range number prints the usage and exits 1 (never a silent default). */
static int parse_int(const char* name, const char* text, long lo, long hi, int* out) {
  char* end = NULL;
  errno = 0;
  const long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    fprintf(stderr, "error: %s expects an integer from %ld to %ld, got '%s'\n", name, lo, hi, text);
    return 0;
  }
  *out = (int)v;
  return 1;
}

static int parse_args(int argc, char** argv, int* M, int* N, int* K, int* S) {
  const char* names[] = {"--m", "--n", "--k", "--time"};
  int* slots[] = {M, N, K, S};
  const long lo[] = {1, 1, 1, 0}, hi[] = {4096, 4096, 4096, 2048};
  for (int i = 1; i < argc; i += 2) {
    int which = -1;
    for (int o = 0; o < 4; ++o)
      if (strcmp(argv[i], names[o]) == 0) which = o;
    if (which < 0) {
      fprintf(stderr, "error: unknown argument '%s'\n", argv[i]);
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "error: %s needs a value\n", argv[i]);
      return 0;
    }
    if (!parse_int(argv[i], argv[i + 1], lo[which], hi[which], slots[which])) return 0;
  }
  return 1;
}

int main(int argc, char** argv) {
  int M = 127, N = 255, K = 65, S = 0;
  if (!parse_args(argc, argv, &M, &N, &K, &S)) {
    fprintf(stderr, "usage: %s [--m 1..4096] [--n 1..4096] [--k 1..4096] [--time 0..2048]\n", argv[0]);
    return 1;
  }
  unsigned state = 2026u;
  float* A = malloc(sizeof(float) * (size_t)M * K);
  float* B = malloc(sizeof(float) * (size_t)K * N);
  float* C0 = malloc(sizeof(float) * (size_t)M * N);
  float* C = malloc(sizeof(float) * (size_t)M * N);
  double* want = malloc(sizeof(double) * (size_t)M * N);
  if (!A || !B || !C0 || !C || !want) {
    fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  fill(A, (size_t)M * K, &state);
  fill(B, (size_t)K * N, &state);
  fill(C0, (size_t)M * N, &state);
  const float alpha = 1.5f, beta = -0.5f;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int k = 0; k < K; ++k) acc += (double)A[i * K + k] * B[k * N + j];
      want[i * N + j] = alpha * acc + beta * (double)C0[i * N + j];
    }
  int ok = 1;
  const double rtol = 1e-4, atol = 1e-6 * K + 1e-6;
  memcpy(C, C0, sizeof(float) * (size_t)M * N);
  sgemm_ijk(M, N, K, alpha, A, B, beta, C);
  ok &= check("c_ijk", C, want, (size_t)M * N, rtol, atol);
  memcpy(C, C0, sizeof(float) * (size_t)M * N);
  sgemm_ikj(M, N, K, alpha, A, B, beta, C);
  ok &= check("c_ikj", C, want, (size_t)M * N, rtol, atol);
  if (S > 0) {
    float* X = malloc(sizeof(float) * (size_t)S * S * 3);
    if (!X) return 1;
    fill(X, (size_t)S * S * 2, &state);
    const double flops = 2.0 * S * (double)S * S;
    double t = now_s();
    sgemm_ijk(S, S, S, 1.0f, X, X + (size_t)S * S, 0.0f, X + 2 * (size_t)S * S);
    const double t_ijk = now_s() - t;
    t = now_s();
    sgemm_ikj(S, S, S, 1.0f, X, X + (size_t)S * S, 0.0f, X + 2 * (size_t)S * S);
    const double t_ikj = now_s() - t;
    printf("size %d: ijk %.1f ms (%.2f GFLOP/s), ikj %.1f ms (%.2f GFLOP/s)\n", S, t_ijk * 1e3, flops / t_ijk / 1e9,
           t_ikj * 1e3, flops / t_ikj / 1e9);
    free(X);
  }
  free(A), free(B), free(C0), free(C), free(want);
  return ok ? 0 : 1;
}
