/* SPDX-License-Identifier: Apache-2.0 */
/* Resource limits of an ns sandbox: cgroup memory, pids and CPU, and the size
 * of the writable layer. */
#include "ns_int.h"

int msb_ns__config_limits(json_t *cfg, const ns_backend *b, const msb_spec *spec, msb_error **err)
{
	(void)spec;
	json_t *l = json_pack("{s:I, s:I, s:I, s:I}", "memory_bytes", (json_int_t)b->memory_bytes,
			      "pids_max", (json_int_t)b->pids_max, "cpu_millis",
			      (json_int_t)b->cpu_millis, "writable_bytes",
			      (json_int_t)b->writable_bytes);
	if (!l || json_object_update(cfg, l) < 0) {
		json_decref(l);
		return msb__error_nomem(err);
	}
	json_decref(l);
	return 0;
}
