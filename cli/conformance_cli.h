/* SPDX-License-Identifier: Apache-2.0 */
/* What msb conformance and msb conformance --escape share. */
#ifndef MSB_CLI_CONFORMANCE_CLI_H
#define MSB_CLI_CONFORMANCE_CLI_H

#include <stdbool.h>

#include <msb/msb.h>

typedef struct cli_conformance_args {
	const char *backend; /* "fake" or "ns" */
	const char *config;
	const char *state_dir;
	const char *image;
	const char *allowed_url, *denied_url;
	char allowed_host[256];
	bool json;
	/* ns: the state root the backend uses, resolved by cli_conformance_backend. */
	char state_root[4096];
} cli_conformance_args;

/* The backend named by a->backend, configured from --config and the flags. */
int cli_conformance_backend(cli_conformance_args *a, msb_backend **out, msb_error **err);
/* msb conformance --escape (cmd_escape.c): returns the exit status. */
int cli_escape(cli_conformance_args *a);

#endif
