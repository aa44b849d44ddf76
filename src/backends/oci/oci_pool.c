/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `oci` backend's side of the warm pool (docs/pool.md): the pool itself
 * is ns_pool.c's - templates, pooled directories under <state>/oci/pool/,
 * claims by rename, refills, fill/list/drain - and reaches the oci backend
 * through these: the runtime's keys in a template, msb-oci-shim started
 * with --pool, the oci purge, and a claimed sandbox's handle and identity.
 */
#include <stdio.h>

#include <jansson.h>

#include "backends/oci/oci_int.h"

/* The runtime's keys: a template of another runtime is another template. */
static int config_extra(const ns_backend *nb, json_t *cfg, msb_error **err)
{
	const oci_backend *b = (const oci_backend *)nb;
	if (json_object_set_new(cfg, "runtime", json_string(msb_oci__runtime_name(b->runtime))) <
		    0 ||
	    json_object_set_new(cfg, "runtime_path", json_string(b->runtime_path)) < 0 ||
	    (b->platform && json_object_set_new(cfg, "platform", json_string(b->platform)) < 0))
		return msb__error_nomem(err);
	return 0;
}

static const char *runtime_binary(const ns_backend *nb)
{
	return ((const oci_backend *)nb)->runtime_path;
}

static int purge(const char *dir, int timeout_ms, msb_error **err)
{
	return msb_oci__state_purge(dir, false, timeout_ms, err);
}

static int claimed(ns_backend *nb, const char *name, int sfd, const msb_ns_labels *labels,
		   int shim_pidfd, const char *hostname, bool egress, double timeout,
		   msb_sandbox **out, msb_error **err)
{
	(void)sfd;
	(void)egress;
	if (shim_pidfd >= 0)
		close(shim_pidfd);
	msb_sandbox *sb = NULL;
	int r = msb_oci__sandbox_new((const oci_backend *)nb, name, labels, &sb, err);
	if (r == 0 && (r = msb_oci__sandbox_identity(sb, hostname, timeout, err)) < 0) {
		msb_sandbox_free(sb);
		sb = NULL;
	}
	*out = sb;
	return r;
}

const ns_pool_ops msb_oci__pool_ops = {
	.what = "oci",
	.dir_mode = 0711,
	.config_extra = config_extra,
	.extra_binary = runtime_binary,
	/* msb-shim's start serves msb-oci-shim too (--daemon, --pool, --cgroup-key);
	 * an oci shim finds egress.json in its directory itself */
	.spawn = msb_ns__shim_spawn,
	.await = msb_ns__shim_await,
	.purge = purge,
	.claimed = claimed,
};
