/* vec.c: the definitions behind vec.h, compiled on its own into vec.o and linked into main.
 *
 * Taught in docs/cpp/build.md.
 * Build: gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -c -o build/cpp/project/vec.o kernels/cpp/project/vec.c
 */
// course: compile-only
#include "vec.h"

/* --8<-- [start:defs] */
void vec_axpy(size_t n, float alpha, const float *x, float *y) {
  for (size_t i = 0; i < n; ++i) y[i] = alpha * x[i] + y[i];
}

double vec_dot(size_t n, const float *x, const float *y) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += (double)x[i] * y[i];
  return sum;
}
/* --8<-- [end:defs] */
