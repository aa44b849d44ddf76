/* SPDX-License-Identifier: Apache-2.0 */
/* An inert sandbox for unit tests of routers and backends: every operation
 * refuses (NotImplementedError), fingerprint reports unsupported. */
#include <stdlib.h>
#include <string.h>

#include <msb/backend.h>

#include "inert_sandbox.h"

static int inert(void)
{
	return MSB_E_NOT_IMPLEMENTED;
}
static int sb_exec(void *i, const msb_exec_request *q, msb_exec_result *o, msb_error **e)
{
	return inert();
}
static int sb_run_code(void *i, const char *c, double t, msb_cancel *k, msb_exec_result *o,
		       msb_error **e)
{
	return inert();
}
static int sb_write(void *i, const char *p, const uint8_t *d, size_t l, const char *w,
		    msb_error **e)
{
	return inert();
}
static int sb_stat(void *i, const char *p, const char *w, bool *pr, msb_entry *o, msb_error **e)
{
	return inert();
}
static int sb_read(void *i, const char *p, const char *w, uint64_t m, uint8_t **d, size_t *l,
		   msb_error **e)
{
	return inert();
}
static int sb_list(void *i, const char *p, const char *w, msb_entry **o, size_t *n, msb_error **e)
{
	return inert();
}
static int sb_remove(void *i, const char *p, const char *w, bool r, msb_error **e)
{
	return inert();
}
static int sb_reclaim(void *i, const char *d, const char *w, double t, msb_error **e)
{
	return inert();
}
static int sb_reset(void *i, double t, msb_error **e)
{
	return inert();
}
static int sb_fingerprint(void *i, bool *s, msb_fingerprint *o, msb_error **e)
{
	*s = false;
	return 0;
}
static const char *sb_instance_id(void *i)
{
	return i;
}
static void sb_release(void *i)
{
	free(i);
}

const msb_sandbox_ops test_inert_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = sb_exec,
	.exec_bounded = sb_exec,
	.run_code = sb_run_code,
	.write_file = sb_write,
	.stat_file = sb_stat,
	.read_file = sb_read,
	.list_dir = sb_list,
	.remove = sb_remove,
	.reclaim = sb_reclaim,
	.reset = sb_reset,
	.fingerprint = sb_fingerprint,
	.instance_id = sb_instance_id,
	.release = sb_release,
};

int test_inert_sandbox_new(const char *instance_id, const char *backend, msb_sandbox **out,
			   msb_error **err)
{
	char *id = strdup(instance_id);
	if (!id)
		return MSB_E_NOMEM;
	return msb_sandbox_new(&test_inert_ops, id, backend, out, err);
}
