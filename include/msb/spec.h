/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/spec.h - SandboxSpec, EgressRule and DeclaredOutput (checklist section 3).
 *
 * A spec is an immutable, reference-counted value built by a builder that
 * validates and normalises at msb_spec_build(): egress rules normalised and
 * collapsed, conflicts refused, egress_allow only with ALLOWLIST, and the
 * derived required capabilities computed. A copy with changes is
 * msb_spec_builder_from(spec) + setters + build, which re-runs every rule
 * (3.14, 3.28).
 *
 * Field order (documented, stable): kind, image, image_id, egress_allow,
 * work_dir, labels, requires, min_isolation, declared_outputs, files_in,
 * files_out, outputs_named_at_call_time, identities, egress,
 * requires_os_family, isolation_scope, confined_to_guest_call_path,
 * exclusive_admission, min_cleanup, resources (memory_bytes, pids_max,
 * cpu_millis, writable_bytes), env.
 *
 * Thread-safety: a built spec is immutable and may be shared across threads
 * (ref/unref are atomic). A builder belongs to one thread.
 */
#ifndef MSB_SPEC_H
#define MSB_SPEC_H

#include <msb/common.h>
#include <msb/error.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

/* The default storage base (3.17). */
#define MSB_DEFAULT_WORK_DIR "/maf-sandbox/work"

/* A declared output (12.1). Strings are borrowed by the builder (copied). */
typedef struct msb_declared_output {
	unsigned version;
	const char *path;		    /* literal, relative to the storage base */
	const char *media_type;		    /* declared, never sniffed; NULL = none */
	bool required;			    /* default true */
	const char *name;		    /* landing name; NULL = path */
	msb_output_disposition disposition; /* default LAND */
} msb_declared_output;
#define MSB_DECLARED_OUTPUT_VERSION 1
#define MSB_DECLARED_OUTPUT_INIT                                                                   \
	{                                                                                          \
		MSB_DECLARED_OUTPUT_VERSION, NULL, NULL, true, NULL, MSB_DISPOSITION_LAND          \
	}

typedef struct msb_spec msb_spec;
typedef struct msb_spec_builder msb_spec_builder;

/*
 * Builders. msb_spec_builder_new(kind) starts from the defaults; a NULL kind
 * is refused at build (3.1). Setters copy their arguments and never fail:
 * an allocation failure or bad argument is latched and reported by build.
 */
MSB_EXTERN msb_spec_builder *msb_spec_builder_new(const char *kind);
/* Start from an existing spec: the copy-with-changes constructor. */
MSB_EXTERN msb_spec_builder *msb_spec_builder_from(const msb_spec *spec);
MSB_EXTERN void msb_spec_builder_free(msb_spec_builder *b);

MSB_EXTERN void msb_spec_builder_set_kind(msb_spec_builder *b, const char *kind);
MSB_EXTERN void msb_spec_builder_set_image(msb_spec_builder *b, const char *image);
MSB_EXTERN void msb_spec_builder_set_image_id(msb_spec_builder *b, const char *image_id);
/* Replace the whole allowlist with nothing (start of a replacement). */
MSB_EXTERN void msb_spec_builder_clear_egress_allow(msb_spec_builder *b);
/* A bare host: every method. */
MSB_EXTERN void msb_spec_builder_add_egress_host(msb_spec_builder *b, const char *host);
/* An EgressRule. methods == NULL means all methods (normalised to a bare
 * host, 3.10); otherwise n_methods tokens, which must be non-empty (3.6). */
MSB_EXTERN void msb_spec_builder_add_egress_rule(msb_spec_builder *b, const char *host,
						 const char *const *methods, size_t n_methods);
/* NULL = the backend allocates the storage base (3.17). */
MSB_EXTERN void msb_spec_builder_set_work_dir(msb_spec_builder *b, const char *work_dir);
MSB_EXTERN void msb_spec_builder_set_label(msb_spec_builder *b, const char *key, const char *value);
MSB_EXTERN void msb_spec_builder_clear_labels(msb_spec_builder *b);
/* env: NAME -> VALUE, the environment every exec of a sandbox acquired with
 * this spec starts from; an exec's own env wins name by name (issue 16).
 * Refused at build as msb_exec_env_check refuses an exec's env (reserved
 * names, bounds), and a name holding '='. */
MSB_EXTERN void msb_spec_builder_set_env(msb_spec_builder *b, const char *name, const char *value);
MSB_EXTERN void msb_spec_builder_clear_env(msb_spec_builder *b);
MSB_EXTERN void msb_spec_builder_set_requires(msb_spec_builder *b, msb_capset requires);
MSB_EXTERN void msb_spec_builder_set_min_isolation(msb_spec_builder *b, msb_isolation floor);
MSB_EXTERN void msb_spec_builder_clear_min_isolation(msb_spec_builder *b);
MSB_EXTERN void msb_spec_builder_add_declared_output(msb_spec_builder *b,
						     const msb_declared_output *out);
MSB_EXTERN void msb_spec_builder_clear_declared_outputs(msb_spec_builder *b);
MSB_EXTERN void msb_spec_builder_set_files_in(msb_spec_builder *b, msb_transfer_limits limits);
MSB_EXTERN void msb_spec_builder_set_files_out(msb_spec_builder *b, msb_transfer_limits limits);
MSB_EXTERN void msb_spec_builder_set_outputs_named_at_call_time(msb_spec_builder *b, bool on);
MSB_EXTERN void msb_spec_builder_set_identities(msb_spec_builder *b, msb_identity_set ids);
MSB_EXTERN void msb_spec_builder_set_egress(msb_spec_builder *b, msb_egress mode);
MSB_EXTERN void msb_spec_builder_set_requires_os_family(msb_spec_builder *b, msb_os_family family);
MSB_EXTERN void msb_spec_builder_clear_requires_os_family(msb_spec_builder *b);
MSB_EXTERN void msb_spec_builder_set_isolation_scope(msb_spec_builder *b,
						     msb_isolation_scope scope);
MSB_EXTERN void msb_spec_builder_set_confined_to_guest_call_path(msb_spec_builder *b, bool on);
MSB_EXTERN void msb_spec_builder_set_exclusive_admission(msb_spec_builder *b, bool on);
/* The workload's cleanup floor (DESIGN 9.14); default: no opinion. */
MSB_EXTERN void msb_spec_builder_set_min_cleanup(msb_spec_builder *b, msb_cleanup rung);
MSB_EXTERN void msb_spec_builder_clear_min_cleanup(msb_spec_builder *b);

/*
 * Validate, normalise and freeze. MSB_E_VALUE for every rule of section 3
 * (message names the offending hosts or tokens). The builder stays usable.
 */
MSB_EXTERN int msb_spec_build(const msb_spec_builder *b, msb_spec **out, msb_error **err);

MSB_EXTERN msb_spec *msb_spec_ref(msb_spec *spec);
MSB_EXTERN void msb_spec_unref(msb_spec *spec);

/* Getters. Returned strings live as long as the spec. */
MSB_EXTERN const char *msb_spec_kind(const msb_spec *s);
MSB_EXTERN const char *msb_spec_image(const msb_spec *s);    /* NULL = absent */
MSB_EXTERN const char *msb_spec_image_id(const msb_spec *s); /* NULL = absent */
MSB_EXTERN size_t msb_spec_egress_allow_count(const msb_spec *s);
/* Entry i: its host and, for a method-scoped rule, its methods (sorted as
 * given, collapsed); *n_methods == 0 and *methods == NULL for a bare host. */
MSB_EXTERN void msb_spec_egress_entry(const msb_spec *s, size_t i, const char **host,
				      const char *const **methods, size_t *n_methods);
MSB_EXTERN const char *msb_spec_work_dir(const msb_spec *s); /* NULL = backend allocates */
MSB_EXTERN size_t msb_spec_label_count(const msb_spec *s);
MSB_EXTERN void msb_spec_label(const msb_spec *s, size_t i, const char **key, const char **value);
/* NULL when absent. */
MSB_EXTERN const char *msb_spec_label_get(const msb_spec *s, const char *key);
/* The env, sorted by name. */
MSB_EXTERN size_t msb_spec_env_count(const msb_spec *s);
MSB_EXTERN void msb_spec_env(const msb_spec *s, size_t i, const char **name, const char **value);
MSB_EXTERN msb_capset msb_spec_requires(const msb_spec *s);
/* requires ∪ derived (EGRESS_METHODS for any method-scoped rule) (3.13, 3.14). */
MSB_EXTERN msb_capset msb_spec_required_capabilities(const msb_spec *s);
/* false when absent ("no opinion", 3.16). */
MSB_EXTERN bool msb_spec_min_isolation(const msb_spec *s, msb_isolation *out);
MSB_EXTERN size_t msb_spec_declared_output_count(const msb_spec *s);
MSB_EXTERN const msb_declared_output *msb_spec_declared_output(const msb_spec *s, size_t i);
MSB_EXTERN msb_transfer_limits msb_spec_files_in(const msb_spec *s);
MSB_EXTERN msb_transfer_limits msb_spec_files_out(const msb_spec *s);
MSB_EXTERN bool msb_spec_outputs_named_at_call_time(const msb_spec *s);
MSB_EXTERN msb_identity_set msb_spec_identities(const msb_spec *s);
MSB_EXTERN msb_egress msb_spec_egress(const msb_spec *s);
MSB_EXTERN bool msb_spec_requires_os_family(const msb_spec *s, msb_os_family *out);
MSB_EXTERN msb_isolation_scope msb_spec_isolation_scope(const msb_spec *s);
MSB_EXTERN bool msb_spec_confined_to_guest_call_path(const msb_spec *s);
MSB_EXTERN bool msb_spec_exclusive_admission(const msb_spec *s);
MSB_EXTERN bool msb_spec_min_cleanup(const msb_spec *s, msb_cleanup *out);

/*
 * JSON. Strict: unknown keys are refused with the key named, every enum
 * parsed strictly, integers must be non-negative integers. See docs/spec.md
 * for the shape. to_json emits every field (rung strings, never ranks) and
 * round-trips through from_json to an equal spec.
 */
MSB_EXTERN int msb_spec_from_json(const char *json, size_t len, msb_spec **out, msb_error **err);
MSB_EXTERN int msb_spec_to_json(const msb_spec *s, char **out, msb_error **err);
/* Field-by-field equality of two built specs. */
MSB_EXTERN bool msb_spec_equal(const msb_spec *a, const msb_spec *b);

/*
 * Resource limits: what one sandbox of this spec may use. The `ns` backend
 * enforces memory, pids and cpu with cgroups and writable_bytes as the size
 * of the tmpfs holding the sandbox's writable layer (docs/ns.md "Limits").
 *
 * 0, the default, means "the backend's default" (for `ns`: 512 MiB, 512,
 * one core, 256 MiB as root). A backend refuses at acquire, with
 * MSB_E_VALUE naming the limit, a value above what it allows. build refuses
 * (MSB_E_VALUE, "resources.<name>: ...") a value outside the ranges below:
 * less than any sandbox can run with, or more than any host can mean. Not
 * part of the sandbox's identity (the key and kind are).
 */
#define MSB_SPEC_MEMORY_BYTES_MIN (4ull << 20)	 /* 4 MiB */
#define MSB_SPEC_MEMORY_BYTES_MAX (1ull << 50)	 /* 1 PiB */
#define MSB_SPEC_PIDS_MAX_MIN 2ull		 /* the agent counts as one */
#define MSB_SPEC_PIDS_MAX_MAX 4194304ull	 /* the kernel's PID_MAX_LIMIT */
#define MSB_SPEC_CPU_MILLIS_MIN 10ull		 /* 1 ms of quota per 100 ms period */
#define MSB_SPEC_CPU_MILLIS_MAX 1024000ull	 /* 1024 cores */
#define MSB_SPEC_WRITABLE_BYTES_MIN (1ull << 20) /* 1 MiB */
#define MSB_SPEC_WRITABLE_BYTES_MAX (1ull << 44) /* 16 TiB */

/* Memory in bytes, swap included (JSON resources.memory_bytes). */
MSB_EXTERN void msb_spec_builder_set_memory_bytes(msb_spec_builder *b, uint64_t bytes);
/* Processes and threads at once, the agent included (resources.pids_max). */
MSB_EXTERN void msb_spec_builder_set_pids_max(msb_spec_builder *b, uint64_t n);
/* CPU time in thousandths of a core: 500 = half a core (resources.cpu_millis). */
MSB_EXTERN void msb_spec_builder_set_cpu_millis(msb_spec_builder *b, uint64_t millis);
/* Size of the writable layer in bytes (resources.writable_bytes). */
MSB_EXTERN void msb_spec_builder_set_writable_bytes(msb_spec_builder *b, uint64_t bytes);
/* The values set; 0 = the backend's default. */
MSB_EXTERN uint64_t msb_spec_memory_bytes(const msb_spec *s);
MSB_EXTERN uint64_t msb_spec_pids_max(const msb_spec *s);
MSB_EXTERN uint64_t msb_spec_cpu_millis(const msb_spec *s);
MSB_EXTERN uint64_t msb_spec_writable_bytes(const msb_spec *s);

MSB_END_DECLS

#endif
