/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the CLI asks of the Linux-only backends (ns, oci, vm; docs/windows.md):
 * their state roots, an image's unpacking progress, the ns listing of
 * `msb ls` (an engine backend's is ls_engine.c's). Windows has backends_win32.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msb/engine.h>
#include <msb/ns.h>
#include <msb/oci_backend.h>
#include <msb/vm.h>

#include "cli.h"

/* An OCI image's first unpack, on one line of a terminal (docs/cli.md). */
static void progress_line(void *ud, const msb_ns_progress *p)
{
	(void)ud;
	const double mib = 1024.0 * 1024.0;
	if (p->done)
		fprintf(stderr, "\r\033[Kmsb: unpacked %s: %u layer%s, %.1f MiB\n", p->image,
			p->layers, p->layers == 1 ? "" : "s", (double)p->total / mib);
	else
		fprintf(stderr, "\r\033[Kmsb: unpacking %s: layer %u/%u, %.1f/%.1f MiB", p->image,
			p->layer, p->layers, (double)p->bytes / mib, (double)p->total / mib);
	fflush(stderr);
}

void cli_backend_progress(msb_backend *b)
{
	/* Progress only where a person watches: stderr is a terminal. */
	if (msb_ns_backend_state_root(b) && isatty(STDERR_FILENO))
		msb_ns_backend_set_progress(b, progress_line, NULL, NULL);
}

const char *cli_backend_state_root(const msb_backend *b, const char **sub)
{
	const char *root = msb_ns_backend_state_root(b);
	*sub = "ns";
	if (!root && (root = msb_oci_backend_state_root(b)))
		*sub = "oci";
	if (!root && (root = msb_vm_backend_state_root(b)))
		*sub = "vm";
	return root;
}

bool cli_pool_backend(const msb_backend *b)
{
	return msb_ns_backend_state_root(b) || msb_oci_backend_state_root(b);
}

int cli_pool_drain(msb_backend *b, size_t *n, msb_error **err)
{
	*n = 0;
	return cli_pool_backend(b) ? msb_ns_pool_drain(b, NULL, n, err) : 0;
}

int cli_ls_list(msb_backend *b, bool json, msb_error **err)
{
	msb_ns_entry *e = NULL;
	size_t n = 0;
	if (!cli_pool_backend(b) && msb_engine_backend_is(b))
		return cli_ls_engine(b, json, err);
	/* What an ns or oci backend keeps under its state root. */
	int r = cli_pool_backend(b)
			? msb_ns_backend_list(b, &e, &n, err)
			: msb_error_set(err, MSB_E_VALUE,
					"msb ls lists what an `ns` or `oci` backend keeps "
					"on disk and what a `docker` or `wslc` engine "
					"holds; backend `%s` is none of them",
					msb_backend_name(b));
	msb_ns_pool_entry *pe = NULL;
	size_t pn = 0;
	if (r == 0)
		r = msb_ns_pool_list(b, &pe, &pn, err);
	if (r < 0) {
		msb_ns_entries_free(e, n);
		return r;
	}
	/* The warm pool's sandboxes, as `pooled` (docs/pool.md). */
	cli_ls_print(e, n, pe, pn, msb_backend_name(b), json);
	msb_ns_pool_entries_free(pe, pn);
	msb_ns_entries_free(e, n);
	return 0;
}
