/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rows of the backend-type table (types.c), one per folder under
 * src/backends/, and what the rows share. Backends see the public headers
 * (msb/backend.h and their own) and src/util only.
 */
#ifndef MSB_BACKENDS_TYPES_H
#define MSB_BACKENDS_TYPES_H

#include <msb/backend.h>

extern const msb_backend_type msb_declared__type; /* declared/declared.c */
extern const msb_backend_type msb_fake__type;	  /* fake/fake_json.c */
extern const msb_backend_type msb_ns__type;	  /* ns/ns_json.c */
extern const msb_backend_type msb_docker__type;	  /* engine/engine_json.c */
extern const msb_backend_type msb_wslc__type;	  /* engine/engine_json.c */
extern const msb_backend_type msb_oci__type;	  /* oci/oci_json.c */
extern const msb_backend_type msb_vm__type;	  /* vm/vm_json.c */

/* Append a disposal failure (code, a copy of detail) to a growing list; a
 * NULL list, or no memory, drops it (a sweep reports what it can). */
void msb_backends__add_failure(msb_disposal_failure ***list, size_t *n, msb_disposal_code code,
			       const char *detail);

/* A doctor's verdict with no details: out->ok and a copy of `reason`. */
/* The egress proxy's configuration for a sandbox: base (the backend's egress
 * settings, JSON; NULL for none; base_what names it in a parse error) with
 * the spec's allowlist as "allow", checked as the proxy checks it (a refusal
 * says "<who>: the spec's egress rules"). *out is the JSON text, freed by
 * the caller (egress_rules.c). */
int msb_backends__egress_rules(const char *base, const char *base_what, const char *who,
			       const msb_spec *spec, char **out, msb_error **err);
int msb_backends__verdict(msb_backend_probe *out, bool ok, const char *reason, msb_error **err);

#endif
