/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checks (checklist section 6) and selection (5.5, 5.8, 5.12-5.14).
 *
 * Order (DESIGN 9.6), pinned by tests/unit/test_checks.c:
 *   host denials: capabilities (6.3), identities (6.4)
 *   1. effective isolation floor (6.5)
 *   2. capability match (6.6), then method tokens (6.7)
 *   4. guest shape: OS family (6.8)
 *   5. transfer ceilings (6.9)
 *   3. egress mode membership (6.10)
 *   6. isolation scope (6.11)
 * The numbers are the seed's; the order is the reference's with scope last.
 *
 * Everything here is pure: it reads the router (immutable after
 * construction), the spec and the declarations, and calls no backend.
 * Messages name backends and workloads in single quotes the way the seed's
 * own refusal does and keep its phrases.
 */
#include <inttypes.h>

#include "core/policy/router_int.h"

/* ---- host denials ------------------------------------------------------------ */

int msb_router__check_denials(const struct msb_router *r, const msb_spec *spec, msb_error **err)
{
	const char *kind = msb_spec_kind(spec);

	msb_capset denied = msb_spec_required_capabilities(spec) & r->opts.denied_capabilities;
	if (denied) {
		_cleanup_free_ char *names = msb_capset_format(denied);
		if (!names)
			return msb__error_nomem(err);
		return msb_error_set(err, MSB_E_CAPABILITY_DENIED,
				     "the host denies the sandbox capabilities %s that the '%s' "
				     "workload requires",
				     names, kind);
	}

	msb_identity_set ids = msb_spec_identities(spec) & r->opts.denied_identities;
	if (ids) {
		_cleanup_free_ char *names = msb_identity_set_format(ids);
		if (!names)
			return msb__error_nomem(err);
		return msb_error_set(err, MSB_E_IDENTITY_DENIED,
				     "the host denies the identities %s that the '%s' workload "
				     "acts with",
				     names, kind);
	}
	return 0;
}

/* ---- 1. the minimum-isolation floor ------------------------------------------------ */

char *msb_router__floor_message(const struct msb_router_entry *e, msb_isolation floor,
				const char *kind, bool spec_asked)
{
	_cleanup_free_ char *whose = NULL;
	if (kind && spec_asked)
		/* The spec raised the floor itself: say so in the seed's words. */
		whose = msb__asprintf(" the '%s' workload runs under: the workload requires at "
				      "least '%s'",
				      kind, msb_isolation_name(floor));
	else if (kind)
		whose = msb__asprintf(" the '%s' workload runs under", kind);
	else
		whose = strdup("");
	if (!whose)
		return NULL;
	if (!e->is_rung)
		return msb__asprintf("sandbox backend '%s' declares isolation '%s', which is not a "
				     "rung: nothing can tell whether it clears the "
				     "minimum-isolation floor '%s'%s (the ladder is %s)",
				     e->name, e->isolation, msb_isolation_name(floor), whose,
				     msb_isolation_ladder());
	return msb__asprintf("sandbox backend '%s' declares isolation '%s', below the "
			     "minimum-isolation floor '%s'%s (the ladder is %s)",
			     e->name, e->isolation, msb_isolation_name(floor), whose,
			     msb_isolation_ladder());
}

static int check_floor(const struct msb_router *r, const struct msb_router_entry *e,
		       const msb_spec *spec, msb_error **err)
{
	/* The stricter of the host's floor and the spec's: a spec may raise
	 * the floor for itself and never lower it (3.16, 6.5). */
	msb_isolation floor = r->opts.min_isolation, asked;
	const bool has_ask = msb_spec_min_isolation(spec, &asked);
	if (has_ask)
		floor = msb_isolation_stricter(floor, asked);
	if (e->is_rung && msb_meets_floor(e->rung, floor))
		return 0;
	/* The spec's own rung is the effective floor: it asks above the backend. */
	const bool spec_asked = has_ask && floor == asked;
	_cleanup_free_ char *m =
		msb_router__floor_message(e, floor, msb_spec_kind(spec), spec_asked);
	if (!m)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_BACKEND_NOT_PERMITTED, "%s", m);
}

/* ---- 2. the capability match, and method tokens ------------------------------------- */

static int check_capabilities(const struct msb_router_entry *e, const msb_spec *spec,
			      msb_error **err)
{
	msb_capset missing = msb_spec_required_capabilities(spec) & ~e->decl->capabilities;
	if (!missing)
		return 0;
	_cleanup_free_ char *m = msb_capset_format(missing);
	_cleanup_free_ char *d = msb_capset_format(e->decl->capabilities);
	if (!m || !d)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_CAPABILITY_NOT_SUPPORTED,
			     "sandbox backend '%s' does not support %s, which the '%s' workload "
			     "requires (it declares %s)",
			     e->name, m, msb_spec_kind(spec), d);
}

/* Every token of every method-scoped rule must be enforceable (6.7, 4.8);
 * a backend without EGRESS_METHODS was already refused by the match above,
 * since a method-scoped rule derives that requirement (3.13). */
static int check_method_tokens(const struct msb_router_entry *e, const msb_spec *spec,
			       msb_error **err)
{
	_cleanup_strv_ char **unsupported = NULL;
	size_t n = msb_spec_egress_allow_count(spec);
	for (size_t i = 0; i < n; i++) {
		const char *host;
		const char *const *methods;
		size_t n_methods;
		msb_spec_egress_entry(spec, i, &host, &methods, &n_methods);
		for (size_t j = 0; j < n_methods; j++) {
			if (msb_declarations_has_method_token(e->decl, methods[j]) ||
			    msb__strv_contains(unsupported, methods[j]))
				continue;
			if (msb__strv_push(&unsupported, methods[j]) < 0)
				return msb__error_nomem(err);
		}
	}
	if (!unsupported)
		return 0;

	_cleanup_free_ char *asked = msb__strv_join(unsupported, ", ");
	_cleanup_free_ char *enforced = NULL;
	if (e->decl->n_egress_method_tokens == 0) {
		enforced = strdup("no method token");
	} else {
		msb_buf b = MSB_BUF_INIT;
		for (size_t i = 0; i < e->decl->n_egress_method_tokens; i++) {
			if (i > 0)
				msb__buf_puts(&b, ", ");
			msb__buf_puts(&b, e->decl->egress_method_tokens[i]);
		}
		enforced = msb__buf_steal_str(&b);
	}
	if (!asked || !enforced)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_CAPABILITY_NOT_SUPPORTED,
			     "sandbox backend '%s' cannot enforce the egress method tokens %s that "
			     "the '%s' workload's allowlist names (it enforces %s)",
			     e->name, asked, msb_spec_kind(spec), enforced);
}

/* ---- 4. the guest-shape match ---------------------------------------------------------- */

static int check_os_family(const struct msb_router_entry *e, const msb_spec *spec, msb_error **err)
{
	msb_os_family family;
	if (!msb_spec_requires_os_family(spec, &family))
		return 0; /* a spec that asks nothing is refused by nothing */
	if (e->decl->os_families & (msb_os_family_set)family)
		return 0;
	if (!e->decl->os_families)
		/* Silence is the absence of an answer (4.6), said in the seed's words. */
		return msb_error_set(
			err, MSB_E_OS_FAMILY_NOT_SUPPORTED,
			"sandbox backend '%s' cannot hand out the '%s' guest shape the "
			"'%s' workload is written for: it offers no guest whose shape "
			"it states (it declares nothing)",
			e->name, msb_os_family_name(family), msb_spec_kind(spec));
	_cleanup_free_ char *d = msb_os_family_set_format(e->decl->os_families);
	if (!d)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_OS_FAMILY_NOT_SUPPORTED,
			     "sandbox backend '%s' cannot hand out the '%s' guest shape the '%s' "
			     "workload is written for (it declares %s)",
			     e->name, msb_os_family_name(family), msb_spec_kind(spec), d);
}

/* ---- 5. the transfer-ceiling match ------------------------------------------------------- */

static int check_direction(const struct msb_router_entry *e, const msb_spec *spec,
			   const char *direction, const msb_transfer_limits *ask,
			   const msb_transfer_limits *ceiling, msb_error **err)
{
	if (msb_transfer_limits_within(ask, ceiling))
		return 0;
	/* The first field over its ceiling, for the reader; the whole ask and
	 * ceiling follow. */
	const char *over = "max_files";
	if (ask->max_bytes_per_file > ceiling->max_bytes_per_file)
		over = "max_bytes_per_file";
	else if (ask->max_total_bytes > ceiling->max_total_bytes)
		over = "max_total_bytes";
	return msb_error_set(
		err, MSB_E_TRANSFER_LIMITS_NOT_PERMITTED,
		"sandbox backend '%s' cannot permit the %s transfer limits the '%s' workload asks: "
		"ask {max_bytes_per_file %" PRIu64 ", max_total_bytes %" PRIu64
		", max_files %" PRIu64 "} is above the ceiling {max_bytes_per_file %" PRIu64
		", max_total_bytes %" PRIu64 ", max_files %" PRIu64
		"} on %s (refused, never clamped)",
		e->name, direction, msb_spec_kind(spec), ask->max_bytes_per_file,
		ask->max_total_bytes, ask->max_files, ceiling->max_bytes_per_file,
		ceiling->max_total_bytes, ceiling->max_files, over);
}

static int check_transfer_limits(const struct msb_router_entry *e, const msb_spec *spec,
				 msb_error **err)
{
	msb_transfer_limits in = msb_spec_files_in(spec), out = msb_spec_files_out(spec);
	int r = check_direction(e, spec, "files_in", &in, &e->decl->limits.files_in, err);
	if (r < 0)
		return r;
	return check_direction(e, spec, "files_out", &out, &e->decl->limits.files_out, err);
}

/* ---- 3. the egress rule: exact membership, no mode substituted either way ------------------ */

static int check_egress(const struct msb_router_entry *e, const msb_spec *spec, msb_error **err)
{
	msb_egress mode = msb_spec_egress(spec);
	if (e->decl->egress_modes & (msb_egress_set)mode)
		return 0;
	/* "nothing" for the empty set: a backend that declares no mode
	 * enforces nothing and serves no spec (4.5). */
	_cleanup_free_ char *d = msb_egress_set_format(e->decl->egress_modes);
	if (!d)
		return msb__error_nomem(err);
	return msb_error_set(err, MSB_E_EGRESS_NOT_ENFORCED,
			     "sandbox backend '%s' cannot enforce the '%s' egress the '%s' "
			     "workload runs in (it enforces %s)",
			     e->name, msb_egress_name(mode), msb_spec_kind(spec), d);
}

/* ---- 6. the isolation scope ------------------------------------------------------------------ */

static msb_isolation_scope effective_scope(const struct msb_router *r, const msb_spec *spec)
{
	return msb_isolation_scope_stricter(msb_spec_isolation_scope(spec),
					    r->opts.min_isolation_scope);
}

static int check_scope(const struct msb_router *r, const struct msb_router_entry *e,
		       const msb_spec *spec, msb_error **err)
{
	msb_isolation_scope scope = effective_scope(r, spec);
	if (e->decl->isolation_scopes & (msb_scope_set)scope)
		return 0;
	_cleanup_free_ char *d = msb_scope_set_format(e->decl->isolation_scopes);
	if (!d)
		return msb__error_nomem(err);
	const bool raised = scope != msb_spec_isolation_scope(spec);
	return msb_error_set(err, MSB_E_SCOPE_NOT_ENFORCED,
			     "sandbox backend '%s' cannot enforce the '%s' isolation scope the "
			     "'%s' workload runs in%s (it serves %s)",
			     e->name, msb_isolation_scope_name(scope), msb_spec_kind(spec),
			     raised ? ", raised by the host's min_isolation_scope" : "", d);
}

/* ---- one backend, every check ---------------------------------------------------------------- */

int msb_router__check_backend(const struct msb_router *r, const struct msb_router_entry *e,
			      const msb_spec *spec, msb_error **err)
{
	int rc;
	if ((rc = check_floor(r, e, spec, err)) < 0 ||
	    (rc = check_capabilities(e, spec, err)) < 0 ||
	    (rc = check_method_tokens(e, spec, err)) < 0 ||
	    (rc = check_os_family(e, spec, err)) < 0 ||
	    (rc = check_transfer_limits(e, spec, err)) < 0 ||
	    (rc = check_egress(e, spec, err)) < 0 || (rc = check_scope(r, e, spec, err)) < 0)
		return rc;
	return 0;
}

/* ---- selection ---------------------------------------------------------------------------------
 */

/*
 * PER_SPEC: the first registered backend that passes every check serves,
 * so the route is a pure function of the spec and the declarations. A
 * below-floor backend fails check 1 and is never routed to. If nothing
 * passes, one refusal names every backend with its reason; its code is
 * that of the first registered backend's refusal (DESIGN 9.7).
 */
static int route_per_spec(const struct msb_router *r, const msb_spec *spec, size_t *index,
			  msb_error **err)
{
	msb_buf reasons = MSB_BUF_INIT;
	int first_code = 0;
	for (size_t i = 0; i < r->n; i++) {
		msb_error *e = NULL;
		int rc = msb_router__check_backend(r, &r->entries[i], spec, &e);
		if (rc == 0) {
			/* Refusals passed over on a successful route are discarded. */
			msb__buf_free(&reasons);
			*index = i;
			return 0;
		}
		if (rc == MSB_E_NOMEM) {
			msb__buf_free(&reasons);
			return msb__error_propagate(err, e);
		}
		if (i == 0)
			first_code = rc;
		if (i > 0)
			msb__buf_puts(&reasons, "; ");
		msb__buf_puts(&reasons, e ? msb_error_message(e) : msb_code_name(rc));
		msb_error_free(e);
	}
	_cleanup_free_ char *all = msb__buf_steal_str(&reasons);
	if (!all)
		return msb__error_nomem(err);
	return msb_error_set(err, first_code,
			     "no registered sandbox backend serves the '%s' workload, each refused "
			     "it: %s",
			     msb_spec_kind(spec), all);
}

int msb_router__route(const struct msb_router *r, const msb_spec *spec, size_t *index,
		      msb_isolation_scope *scope, msb_error **err)
{
	/* Host denials first: a posture stop whatever the backend. */
	int rc = msb_router__check_denials(r, spec, err);
	if (rc < 0)
		return rc;

	size_t i = r->resolved;
	if (r->opts.selection == MSB_SELECTION_FIXED) {
		/* The resolved backend or a refusal: others are never tried (5.8). */
		rc = msb_router__check_backend(r, &r->entries[i], spec, err);
	} else {
		rc = route_per_spec(r, spec, &i, err);
	}
	if (rc < 0)
		return rc;
	*index = i;
	if (scope)
		*scope = effective_scope(r, spec);
	return 0;
}

/* ---- the public face of the checks ------------------------------------------------------------
 */

int msb_router_ensure_can_serve(const msb_router *r, const msb_spec *spec, msb_error **err)
{
	if (!r || !spec)
		return msb_error_set(err, MSB_E_VALUE, "ensure_can_serve: missing argument");
	/* With nothing configured nothing can run, so preflight passes (6.14). */
	if (r->n == 0)
		return 0;
	size_t i;
	return msb_router__route(r, spec, &i, NULL, err);
}

int msb_router_resolve(const msb_router *r, const msb_spec *spec, msb_backend **out,
		       msb_isolation_scope *effective, msb_error **err)
{
	if (!r || !spec)
		return msb_error_set(err, MSB_E_VALUE, "resolve: missing argument");
	if (r->n == 0)
		return msb_error_set(err, MSB_E_NO_BACKEND, "no sandbox backend is configured");
	size_t i;
	msb_isolation_scope scope;
	int rc = msb_router__route(r, spec, &i, &scope, err);
	if (rc < 0)
		return rc;
	if (out)
		*out = r->entries[i].backend;
	if (effective)
		*effective = scope;
	return 0;
}
