/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Why a backend was chosen (issue 16): the same route msb_router_resolve
 * takes, told backend by backend - which one selection picked and why, and
 * why every other registered backend was passed over. Pure, like the checks
 * it runs (router_checks.c): it calls no backend.
 */
#include <msb/msb.h>

#include "core/policy/router_int.h"
#include "util/json.h"

void msb_route_explanation_clear(msb_route_explanation *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n_steps; i++) {
		free(e->steps[i].backend);
		free(e->steps[i].reason);
	}
	free(e->steps);
	free(e->summary);
	memset(e, 0, sizeof(*e));
}

/* Take the reason (a malloc()ed string, or NULL on allocation failure). */
static int set_reason(msb_route_step *s, char *reason, msb_error **err)
{
	if (!reason)
		return msb__error_nomem(err);
	free(s->reason);
	s->reason = reason;
	return 0;
}

/* Run the checks against entry i; a refusal is recorded, not returned. */
static int try_entry(const struct msb_router *r, size_t i, const msb_spec *spec, msb_route_step *s,
		     msb_error **err)
{
	_cleanup_error_ msb_error *refusal = NULL;
	int rc = msb_router__check_backend(r, &r->entries[i], spec, &refusal);
	if (rc == MSB_E_NOMEM)
		return msb__error_propagate(err, TAKE_PTR(refusal));
	s->tried = true;
	s->serves = rc == 0;
	s->code = rc;
	return set_reason(
		s,
		rc == 0 ? strdup("passes every check")
			: strdup(refusal ? msb_error_message(refusal) : msb_code_name(rc)),
		err);
}

static int explain_fixed(const struct msb_router *r, const msb_spec *spec,
			 msb_route_explanation *out, msb_error **err)
{
	const size_t k = r->resolved;
	const char *name = r->entries[k].name;
	const char *why = r->opts.selected ? "named by `selected`" : "the first registered backend";
	int rc = try_entry(r, k, spec, &out->steps[k], err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < r->n; i++) {
		if (i == k)
			continue;
		rc = set_reason(
			&out->steps[i],
			msb__asprintf("not tried: fixed selection asks only '%s' (%s)", name, why),
			err);
		if (rc < 0)
			return rc;
	}
	out->code = out->steps[k].code;
	out->summary =
		out->code == 0
			? msb__asprintf("fixed selection picked '%s' (%s); it passes every check",
					name, why)
			: msb__asprintf("fixed selection picked '%s' (%s), which refuses the '%s' "
					"workload; no other backend is tried",
					name, why, msb_spec_kind(spec));
	return out->summary ? 0 : msb__error_nomem(err);
}

static int explain_per_spec(const struct msb_router *r, const msb_spec *spec,
			    msb_route_explanation *out, msb_error **err)
{
	size_t chosen = SIZE_MAX;
	int first_code = 0;
	for (size_t i = 0; i < r->n; i++) {
		int rc;
		if (chosen != SIZE_MAX) {
			rc = set_reason(&out->steps[i],
					msb__asprintf("not tried: '%s', registered earlier, serves",
						      r->entries[chosen].name),
					err);
		} else {
			rc = try_entry(r, i, spec, &out->steps[i], err);
			if (rc == 0 && out->steps[i].serves)
				chosen = i;
			else if (rc == 0 && !first_code)
				first_code = out->steps[i].code;
		}
		if (rc < 0)
			return rc;
	}
	out->code = chosen == SIZE_MAX ? first_code : 0;
	out->summary =
		chosen != SIZE_MAX
			? msb__asprintf("per_spec selection picked '%s', the first registered "
					"backend that passes every check",
					r->entries[chosen].name)
			: msb__asprintf("per_spec selection found no registered backend that "
					"serves the '%s' workload",
					msb_spec_kind(spec));
	return out->summary ? 0 : msb__error_nomem(err);
}

int msb_router_explain(const msb_router *r, const msb_spec *spec, msb_route_explanation *out,
		       msb_error **err)
{
	if (!r || !spec || !out)
		return msb_error_set(err, MSB_E_VALUE, "explain: missing argument");
	msb_route_explanation e = {.selection = r->opts.selection};
	if (r->n == 0) {
		e.code = MSB_E_NO_BACKEND;
		if (!(e.summary = strdup("no sandbox backend is configured")))
			return msb__error_nomem(err);
		*out = e;
		return 0;
	}
	if (!(e.steps = calloc(r->n, sizeof(*e.steps))))
		return msb__error_nomem(err);
	e.n_steps = r->n;
	int rc = 0;
	for (size_t i = 0; i < r->n && rc == 0; i++)
		if (!(e.steps[i].backend = strdup(r->entries[i].name)))
			rc = msb__error_nomem(err);

	/* The host's denials come first and stop the route before any backend. */
	_cleanup_error_ msb_error *denied = NULL;
	int dr = rc < 0 ? 0 : msb_router__check_denials(r, spec, &denied);
	if (dr == MSB_E_NOMEM)
		rc = msb__error_propagate(err, TAKE_PTR(denied));
	else if (dr < 0) {
		e.code = dr;
		for (size_t i = 0; i < r->n && rc == 0; i++)
			rc = set_reason(
				&e.steps[i],
				strdup("not tried: the host's denials refuse the spec first"), err);
		if (rc == 0 &&
		    !(e.summary = msb__asprintf("the host's denials refuse it before any "
						"backend is asked: %s",
						msb_error_message(denied))))
			rc = msb__error_nomem(err);
	} else if (rc == 0) {
		rc = r->opts.selection == MSB_SELECTION_FIXED ? explain_fixed(r, spec, &e, err)
							      : explain_per_spec(r, spec, &e, err);
	}
	if (rc < 0) {
		msb_route_explanation_clear(&e);
		return rc;
	}
	*out = e;
	return 0;
}

int msb_route_explanation_to_json(const msb_route_explanation *e, char **out, msb_error **err)
{
	if (!e || !out)
		return msb_error_set(err, MSB_E_VALUE, "explanation: missing argument");
	json_t *steps = json_array();
	const char *serving = NULL;
	for (size_t i = 0; steps && i < e->n_steps; i++) {
		const msb_route_step *s = &e->steps[i];
		if (s->serves)
			serving = s->backend;
		json_t *o = json_pack("{s:s, s:b, s:b, s:s?, s:s}", "backend", s->backend, "serves",
				      s->serves, "tried", s->tried, "error",
				      s->code ? msb_code_name(s->code) : NULL, "reason", s->reason);
		if (!o || json_array_append_new(steps, o) < 0) {
			json_decref(steps);
			steps = NULL;
		}
	}
	json_t *o = steps ? json_pack("{s:s, s:s?, s:s?, s:s, s:o}", "selection",
				      msb_selection_name(e->selection), "backend", serving, "error",
				      e->code ? msb_code_name(e->code) : NULL, "summary",
				      e->summary ? e->summary : "", "steps", steps)
			  : NULL;
	char *text = o ? msb__json_dump(o) : NULL;
	json_decref(o);
	if (!text)
		return msb__error_nomem(err);
	*out = text;
	return 0;
}
