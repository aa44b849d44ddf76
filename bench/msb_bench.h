/* SPDX-License-Identifier: Apache-2.0 */
/* msb_bench's parts: the cases and the harness (msb_bench.c), the memory
 * cases (bench_memory.c). */
#ifndef MSB_BENCH_MSB_BENCH_H
#define MSB_BENCH_MSB_BENCH_H

#include <limits.h>
#include <stdbool.h>

#include <msb/msb.h>

#define SCOPE "msbbench"
#define AGENT_DIR "bench"
#define KIND "shell"
#define MAX_N 100000
#define MAX_MANY 2000

struct bench {
	int n;
	int many;
	int idle_ms;
	const char *only;
	char state_root[PATH_MAX];
	bool made_root;
	char shim[PATH_MAX];
	char agent[PATH_MAX];
	msb_router *router;
	msb_backend *backend; /* the router's, for the warm pool's verbs */
	msb_spec *conv_spec;
	msb_spec *call_spec;
	unsigned long seq;
	int failures;
};

/* A key nobody used before in this run. */
struct key_buf {
	char thread[64];
	char call[64];
	msb_key key;
};

/* msb_bench.c */
double now_ms(void);
void sleep_ms(int ms);
int cmp_double(const void *a, const void *b);
double pct(const double *v, int n, double q);
void json_str(const char *s);
void report_error(struct bench *b, const char *name, const char *what, msb_error *err);
void new_key(struct bench *b, const char *tag, bool call, struct key_buf *k);
int acquire(struct bench *b, struct key_buf *k, msb_sandbox **sb, msb_error **err);
int dispose(struct bench *b, struct key_buf *k, msb_error **err);
int exec_true(msb_sandbox *sb, msb_error **err);

/* bench_memory.c */
void case_idle_memory(struct bench *b);
void case_many(struct bench *b);

#endif
