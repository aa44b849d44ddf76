/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The table of built-in backend types (msb/backend.h): one row per folder
 * under src/backends/. msb_backend_from_json and msb_router_from_json
 * (src/core/policy/router_json.c) look "type" up here, and msb doctor runs
 * every row's probe, so adding a backend is its folder plus one row below.
 */
#include <msb/backend.h>

#include "backends/backend_rows.h"
#include "backends/types.h"
#include "util/util.h"

/* The rows this platform builds (src/backends/meson.build). */
static const msb_backend_type *const builtin[] = {MSB_BACKEND_ROWS NULL};

const msb_backend_type *const *msb_backend_types(size_t *n)
{
	if (n)
		*n = MSB_ARRAY_SIZE(builtin) - 1;
	return builtin;
}

const msb_backend_type *msb_backend_type_find(const char *name)
{
	for (size_t i = 0; name && builtin[i]; i++)
		if (strcmp(builtin[i]->name, name) == 0)
			return builtin[i];
	return NULL;
}

static void probes_free(msb_probe *p, size_t n)
{
	for (size_t i = 0; p && i < n; i++) {
		free(p[i].name);
		free(p[i].reason);
	}
	free(p);
}

void msb_backend_probe_clear(msb_backend_probe *p)
{
	if (!p)
		return;
	free(p->reason);
	probes_free(p->details, p->n_details);
	memset(p, 0, sizeof(*p));
}

void msb_backends__add_failure(msb_disposal_failure ***list, size_t *n, msb_disposal_code code,
			       const char *detail)
{
	msb_disposal_failure *f = NULL;
	if (!list || msb_disposal_failure_new(code, detail, &f, NULL) < 0)
		return;
	msb_disposal_failure **v = msb__reallocarray(*list, *n + 1, sizeof(*v));
	if (!v) {
		msb_disposal_failure_free(f);
		return;
	}
	v[(*n)++] = f;
	*list = v;
}

int msb_backends__verdict(msb_backend_probe *out, bool ok, const char *reason, msb_error **err)
{
	out->ok = ok;
	if (!(out->reason = strdup(reason)))
		return msb__error_nomem(err);
	return 0;
}

void msb_doctor_report_free(msb_doctor_report *r)
{
	if (!r)
		return;
	probes_free(r->probes, r->n_probes);
	probes_free(r->backends, r->n_backends);
	free(r);
}

/* Move one type's probe into the report: its verdict under the type's name,
 * its details appended to the host probes. Empties *p. */
static int take(msb_doctor_report *rep, const msb_backend_type *t, msb_backend_probe *p,
		msb_error **err)
{
	msb_probe *v = &rep->backends[rep->n_backends];
	if (!(v->name = strdup(t->name)))
		return msb__error_nomem(err);
	v->ok = p->ok;
	v->reason = TAKE_PTR(p->reason);
	rep->n_backends++;
	if (!v->reason && !(v->reason = strdup("")))
		return msb__error_nomem(err);
	if (p->n_details == 0)
		return 0;
	msb_probe *np = msb__reallocarray(rep->probes, rep->n_probes + p->n_details, sizeof(*np));
	if (!np)
		return msb__error_nomem(err);
	rep->probes = np;
	memcpy(np + rep->n_probes, p->details, p->n_details * sizeof(*np));
	rep->n_probes += p->n_details;
	free(p->details);
	p->details = NULL;
	p->n_details = 0;
	return 0;
}

int msb_doctor(msb_doctor_report **out, msb_error **err)
{
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "doctor: no place for the result");
	size_t n = 0;
	const msb_backend_type *const *types = msb_backend_types(&n);
	msb_doctor_report *rep = calloc(1, sizeof(*rep));
	if (!rep || !(rep->backends = calloc(n, sizeof(*rep->backends)))) {
		free(rep);
		return msb__error_nomem(err);
	}
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		msb_backend_probe p = {0};
		r = types[i]->doctor(&p, err);
		if (r < 0)
			msb_error_wrap(err, "doctor `%s`", types[i]->name);
		else
			r = take(rep, types[i], &p, err);
		msb_backend_probe_clear(&p);
	}
	if (r < 0) {
		msb_doctor_report_free(rep);
		return r;
	}
	*out = rep;
	return 0;
}
