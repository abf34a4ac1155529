/* check.h: the C/C++ chapter's small stand-in for course.cuh (which needs CUDA).
 *
 * Taught in docs/cpp/index.md. It prints the same machine-readable lines as course.cuh, so the test
 * harness judges these CPU programs exactly as it judges the GPU ones:
 *   CHECK PASS <name> n=<count> ...      every compared value matched
 *   CHECK FAIL <name> n=<count> ...      a value did not (the first one is printed)
 * It is valid C11 and C++17; everything is `static inline`, so any file may include it.
 */
#ifndef COURSE_CPP_CHECK_H
#define COURSE_CPP_CHECK_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>

/* --8<-- [start:check] */
/* Compare n doubles: |got - want| <= atol + rtol * |want|. Written so that NaN never passes. */
static inline int check_close_f64(const char *name, const double *got, const double *want, size_t n,
                                  double rtol, double atol) {
  double max_abs_err = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double err = fabs(got[i] - want[i]);
    if (!(err <= atol + rtol * fabs(want[i]))) {
      printf("CHECK FAIL %s n=%zu first_bad=%zu got=%.9g want=%.9g\n", name, n, i, got[i], want[i]);
      return 0;
    }
    if (err > max_abs_err) max_abs_err = err;
  }
  if (n == 0) {
    printf("CHECK FAIL %s n=0 (nothing was compared)\n", name);
    return 0;
  }
  printf("CHECK PASS %s n=%zu max_abs_err=%.3g rtol=%.1g atol=%.1g\n", name, n, max_abs_err, rtol, atol);
  return 1;
}

/* For facts that are not arrays: `n` says how many were checked, so checking nothing cannot pass. */
static inline int check_true(const char *name, int ok, size_t n, const char *detail) {
  const int pass = ok && n > 0;
  printf("CHECK %s %s n=%zu %s\n", pass ? "PASS" : "FAIL", name, n, detail);
  return pass;
}
/* --8<-- [end:check] */

#endif /* COURSE_CPP_CHECK_H */
