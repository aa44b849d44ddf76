/* SPDX-License-Identifier: Apache-2.0 */
/* The spy sandbox of spy_sandbox.h. */
#include <stdlib.h>
#include <string.h>

#include <msb/backend.h>

#include "spy_sandbox.h"

static int sp_exec(void *i, const msb_exec_request *q, msb_exec_result *o, msb_error **e)
{
	struct spy *s = i;
	if (s->exec)
		return s->exec(s, q, false, o, e);
	return msb_sandbox_exec(s->inner, q, o, e);
}
static int sp_exec_bounded(void *i, const msb_exec_request *q, msb_exec_result *o, msb_error **e)
{
	struct spy *s = i;
	if (s->exec)
		return s->exec(s, q, true, o, e);
	return msb_sandbox_exec_bounded(s->inner, q, o, e);
}
static int sp_run_code(void *i, const char *c, double t, msb_cancel *k, msb_exec_result *o,
		       msb_error **e)
{
	return msb_sandbox_run_code(((struct spy *)i)->inner, c, t, k, o, e);
}
static int sp_write(void *i, const char *p, const uint8_t *d, size_t l, const char *w,
		    msb_error **e)
{
	return msb_sandbox_write_file(((struct spy *)i)->inner, p, d, l, w, e);
}
static int sp_stat(void *i, const char *p, const char *w, bool *pr, msb_entry *o, msb_error **e)
{
	struct spy *s = i;
	s->stats++;
	if (s->stat_fail_path && strcmp(p, s->stat_fail_path) == 0)
		return msb_error_set(e, s->stat_fail_code, "scripted stat failure");
	int r = msb_sandbox_stat_file(s->inner, p, w, pr, o, e);
	if (r == 0 && *pr && s->unknown_size_path && strcmp(p, s->unknown_size_path) == 0)
		o->size_known = false;
	if (r == 0 && s->grow_rel && strcmp(p, s->grow_rel) == 0) {
		/* Grow it behind the stat's back. */
		static const uint8_t more[] = "0123456789abcdef0123456789abcdef";
		msb_sandbox_write_file(s->inner, s->grow_path, more, sizeof(more) - 1, w, NULL);
	}
	return r;
}
static int sp_read(void *i, const char *p, const char *w, uint64_t m, uint8_t **d, size_t *l,
		   msb_error **e)
{
	struct spy *s = i;
	s->reads++;
	if (s->read_fail_path && strcmp(p, s->read_fail_path) == 0)
		return msb_error_set(e, s->read_fail_code, "scripted read failure");
	return msb_sandbox_read_file(s->inner, p, w, m, d, l, e);
}
static int sp_list(void *i, const char *p, const char *w, msb_entry **o, size_t *n, msb_error **e)
{
	return msb_sandbox_list_dir(((struct spy *)i)->inner, p, w, o, n, e);
}
static int sp_remove(void *i, const char *p, const char *w, bool r, msb_error **e)
{
	return msb_sandbox_remove(((struct spy *)i)->inner, p, w, r, e);
}
static int sp_reclaim(void *i, const char *d, const char *w, double t, msb_error **e)
{
	return msb_sandbox_reclaim(((struct spy *)i)->inner, d, w, t, e);
}
static int sp_reset(void *i, double t, msb_error **e)
{
	return msb_sandbox_reset(((struct spy *)i)->inner, t, e);
}
static int sp_fingerprint(void *i, bool *s, msb_fingerprint *o, msb_error **e)
{
	return msb_sandbox_fingerprint(((struct spy *)i)->inner, s, o, e);
}
static const char *sp_instance_id(void *i)
{
	return msb_sandbox_instance_id(((struct spy *)i)->inner);
}
static void sp_release(void *i)
{
}

static const msb_sandbox_ops spy_ops = {
	.version = MSB_SANDBOX_OPS_VERSION,
	.exec = sp_exec,
	.exec_bounded = sp_exec_bounded,
	.run_code = sp_run_code,
	.write_file = sp_write,
	.stat_file = sp_stat,
	.read_file = sp_read,
	.list_dir = sp_list,
	.remove = sp_remove,
	.reclaim = sp_reclaim,
	.reset = sp_reset,
	.fingerprint = sp_fingerprint,
	.instance_id = sp_instance_id,
	.release = sp_release,
};

int spy_handle(struct spy *s, msb_sandbox **out)
{
	return msb_sandbox_new(&spy_ops, s, "spy", out, NULL);
}
