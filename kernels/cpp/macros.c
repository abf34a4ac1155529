/* macros.c: the preprocessor: object-like and function-like macros, their traps, stringification,
 * conditional compilation, and the error-check macro every CUDA program is built around.
 *
 * Taught in docs/cpp/preprocessor.md.
 * Build: mkdir -p build/cpp && gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -o build/cpp/macros
 *        kernels/cpp/macros.c -lm
 * Run:   ./build/cpp/macros
 * See the expansion: gcc -std=c11 -E -P kernels/cpp/macros.c | tail -n 40
 */
// course: run
#include "check.h"

/* --8<-- [start:object_like] */
/* Object-like macros are text substitution: the compiler never sees the name BLOCK_SIZE. */
#define BLOCK_SIZE 256
#define N_ITEMS 1000
/* --8<-- [end:object_like] */

/* --8<-- [start:function_like] */
#define SQUARE_BAD(x) x * x             /* no parentheses: SQUARE_BAD(1 + 2) is 1 + 2 * 1 + 2 = 5 */
#define SQUARE(x) ((x) * (x))           /* parenthesise every use of a parameter, and the whole */
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define STR(x) #x                       /* # turns the argument's text into a string literal */
#define CONCAT(a, b) a##b               /* ## pastes two tokens into one */
/* --8<-- [end:function_like] */

/* --8<-- [start:check_macro] */
/* The shape of CUDA_CHECK: a macro, not a function, so that #call, __FILE__ and __LINE__ name the
 * failing call. do { ... } while (0) makes the macro one statement, safe inside an unbraced if/else. */
typedef enum { OK = 0, ERR_BAD_VALUE = 1 } Status;
static int failures = 0;
#define STATUS_CHECK(call)                                                          \
  do {                                                                              \
    Status status_ = (call); /* evaluated once, even if `call` has side effects */ \
    if (status_ != OK) {                                                            \
      printf("error %d at %s:%d in: %s\n", (int)status_, __FILE__, __LINE__, #call); \
      ++failures;                                                                   \
    }                                                                               \
  } while (0)

static Status set_positive(int *out, int value) {
  if (value <= 0) return ERR_BAD_VALUE;
  *out = value;
  return OK;
}
/* --8<-- [end:check_macro] */

/* --8<-- [start:conditional] */
/* Conditional compilation: build with -DVERBOSE to switch the printing on. nvcc uses the same
 * mechanism: __CUDACC__ is defined when nvcc compiles, __CUDA_ARCH__ only in device code. */
#ifdef VERBOSE
#define LOG(msg) printf("log: %s\n", msg)
#else
#define LOG(msg) ((void)0)
#endif
#ifdef __CUDACC__
#define COMPILED_BY "nvcc"
#else
#define COMPILED_BY "a C compiler"
#endif
/* --8<-- [end:conditional] */

int main(int argc, char **argv) {
  Cli cli;
  cli_init(&cli, argc, argv);
  cli_finish(&cli); /* no options: anything on the command line is an error */
  LOG("starting");
  int ok = 1;
  const int bad = SQUARE_BAD(1 + 2), good = SQUARE(1 + 2);
  const int blocks = CEIL_DIV(N_ITEMS, BLOCK_SIZE);
  int CONCAT(tile, _width) = 16; /* declares `tile_width` */
  const double got[4] = {bad, good, blocks, tile_width}, want[4] = {5, 9, 4, 16};
  ok = check_close_f64("macro_expansion", got, want, 4, 0.0, 0.0) && ok;

  int x = 0;
  if (x == 0)
    STATUS_CHECK(set_positive(&x, 5)); /* fine: the macro is a single statement */
  else
    STATUS_CHECK(set_positive(&x, 1));
  STATUS_CHECK(set_positive(&x, -1)); /* fails on purpose: prints the call, file and line */
  ok = check_true("check_macro", x == 5 && failures == 1, 2, "one failure reported with its location") && ok;

  const char *text = STR(BLOCK_SIZE);  /* # applies before expansion: the string is "BLOCK_SIZE" */
  ok = check_true("stringify", text[0] == 'B', 1, COMPILED_BY) && ok;
  return ok ? 0 : 1;
}
