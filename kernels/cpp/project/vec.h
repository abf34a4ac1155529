/* vec.h: the interface of a two-file library: declarations only. Each .c file that includes it
 * can call these functions; the linker connects the calls to the definitions in vec.c.
 *
 * Taught in docs/cpp/build.md.
 */
#ifndef COURSE_CPP_VEC_H /* include guard: a second #include of this file expands to nothing */
#define COURSE_CPP_VEC_H

#include <stddef.h>

/* --8<-- [start:decl] */
void vec_axpy(size_t n, float alpha, const float *x, float *y); /* y = alpha * x + y */
double vec_dot(size_t n, const float *x, const float *y);       /* sum of x[i] * y[i], in double */
/* --8<-- [end:decl] */

#endif /* COURSE_CPP_VEC_H */
