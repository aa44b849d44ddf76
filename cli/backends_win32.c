/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the CLI asks of the Linux-only backends, on Windows, which builds none
 * of them (docs/windows.md): no state root, no image to unpack, and `msb ls`
 * the engine's listing (ls_engine.c), any other backend refused with why.
 */
#include <stdio.h>

#include <msb/engine.h>

#include "cli.h"
#include "conformance_cli.h"

void cli_backend_progress(msb_backend *b)
{
}

const char *cli_backend_state_root(const msb_backend *b, const char **sub)
{
	*sub = "";
	return NULL;
}

/* No ns or oci backend, so no warm pool. */
bool cli_pool_backend(const msb_backend *b)
{
	return false;
}

int cli_pool_drain(msb_backend *b, size_t *n, msb_error **err)
{
	*n = 0;
	return 0;
}

/* The engines' listing (ls_engine.c): what `msb ls` lists here. */
int cli_ls_list(msb_backend *b, bool json, msb_error **err)
{
	if (msb_engine_backend_is(b))
		return cli_ls_engine(b, json, err);
	return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
			     "msb ls lists what a `wslc` engine holds (or an `ns` backend keeps "
			     "on disk, on Linux); backend `%s` is neither",
			     msb_backend_name(b));
}

/* The escape suite probes a Linux host's own boundaries (namespaces, /proc,
 * cgroups) from inside a sandbox: not built here. */
int cli_escape(cli_conformance_args *a)
{
	fprintf(stderr, "msb conformance: --escape probes a Linux host's boundaries; msb.exe has "
			"no escape suite (docs/windows.md)\n");
	return msb_code_exit_status(MSB_E_NOT_IMPLEMENTED);
}
