/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend type `ns` (msb/backend.h): msb_ns_options from backend JSON, by
 * the same names, and the doctor over the boundary's host probes.
 */
#include <msb/ns.h>

#include "backends/ns/boundary/boundary.h"
#include "backends/ns/ns_int.h"
#include "backends/types.h"
#include "util/json.h"

static const char *const ns_keys[] = {
	"name",		  "state_dir",	   "image",  "memory_bytes", "pids_max", "cpu_millis",
	"writable_bytes", "start_timeout", "egress", "pool_size",    NULL};

static int ns_from_json(const msb_backend_json *in, msb_backend **out, msb_error **err)
{
	_cleanup_json_ json_t *obj = NULL;
	int r = msb__json_load_object(in->json, in->len, in->where, &obj, err);
	if (r < 0)
		return r;
	const char *w = in->where;
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	if ((r = msb__json_get_string(obj, "name", w, &o.name, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "state_dir", w, &o.state_root, NULL, err)) < 0 ||
	    (r = msb__json_get_string(obj, "image", w, &o.image, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "memory_bytes", w, &o.memory_bytes, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "pids_max", w, &o.pids_max, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "cpu_millis", w, &o.cpu_millis, NULL, err)) < 0 ||
	    (r = msb__json_get_u64(obj, "writable_bytes", w, &o.writable_bytes, NULL, err)) < 0 ||
	    (r = msb__json_get_double(obj, "start_timeout", w, &o.start_timeout, NULL, err)) < 0)
		return r;
	_cleanup_free_ char *egress_text = NULL;
	if ((r = msb_ns__json_pool_egress(obj, w, &o.pool_size, &egress_text, err)) < 0)
		return r;
	o.egress_config = egress_text;
	return msb_ns_backend_new(&o, out, err);
}

int msb_ns__json_pool_egress(json_t *obj, const char *w, unsigned *pool_size, char **egress,
			     msb_error **err)
{
	*egress = NULL;
	/* The warm pool (docs/pool.md); the backend checks the range again. */
	uint64_t n = 0;
	int r = msb__json_get_u64(obj, "pool_size", w, &n, NULL, err);
	if (r < 0)
		return r;
	if (n > MSB_NS_POOL_MAX)
		return msb_error_set(err, MSB_E_VALUE, "%s: `pool_size` %llu is over the most, %u",
				     w, (unsigned long long)n, MSB_NS_POOL_MAX);
	*pool_size = (unsigned)n;
	/* "egress": the proxy's settings (docs/egress.md), checked strictly by
	 * the backend itself. */
	json_t *e = json_object_get(obj, "egress");
	if (e && !json_is_object(e))
		return msb_error_set(err, MSB_E_TYPE, "%s: `egress` must be an object", w);
	if (e && !(*egress = json_dumps(e, JSON_COMPACT)))
		return msb__error_nomem(err);
	return 0;
}

static int ns_doctor(msb_backend_probe *out, msb_error **err)
{
	msb_ns_doctor *d = NULL;
	int r = msb_ns__doctor(&d, err);
	if (r < 0)
		return r;
	out->ok = d->ok;
	out->reason = TAKE_PTR(d->reason);
	/* The internal probe has the public one's shape; copy so the two types
	 * stay independent. */
	out->details = calloc(d->n_probes ? d->n_probes : 1, sizeof(*out->details));
	if (!out->details) {
		msb_ns__doctor_free(d);
		return msb__error_nomem(err);
	}
	for (size_t i = 0; i < d->n_probes; i++, out->n_details++) {
		out->details[i].name = TAKE_PTR(d->probes[i].name);
		out->details[i].reason = TAKE_PTR(d->probes[i].reason);
		out->details[i].ok = d->probes[i].ok;
	}
	msb_ns__doctor_free(d);
	return 0;
}

const msb_backend_type msb_ns__type = {
	.version = MSB_BACKEND_TYPE_VERSION,
	.name = "ns",
	.summary = "Linux namespaces around msb-agent, held by a per-sandbox msb-shim (container)",
	.keys = ns_keys,
	.from_json = ns_from_json,
	.doctor = ns_doctor,
};
