/* main.c: the program of the two-file build example: calls vec.c's functions through vec.h and checks
 * them against sums written out here.
 *
 * Taught in docs/cpp/build.md, which builds it by hand (gcc -E, -S, -c, link), with make and with CMake.
 * Build: mkdir -p build/cpp/project && gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -o build/cpp/project/main
 *        kernels/cpp/project/main.c kernels/cpp/project/vec.c -lm
 * Run:   ./build/cpp/project/main [--n 1000]
 */
// course: cc-flags kernels/cpp/project/vec.c
// course: run --n 1
// course: run --n 1009
#include <stdlib.h>

#include "../check.h"
#include "vec.h"

int main(int argc, char **argv) {
  Cli cli;
  cli_init(&cli, argc, argv);
  const long n = cli_long(&cli, "--n", 1000, 1, 10000000);
  cli_finish(&cli);
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  double *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want);
  if (!x || !y || !got || !want) {
    fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  for (long i = 0; i < n; ++i) {
    x[i] = (float)(i % 17) * 0.25f - 2.0f;
    y[i] = 1.0f;
  }
  /* --8<-- [start:use] */
  vec_axpy((size_t)n, 3.0f, x, y); /* declared in vec.h, defined in vec.c: the linker connects them */
  double dot_want = 0.0;
  for (long i = 0; i < n; ++i) {
    got[i] = y[i];
    want[i] = 3.0 * x[i] + 1.0;
    dot_want += (double)x[i] * want[i];
  }
  int ok = check_close_f64("vec_axpy", got, want, (size_t)n, 1e-6, 1e-6);
  const double dot_got = vec_dot((size_t)n, x, y);
  ok = check_close_f64("vec_dot", &dot_got, &dot_want, 1, 1e-9, 1e-9) && ok;
  /* --8<-- [end:use] */
  free(x);
  free(y);
  free(got);
  free(want);
  return ok ? 0 : 1;
}
