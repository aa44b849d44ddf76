/* SPDX-License-Identifier: Apache-2.0 */
/* The `vm` file plane, served by the agent inside the guest (vm_files.c). */
#ifndef MSB_VM_FILES_H
#define MSB_VM_FILES_H

#include <msb/sandbox.h>

#include "util/util.h"

/* The largest file read_file hands out (the backend's max_bytes_per_file). */
#define MSB_VM_MAX_FILE_BYTES ((uint64_t)256 << 20)

typedef struct vm_files {
	const char *backend;	/* for messages */
	const char *guest_base; /* the storage base's guest path */
	/* Runs one file request (a bounded exec with MSB_PROTO_EXEC_FILE). */
	int (*run)(void *ud, const msb_exec_request *req, msb_exec_result *out, msb_error **err);
	void *ud;
} vm_files;

int msb_vm__write_file(const vm_files *f, const char *path, const uint8_t *data, size_t len,
		       const char *wd, msb_error **err);
int msb_vm__stat_file(const vm_files *f, const char *path, const char *wd, bool *present,
		      msb_entry *out, msb_error **err);
int msb_vm__read_file(const vm_files *f, const char *path, const char *wd, uint64_t max_bytes,
		      uint8_t **data, size_t *len, msb_error **err);
int msb_vm__list_dir(const vm_files *f, const char *path, const char *wd, msb_entry **entries,
		     size_t *n, msb_error **err);
int msb_vm__remove(const vm_files *f, const char *path, const char *wd, bool recursive,
		   msb_error **err);
int msb_vm__reclaim(const vm_files *f, const char *directory, const char *wd, msb_error **err);

/* What the guest's limits did (agent/files.c `outcome`): its kernel's OOM
 * kill count, how many forks its pids limit refused, and whether the
 * storage base or the writable layer has no free block (or inode) left. An
 * answer of the guest's, believed only about the guest itself. */
int msb_vm__outcome(const vm_files *f, uint64_t *oom_kill, uint64_t *pids_refused, bool *no_space,
		    msb_error **err);

/* The fingerprint (vm_fingerprint.c): the guest's agent walks its writable
 * layer, /dev/shm and the workloads' processes (the file request `layer`),
 * the answer counted against the `ns` fingerprint's budgets. MSB_E_RUNTIME
 * "cannot attest" when the guest refuses or the answer is over budget,
 * MSB_E_PROTOCOL when it is malformed. */
int msb_vm__fingerprint(const vm_files *f, msb_fingerprint *out, msb_error **err);
/* The answer's parser alone (tests): records "p/PATH\0" and "rID\0";
 * budget NULL = the `ns` defaults. */
struct msb_ns_fingerprint_budget;
int msb_vm__fingerprint_parse(const uint8_t *bytes, size_t len,
			      const struct msb_ns_fingerprint_budget *budget, msb_fingerprint *out,
			      msb_error **err);

#endif
