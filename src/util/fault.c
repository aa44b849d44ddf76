/* SPDX-License-Identifier: Apache-2.0 */
/* Named fault-injection points (fault.h, docs/internals/faults.md). */
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "util/fault.h"

const char *const msb__fault_points[] = {
	"acquire.locked",	  /* get-or-create holds the key's lock */
	"acquire.labels_written", /* labels on disk, no shim yet */
	"acquire.shim_started",	  /* the shim is running, not yet reported ready */
	"acquire.ready",	  /* the shim reported ready; no handle returned yet */
	"exec.sent",		  /* the exec request is on the wire */
	"exec.output",		  /* the first output of the workload arrived */
	"write_file.partial",	  /* part of a file's bytes are written */
	"read_file.partial",	  /* part of a file's bytes are read */
	"outputs.read",		  /* outputs read from the guest, none delivered */
	"reset.begin",		  /* reset holds the sandbox, nothing cleared */
	"dispose.locked",	  /* dispose holds the key's lock */
	"dispose.shim_stopped",	  /* the shim is gone, its state is not */
	"shim.spawned",		  /* (msb-shim) the boundary is built, not reported */
	NULL,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *armed; /* written once, under `once` */
static atomic_bool fired;

static void read_env(void)
{
	const char *v = msb__plat_secure_getenv("MSB_FAULT_POINT");
	armed = v && *v ? v : NULL;
}

void msb__fault_point(const char *point)
{
	pthread_once(&once, read_env);
	if (!armed || strcmp(armed, point) != 0)
		return;
	if (!atomic_exchange(&fired, true))
		msb__plat_stop_self();
}
