/* types.c: structs, typedef and enums, the way CUDA code uses them: a small linear layer described by
 * a struct, passed by value and by pointer, with an enum choosing its activation.
 *
 * Taught in docs/cpp/types.md.
 * Build: mkdir -p build/cpp && gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -o build/cpp/types
 *        kernels/cpp/types.c -lm
 * Run:   ./build/cpp/types
 */
// course: run
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

/* --8<-- [start:types] */
/* An enum names a set of integer constants. The compiler warns (-Wswitch) when a switch over an enum
 * forgets a value, which a plain int cannot give you. */
typedef enum { ACT_NONE, ACT_RELU, ACT_SQUARE } Activation;

/* A struct groups fields; typedef gives the type a one-word name (C++ does that without typedef). */
typedef struct {
  int in, out;      /* shape: out x in weights */
  const float *w;   /* row-major weights, out rows of in columns */
  const float *b;   /* out biases */
  Activation act;
} Linear;
/* --8<-- [end:types] */

/* --8<-- [start:forward] */
static float activate(float x, Activation act) {
  switch (act) {  /* no default: so that -Wswitch names any enumerator we forget */
    case ACT_NONE: return x;
    case ACT_RELU: return x > 0.0f ? x : 0.0f;
    case ACT_SQUARE: return x * x;
  }
  return x;  /* unreachable for valid enum values */
}

/* By pointer: `layer->w` is shorthand for `(*layer).w`. Use `.` on a struct, `->` on a pointer to one. */
static void linear_forward(const Linear *layer, const float *x, float *y) {
  for (int o = 0; o < layer->out; ++o) {
    float acc = layer->b[o];
    for (int i = 0; i < layer->in; ++i) acc += layer->w[o * layer->in + i] * x[i];
    y[o] = activate(acc, layer->act);
  }
}

/* By value: the callee gets its own copy of the struct (a few pointers and ints here, so it is cheap).
 * CUDA kernel arguments are passed exactly like this: copied, by value, to the GPU at launch. */
static float first_output(Linear layer, const float *x) {
  layer.out = 1;  /* changes the copy only */
  float y = 0.0f;
  linear_forward(&layer, x, &y);
  return y;
}
/* --8<-- [end:forward] */

/* --8<-- [start:layout] */
/* Fields are laid out in order, each at an offset that is a multiple of its alignment, so the
 * compiler may insert padding. Order fields from largest to smallest to waste less. */
typedef struct { char tag; double value; char flag; } Padded;   /* 1 + 7 pad + 8 + 1 + 7 pad = 24 */
typedef struct { double value; char tag; char flag; } Packed;   /* 8 + 1 + 1 + 6 pad = 16 */
/* --8<-- [end:layout] */

int main(int argc, char **argv) {
  Cli cli;
  cli_init(&cli, argc, argv);
  cli_finish(&cli); /* no options: anything on the command line is an error */
  enum { IN = 5, OUT = 3 };
  float w[OUT * IN], b[OUT], x[IN], y[OUT];
  for (int i = 0; i < OUT * IN; ++i) w[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
  for (int o = 0; o < OUT; ++o) b[o] = 0.1f * (float)o - 0.1f;
  for (int i = 0; i < IN; ++i) x[i] = 1.0f - 0.3f * (float)i;

  /* Designated initialisers name the fields: clearer than positional ones, and order-proof. */
  Linear layer = {.in = IN, .out = OUT, .w = w, .b = b, .act = ACT_RELU};
  int ok = 1;
  const Activation acts[] = {ACT_NONE, ACT_RELU, ACT_SQUARE};
  double got[3 * OUT], want[3 * OUT];
  for (int a = 0; a < 3; ++a) {
    layer.act = acts[a];  /* `.` on the struct itself */
    linear_forward(&layer, x, y);
    for (int o = 0; o < OUT; ++o) {
      double acc = b[o];  /* the reference: the same sum in double, activation written out */
      for (int i = 0; i < IN; ++i) acc += (double)w[o * IN + i] * x[i];
      want[a * OUT + o] = a == 0 ? acc : a == 1 ? (acc > 0 ? acc : 0) : acc * acc;
      got[a * OUT + o] = y[o];
    }
  }
  ok = check_close_f64("linear_forward", got, want, 3 * OUT, 1e-5, 1e-6) && ok;

  layer.act = ACT_NONE;
  const float y0 = first_output(layer, x);  /* a copy went in; our layer is unchanged */
  ok = check_true("pass_by_value", layer.out == OUT && y0 == (float)got[0] ? 1 : 0, 2,
                  "the callee changed its copy, not ours") && ok;

  const int layout_ok = sizeof(Padded) == 24 && offsetof(Padded, value) == 8 && sizeof(Packed) == 16 &&
                        offsetof(Packed, flag) == 9 && _Alignof(double) == 8;
  ok = check_true("struct_layout", layout_ok, 5, "padding follows alignment") && ok;
  return ok ? 0 : 1;
}
