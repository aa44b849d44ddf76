/* SPDX-License-Identifier: Apache-2.0 */
/* msb conformance --escape: the in-sandbox escape suite (docs/security.md). */
#include <stdio.h>

#include "cli.h"
#include "conformance_cli.h"

int cli_escape(cli_conformance_args *a)
{
	fprintf(stderr, "msb: NotImplementedError: the escape suite is not built yet\n");
	return msb_code_exit_status(MSB_E_NOT_IMPLEMENTED);
}
