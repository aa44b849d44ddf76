/* SPDX-License-Identifier: Apache-2.0 */
/* What msb conformance and msb conformance --escape share. */
#ifndef MSB_CLI_CONFORMANCE_CLI_H
#define MSB_CLI_CONFORMANCE_CLI_H

#include <stdbool.h>

#include <msb/msb.h>

typedef struct cli_conformance_args {
	const char *backend; /* the backend type: BACKEND, or --config's "type" */
	const char *config;
	const char *state_dir;
	const char *image;
	const char *allowed_url, *denied_url;
	char allowed_host[256];
	bool json;
	/* The backend JSON of the run (cli_conformance_prepare) and the
	 * parsed --config it came from. */
	char *backend_json;
	struct json_t *json_config;
	/* ns, oci: the state root the backend resolved (msb_ns_backend_state_root,
	 * msb_oci_backend_state_root) and the directory of its sandboxes in it
	 * ("ns", "oci"); empty for a type that keeps no state on disk. */
	char state_root[4096];
	char state_sub[8];
} cli_conformance_args;

/* Build a->backend_json from --config, BACKEND and the flags, and make the
 * backend once to check it. */
int cli_conformance_prepare(cli_conformance_args *a, msb_error **err);
void cli_conformance_clear(cli_conformance_args *a);
/* A fresh backend from a->backend_json (msb_backend_from_json). */
int cli_conformance_backend(cli_conformance_args *a, msb_backend **out, msb_error **err);
/* msb conformance --escape (cmd_escape.c): returns the exit status. */
int cli_escape(cli_conformance_args *a);

#endif
