/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The spec builder and the built spec (src/core/policy/spec.c builds,
 * spec_read.c reads and compares). Internal to src/core/policy.
 */
#ifndef MSB_CORE_POLICY_SPEC_INT_H
#define MSB_CORE_POLICY_SPEC_INT_H

#include <msb/spec.h>

/* An allowlist entry. In a built spec `scoped` is false and `methods` NULL
 * for a bare host; in a builder a scoped entry may still be empty or hold a
 * NULL token, both refused at build. */
struct egress_entry {
	char *host;
	bool scoped;
	char **methods;
	size_t n_methods;
};

struct label {
	char *key;
	char *value;
};

/* Everything but the allowlist, shared by builder and spec. */
struct spec_fields {
	char *kind;
	char *image;
	char *image_id;
	char *work_dir;
	struct label *labels; /* sorted by key (bytewise), keys unique */
	size_t n_labels;
	msb_capset requires;
	bool has_min_isolation;
	msb_isolation min_isolation;
	msb_declared_output *outputs; /* strings owned */
	size_t n_outputs;
	msb_transfer_limits files_in;
	msb_transfer_limits files_out;
	bool outputs_named_at_call_time;
	msb_identity_set identities;
	msb_egress egress;
	bool has_os_family;
	msb_os_family os_family;
	msb_isolation_scope scope;
	bool confined;
	bool exclusive;
	bool has_min_cleanup;
	msb_cleanup min_cleanup;
	/* Resource limits; 0 = the backend's default. */
	uint64_t memory_bytes;
	uint64_t pids_max;
	uint64_t cpu_millis;
	uint64_t writable_bytes;
};

struct msb_spec_builder {
	bool oom;
	char *misuse; /* first latched misuse, reported by build */
	struct spec_fields f;
	struct egress_entry *egress;
	size_t n_egress;
};

struct msb_spec {
	unsigned refs;
	struct spec_fields f;
	struct egress_entry *egress;
	size_t n_egress;
	msb_capset required; /* requires ∪ derived */
};

#endif
