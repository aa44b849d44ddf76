/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `wslc` transport: the engine core over the wslc CLI contract
 * (checklist 21.10-21.12). Every invocation goes through a runner, so that
 * tests can record and script the exact argv (tests/unit/test_engine.c).
 */
#ifndef MSB_ENGINE_WSLC_H
#define MSB_ENGINE_WSLC_H

#include "engine.h"

/* What one invocation is given. */
typedef struct wslc_io {
	/* stdin, in three parts (a tar's head, its body, zero tail); none
	 * when !has_stdin (the child reads /dev/null). */
	bool has_stdin;
	const uint8_t *in_head;
	size_t in_head_len;
	const uint8_t *in_data;
	size_t in_data_len;
	size_t in_tail_len;
	/* stdout: streamed to sink when set (DOCKER_SINK_DONE-like: 1 = has
	 * all it wants, then the child is killed and reaped, 21.12), else kept
	 * up to max_out - past it `bounded` truncates (the child runs on,
	 * its output dropped) or the run is refused. */
	int (*sink)(void *ud, const uint8_t *p, size_t n, msb_error **err);
	void *sink_ud;
	uint64_t max_out;
	bool bounded;
	uint64_t max_err; /* stderr kept; the rest dropped */
	double timeout;	  /* seconds, > 0 */
	msb_cancel *cancel;
} wslc_io;

typedef struct wslc_outcome {
	int exit_code;	/* the child's; 128+N when a signal ended it */
	bool timed_out; /* killed and reaped at the bound */
	bool cancelled; /* killed and reaped at cancellation */
	bool stopped;	/* the sink had all it wanted: killed and reaped */
	bool truncated; /* stdout past max_out, bounded */
	msb_buf out;
	msb_buf err;
} wslc_outcome;

void msb_wslc__outcome_clear(wslc_outcome *o);

#define WSLC_SINK_DONE 1

/* Run argv (argv[0] is the wslc path). Returns 0 with *out filled whatever
 * the child's status, or a negative MSB_E_* when it could not be run: a
 * missing program is MSB_E_OS naming it; a host that cannot spawn
 * processes is MSB_E_VALUE saying so (21.11). */
typedef int (*wslc_run_fn)(void *ud, char *const *argv, const wslc_io *io, wslc_outcome *out,
			   msb_error **err);

/* The real runner: posix_spawn in a new process group, poll, and at any
 * abnormal end kill the group and reap the child before returning (21.12). */
int msb_wslc__spawn(void *ud, char *const *argv, const wslc_io *io, wslc_outcome *out,
		    msb_error **err);

/* Make the backend over a given runner (tests) or the real one (run NULL). */
int msb_wslc__backend_new(const msb_wslc_options *opts, wslc_run_fn run, void *run_ud,
			  msb_backend **out, msb_error **err);

/* The first WSLC_E_* or ERROR_* token in text, or NULL. Newly allocated. */
char *msb_wslc__error_code(const char *text, size_t len);

#endif
