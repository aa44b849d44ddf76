/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structure-aware JSON-RPC input for the rpc and mcp fuzz targets
 * (fuzz_jsonrpc.c): the fuzz bytes steer a small grammar that builds
 * request lines from the dispatcher's own vocabulary - its method and
 * parameter names, handle names, paths with a trailing slash, NULs inside
 * strings, values of the wrong type, huge numbers, nested objects, batches
 * - or hand a raw line to the parser. Every response line is checked.
 */
#ifndef MSB_TESTS_FUZZ_JSONRPC_H
#define MSB_TESTS_FUZZ_JSONRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fz_src {
	const uint8_t *p;
	size_t n;
} fz_src;

/* The names a generated request draws from (NULL-terminated lists). */
typedef struct fz_vocab {
	const char *const *methods;
	const char *const *params;
	const char *const *strings;
	/* Parallel to methods (may be NULL): each method's own parameter names,
	 * so that most requests get past the strict parameter check. */
	const char *const *const *method_params;
	const char *const *names; /* values for a parameter called `name` (may be NULL) */
} fz_vocab;

/* What a generated request must be answered with (by id). */
typedef struct fz_expect {
	long long id;
	int code; /* the error code required; 0: any answer */
} fz_expect;

#define FZ_MAX_EXPECT 64

typedef struct fz_out {
	fz_expect expect[FZ_MAX_EXPECT];
	size_t n_expect;
	size_t answered[FZ_MAX_EXPECT]; /* responses seen per expectation */
} fz_out;

uint8_t fz_byte(fz_src *s);
/* The next line (malloc()ed, *len bytes, no newline), or NULL when the
 * input is used up. Expectations for its requests are added to out. */
char *fz_line(fz_src *s, const fz_vocab *v, fz_out *out, size_t *len);
/* false when the line must not reach the dispatcher: it names a sink
 * directory on the host, a backend that would create real sandboxes, or a
 * command that sleeps (the fake guest really sleeps). */
bool fz_safe(const char *line, size_t len);
/* Check one response line; abort() when a property breaks. */
void fz_check_line(const char *line, size_t len, fz_out *out);
/* Every expectation answered exactly once (notifications excepted). */
void fz_check_done(const fz_out *out);

#endif
