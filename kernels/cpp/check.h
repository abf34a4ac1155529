/* check.h: the C/C++ chapter's small stand-in for course.cuh (which needs CUDA).
 *
 * Taught in docs/cpp/index.md. It prints the same machine-readable lines as course.cuh, so the test
 * harness judges these CPU programs exactly as it judges the GPU ones:
 *   CHECK PASS <name> n=<count> ...      every compared value matched
 *   CHECK FAIL <name> n=<count> ...      a value did not (the first one is printed)
 * and it reads command-line options as strictly as course.cuh's course::Args:
 *   Cli cli; cli_init(&cli, argc, argv);
 *   const long n = cli_long(&cli, "--n", 1000, 1, 100000000);   an integer within [lo, hi]
 *   const char *bug = cli_str(&cli, "--bug", NULL);              a text option (NULL when absent)
 *   const int synthetic = cli_has(&cli, "--synthetic");          a switch
 *   cli_finish(&cli);   after every lookup: an unknown or repeated option, a missing value, a malformed
 *                       or out-of-range number prints the error and a usage line, and exits with 1
 * It is valid C11 and C++17; everything is `static inline`, so any file may include it.
 */
#ifndef COURSE_CPP_CHECK_H
#define COURSE_CPP_CHECK_H

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* --8<-- [start:cli] */
/* Strict command-line options. Each lookup marks the arguments it used and adds itself to the usage
 * line; cli_finish() rejects whatever no lookup claimed: a typo such as --nn must not silently run
 * the default. The first error wins. */
enum { CLI_MAX_ARGS = 64 };
typedef struct {
  int argc;
  char **argv;
  unsigned char used[CLI_MAX_ARGS];
  char usage[512];
  char error[256];
} Cli;

static inline void cli_note(Cli *cli, const char *item) {
  if (!strstr(cli->usage, item) && strlen(cli->usage) + strlen(item) + 1 < sizeof cli->usage)
    strcat(cli->usage, item);
}

static inline void cli_init(Cli *cli, int argc, char **argv) {
  memset(cli, 0, sizeof *cli);
  cli->argc = argc;
  cli->argv = argv;
  if (argc > CLI_MAX_ARGS) snprintf(cli->error, sizeof cli->error, "too many arguments (%d)", argc - 1);
}

/* The argument after `name`, or NULL when `name` is absent; a missing value is an error. */
static inline const char *cli_value(Cli *cli, const char *name) {
  for (int i = 1; i < cli->argc && i < CLI_MAX_ARGS; ++i) {
    if (strcmp(cli->argv[i], name) != 0) continue;
    cli->used[i] = 1;
    if (i + 1 >= cli->argc || i + 1 >= CLI_MAX_ARGS || strncmp(cli->argv[i + 1], "--", 2) == 0) {
      if (!cli->error[0]) snprintf(cli->error, sizeof cli->error, "%s needs a value", name);
      return NULL;
    }
    cli->used[i + 1] = 1;
    return cli->argv[i + 1];
  }
  return NULL;
}

static inline int cli_has(Cli *cli, const char *flag) {
  char item[96];
  snprintf(item, sizeof item, " [%s]", flag);
  cli_note(cli, item);
  int found = 0;
  for (int i = 1; i < cli->argc && i < CLI_MAX_ARGS; ++i)
    if (strcmp(cli->argv[i], flag) == 0) cli->used[i] = 1, found = 1;
  return found;
}

static inline const char *cli_str(Cli *cli, const char *name, const char *fallback) {
  char item[96];
  snprintf(item, sizeof item, " [%s TEXT]", name);
  cli_note(cli, item);
  const char *text = cli_value(cli, name);
  return text ? text : fallback;
}

static inline long cli_long(Cli *cli, const char *name, long fallback, long lo, long hi) {
  char item[96];
  snprintf(item, sizeof item, " [%s N (default %ld)]", name, fallback);
  cli_note(cli, item);
  const char *text = cli_value(cli, name);
  if (!text) return fallback;
  char *end = NULL;
  errno = 0;
  const long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    if (!cli->error[0])
      snprintf(cli->error, sizeof cli->error, "%s expects an integer from %ld to %ld, got '%s'", name, lo, hi, text);
    return fallback;
  }
  return v;
}

static inline void cli_finish(const Cli *cli) {
  char error[256];
  snprintf(error, sizeof error, "%s", cli->error);
  for (int i = 1; i < cli->argc && i < CLI_MAX_ARGS && !error[0]; ++i)
    if (!cli->used[i]) snprintf(error, sizeof error, "unknown or repeated argument '%s'", cli->argv[i]);
  if (!error[0]) return;
  fprintf(stderr, "error: %s\nusage: %s%s\n", error, cli->argc > 0 ? cli->argv[0] : "program", cli->usage);
  exit(1);
}
/* --8<-- [end:cli] */

#endif /* COURSE_CPP_CHECK_H */
