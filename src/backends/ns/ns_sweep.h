/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The label sweep shared by the backends that keep one labelled state
 * directory per sandbox under a host state root (ns, oci, vm): visit every
 * `msb-*` directory, fd-relative and without following links, take its lock,
 * read its labels and tear down the ones selected. Only the teardown of the
 * running sandbox differs between backends; it is the purge callback.
 */
#ifndef MSB_NS_SWEEP_H
#define MSB_NS_SWEEP_H

#include <msb/backend.h>

#include "ns_state.h"

/* Stop what runs in the sandbox `name` (its directory dfd, locked, with
 * labels l). 0, or < 0 with *err set (MSB_E_RUNTIME: it would not stop,
 * reported as a timeout). On 0 the sweep removes the directory. */
typedef int (*msb_ns_purge_fn)(void *ctx, const char *name, int dfd, const msb_ns_labels *l,
			       msb_error **err);

/* Returns true for labels whose sandbox is to be torn down. */
typedef bool (*msb_ns_select_fn)(const msb_ns_labels *l, void *ud);

/* Visit every sandbox directory of state_dir (a missing one has none) and
 * tear down those `select` takes; each one torn down counts in *disposed
 * (may be NULL), each one that was not adds a failure to the list. Directories
 * left by an acquire that died before its labels landed are removed. 0, or
 * -errno when state_dir cannot be listed. */
int msb_ns__sweep(const char *state_dir, msb_ns_select_fn select, void *ud, msb_ns_purge_fn purge,
		  void *ctx, uint64_t *disposed, msb_disposal_failure ***failures,
		  size_t *n_failures);

/* The backend's dispose: the sandboxes of (key, kind, instance_id), their
 * failures folded into one *failure (NULL when all went). */
int msb_ns__dispose(const char *state_dir, msb_ns_purge_fn purge, void *ctx, const msb_key *key,
		    const char *kind, const char *instance_id, msb_disposal_failure **failure,
		    msb_error **err);

/* The backend's dispose_scope: every sandbox of (scope, thread_id), counted
 * into *out. `who` (e.g. "ns") prefixes the error when state_dir cannot be
 * listed. */
int msb_ns__dispose_scope(const char *state_dir, const char *who, msb_ns_purge_fn purge, void *ctx,
			  const char *scope, const char *thread_id, msb_scope_purge *out,
			  msb_error **err);

#endif
