/* pointers.c: pointers, pointers to pointers, void pointers, pointer arithmetic, and arrays versus
 * pointers: the C that every CUDA program is made of.
 *
 * Taught in docs/cpp/pointers.md. Each section checks what it claims and prints a CHECK line.
 * Build: mkdir -p build/cpp && gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -o build/cpp/pointers
 *        kernels/cpp/pointers.c -lm
 * Run:   ./build/cpp/pointers
 *        ./build/cpp/pointers --bug oob|use-after-free|overflow   (commits that bug on purpose; see the
 *        page, which runs these under AddressSanitizer and UndefinedBehaviorSanitizer)
 */
// course: run
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* --8<-- [start:basics] */
/* A pointer holds an address. `*p` reads or writes what is there; `&x` is the address of x. */
static int pointer_basics(void) {
  int x = 7;
  int *p = &x;   /* p points at x */
  *p = 42;       /* writes x through p */
  int **pp = &p; /* a pointer to a pointer: the address of p itself */
  **pp = 43;     /* two hops: pp -> p -> x */
  return check_true("pointer_basics", x == 43 && *p == 43 && *pp == &x, 3, "x written through p and pp");
}
/* --8<-- [end:basics] */

/* --8<-- [start:out_param] */
/* cudaMalloc(void **devPtr, size_t size) has this shape: the function must change the caller's
 * pointer, so it takes the pointer's address. The return value is left free for an error code. */
static int allocate_floats(float **out, size_t n) {
  *out = malloc(n * sizeof **out);  /* sizeof **out == sizeof(float), and stays right if the type changes */
  return *out != NULL ? 0 : 1;      /* 0 = success, like cudaSuccess */
}
/* --8<-- [end:out_param] */

/* --8<-- [start:void_ptr] */
/* void * is "an address of something": any object pointer converts to it and back without a cast in
 * C. It cannot be dereferenced or used in arithmetic; you must say what it points to first. This is
 * how memcpy and cudaMemcpy can copy any type: they see bytes. */
static void copy_bytes(void *dst, const void *src, size_t bytes) {
  unsigned char *d = dst;       /* unsigned char may alias any object: byte-wise access is allowed */
  const unsigned char *s = src;
  for (size_t i = 0; i < bytes; ++i) d[i] = s[i];
}
/* --8<-- [end:void_ptr] */

/* --8<-- [start:arithmetic] */
/* p + i points i ELEMENTS past p, not i bytes: the compiler scales by sizeof(*p).
 * a[i] is defined as *(a + i). A 2-D matrix in CUDA is one flat array indexed row-major. */
static int pointer_arithmetic(void) {
  double a[5] = {0.0, 1.0, 2.0, 3.0, 4.0};
  double *p = a;  /* an array name converts to a pointer to its first element */
  int ok = *(p + 3) == a[3] && &a[3] == p + 3 && 3[a] == a[3]; /* 3[a] is *(3 + a): legal, never do it */
  /* Bytes between two elements: the pointer difference counts elements. */
  ok = ok && (char *)(p + 4) - (char *)p == 4 * (long)sizeof(double) && (p + 4) - p == 4;

  enum { ROWS = 3, COLS = 4 };
  float m[ROWS * COLS];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) m[r * COLS + c] = (float)(10 * r + c); /* row-major: row r starts at r*COLS */
  float *row2 = m + 2 * COLS; /* a pointer to the start of row 2 */
  ok = ok && row2[1] == 21.0f && m[1 * COLS + 3] == 13.0f;
  return check_true("pointer_arithmetic", ok, 6, "p + i scales by the element size; row-major indexing");
}
/* --8<-- [end:arithmetic] */

/* --8<-- [start:decay] */
/* An array parameter is a pointer: `float v[8]` in a parameter list means `float *v`. That is why
 * every C (and CUDA) function that takes an array also takes its length. */
static size_t size_inside(float *v) { return sizeof v; } /* sizeof(float *), never the array's size */

static int arrays_versus_pointers(void) {
  float v[8] = {0};
  float *p = v;
  const int ok = sizeof v == 8 * sizeof(float)  /* the array: 32 bytes */
                 && sizeof p == sizeof(float *)  /* the pointer: 8 bytes on a 64-bit machine */
                 && size_inside(v) == sizeof(float *)
                 && sizeof v / sizeof v[0] == 8; /* the element count, valid only where v is an array */
  return check_true("arrays_versus_pointers", ok, 4, "an array decays to a pointer when passed");
}
/* --8<-- [end:decay] */

/* --8<-- [start:caught] */
#ifdef SHOW_COMPILE_TIME_BUGS
/* Built only with -DSHOW_COMPILE_TIME_BUGS: bugs that gcc -Wall -Wextra finds before anything runs. */
static size_t array_parameter_size(float v[8]) { return sizeof v; } /* -Wsizeof-array-argument */
static int read_past_the_end(void) {
  int *a = malloc(4 * sizeof *a);
  if (!a) return 0;
  const int last = a[4]; /* -Warray-bounds (at -O2): a constant index past a known allocation */
  free(a);
  return last;
}
#endif
/* --8<-- [end:caught] */

/* --8<-- [start:bugs] */
/* Three bugs, committed only on request (--bug ...) so the page can show the sanitizers catching
 * them. None of them is guaranteed to crash without a sanitizer: that is what makes them dangerous. */
static int commit_bug(const char *which) {
  /* volatile hides the value from the optimiser, as data read at run time would: with a constant 4,
   * gcc -Wall sees the out-of-bounds index at compile time and refuses to build (warnings are errors). */
  volatile int runtime_value = 4;
  if (strcmp(which, "oob") == 0) {
    int *a = malloc(4 * sizeof *a);
    if (!a) return 1;
    for (int i = 0; i < 4; ++i) a[i] = i;
    const int bad = a[runtime_value]; /* index 4 of 4 elements: one past the end, heap-buffer-overflow */
    free(a);
    return bad;
  }
  if (strcmp(which, "use-after-free") == 0) {
    int *a = malloc(4 * sizeof *a);
    if (!a) return 1;
    a[0] = runtime_value;
    int *volatile alias = a; /* a copy gcc cannot follow; with `a` itself, -Wuse-after-free stops the build */
    free(a);
    return alias[0]; /* the memory is no longer ours: heap-use-after-free */
  }
  if (strcmp(which, "overflow") == 0) {
    const int big = INT_MAX - 1;
    return big + runtime_value; /* signed overflow is undefined behaviour; unsigned wraps, signed does not */
  }
  return 0; /* not reached: main accepts only the three names above */
}
/* --8<-- [end:bugs] */

int main(int argc, char **argv) {
  Cli cli;
  cli_init(&cli, argc, argv);
  const char *bug = cli_str(&cli, "--bug", NULL);
  cli_finish(&cli);
  if (bug && strcmp(bug, "oob") != 0 && strcmp(bug, "use-after-free") != 0 && strcmp(bug, "overflow") != 0) {
    fprintf(stderr, "error: unknown --bug '%s' (expected oob, use-after-free or overflow)\n", bug);
    return 1;
  }
  if (bug) {
    const int result = commit_bug(bug);
    printf("the buggy code returned %d and nobody noticed\n", result);
    return 0;
  }
  int ok = pointer_basics();
#ifdef SHOW_COMPILE_TIME_BUGS
  ok = read_past_the_end() == 3 && array_parameter_size(NULL) == 32 && ok;
#endif

  float *buf = NULL;
  const size_t n = 1000;
  if (allocate_floats(&buf, n) != 0) {
    fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  double src[1000], got[1000];
  for (size_t i = 0; i < n; ++i) {
    src[i] = 0.5 * (double)i - 3.0;
    buf[i] = (float)src[i];
  }
  copy_bytes(got, src, sizeof src);  /* any type goes through void * */
  ok = check_close_f64("copy_through_void_ptr", got, src, n, 0.0, 0.0) && ok;
  for (size_t i = 0; i < n; ++i) got[i] = buf[i];
  ok = check_close_f64("out_parameter_allocation", got, src, n, 0.0, 0.0) && ok;
  free(buf);   /* every malloc has exactly one free */
  buf = NULL;  /* and a freed pointer is best set to NULL so a later use fails loudly */

  ok = pointer_arithmetic() && ok;
  ok = arrays_versus_pointers() && ok;
  return ok ? 0 : 1;
}
