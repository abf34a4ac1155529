/* memory.c: stack versus heap: where variables live, how long they live, and how to grow a heap
 * buffer safely. Also the program the page steps through with gdb.
 *
 * Taught in docs/cpp/memory.md.
 * Build: mkdir -p build/cpp && gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -o build/cpp/memory
 *        kernels/cpp/memory.c -lm
 * Debug: gcc -std=c11 -g -O0 -o build/cpp/memory_debug kernels/cpp/memory.c -lm   (then gdb, see the page)
 * Run:   ./build/cpp/memory [--n 1000]
 */
// course: run --n 1
// course: run --n 4099
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* --8<-- [start:lifetimes] */
static int calls = 0;  /* static storage: one copy for the whole run, zero-initialised */

static double *make_squares(size_t n) {
  double local[4] = {0};  /* automatic storage (the stack): gone when this function returns */
  (void)local;            /* returning `local` here would hand back a dangling pointer */
  double *heap = malloc(n * sizeof *heap);  /* the heap: lives until free, whoever holds it */
  if (!heap) return NULL;
  for (size_t i = 0; i < n; ++i) heap[i] = (double)i * (double)i;
  ++calls;
  return heap;  /* fine: the caller now owns it and must free it */
}
/* --8<-- [end:lifetimes] */

/* --8<-- [start:grow] */
/* Append to a heap array, doubling its capacity when full. realloc may move the block: always assign
 * its result to a temporary first, or a failure (NULL) leaks the old block and loses your data. */
typedef struct {
  double *data;
  size_t size, capacity;
} DoubleVec;

static int push(DoubleVec *v, double x) {
  if (v->size == v->capacity) {
    const size_t cap = v->capacity ? 2 * v->capacity : 16;
    double *grown = realloc(v->data, cap * sizeof *grown);
    if (!grown) return 1;  /* v->data is still valid and still ours */
    v->data = grown;
    v->capacity = cap;
  }
  v->data[v->size++] = x;
  return 0;
}
/* --8<-- [end:grow] */

/* --8<-- [start:mean] */
static double mean_of(const double *values, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += values[i];
  return sum / (double)n;  /* a good place for a gdb breakpoint: `break mean_of` */
}
/* --8<-- [end:mean] */

int main(int argc, char **argv) {
  Cli cli;
  cli_init(&cli, argc, argv);
  const long n = cli_long(&cli, "--n", 1000, 1, 100000000);
  cli_finish(&cli);
  double *squares = make_squares((size_t)n);
  DoubleVec v = {NULL, 0, 0};
  if (!squares) {
    fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  for (long i = 0; i < n; ++i) {
    if (push(&v, squares[i]) != 0) {
      fprintf(stderr, "error: out of memory\n");
      return 1;
    }
  }
  int ok = check_close_f64("heap_vector_push", v.data, squares, (size_t)n, 0.0, 0.0);
  /* sum of i^2 for i < n is (n-1) n (2n-1) / 6 */
  const double want = (double)(n - 1) * (double)n * (double)(2 * n - 1) / 6.0 / (double)n;
  const double got = mean_of(v.data, v.size);
  ok = check_close_f64("mean_of_squares", &got, &want, 1, 1e-12, 0.0) && ok;
  ok = check_true("capacity_doubles", v.capacity >= v.size && v.capacity < 2 * v.size + 16 && calls == 1, 3,
                  "amortised growth") && ok;
  free(v.data);
  free(squares);
  return ok ? 0 : 1;
}
