/* SPDX-License-Identifier: Apache-2.0 */
/* The `vm` backend's shape, shared by its host-side files. */
#ifndef MSB_VM_BACKEND_H
#define MSB_VM_BACKEND_H

#include <pthread.h>

#include "backends/ns/ns_state.h"
#include "vm_int.h"

typedef struct vm_backend {
	char *name;
	char *state_root; /* <root> (msb_vm_backend_state_root) */
	char *state_dir;  /* <root>/vm */
	char *cache_dir;  /* <root>/vm-cache */
	char *shim_path;
	char *agent_path;
	msb_vm_host host;
	char *initramfs; /* built, in the cache */
	char *disk;	 /* the image, in the cache */
	size_t layers;	 /* oci: the layer directories on the disk; 0 = the disk is the root */
	bool kvm;	 /* probed working: the rung is microvm */
	char *accel_why; /* what the probe found */
	uint64_t memory_bytes, writable_bytes, pids_max, cpu_millis;
	uint32_t vcpus;
	double start_timeout;
	bool snapshots; /* restore new VMs from a saved template (snapshot.c) */
	/* The RAM of the template last restored from, as a sealed memfd every
	 * VM restored by this backend maps private (snapshot.c); -1 none. */
	pthread_mutex_t ram_lock;
	int ram_fd;
	char ram_digest[65];
	char *egress_config;	      /* the proxy's settings (JSON), validated; NULL = defaults */
	msb_egress_reporter reporter; /* set once, at registration */
} vm_backend;

/* Resolve options; with `build`, also build the initramfs and the image and
 * probe KVM (the backend proper; msb_vm_list does not need them). */
int msb_vm__backend_init(vm_backend *b, const msb_vm_options *opts, bool build, msb_error **err);
void msb_vm__backend_clear(vm_backend *b);
/* The shim's configuration for one sandbox, as JSON. */
int msb_vm__shim_config(const vm_backend *b, const msb_spec *spec, const char *work_dir,
			const char *name, char **out, msb_error **err);
/* Start msb-vm-shim for the state directory `dir` (its shim.json), restoring
 * the saved state `restore` over the template's RAM `ram_fd` (a sealed
 * memfd, handed to the shim as its fd 4) when not NULL; returns once it
 * reported. */
int msb_vm__start_shim(const vm_backend *b, const char *dir, double timeout, const char *restore,
		       int ram_fd, msb_error **err);
/* The template for this spec (snapshot.c): made now (one boot, under a
 * lock) unless cached; *state the saved device state's path, *ram_fd the
 * backend's sealed copy of its RAM (borrowed: valid while the backend is
 * and no other template is asked for; call under b->ram_lock). */
int msb_vm__template(vm_backend *b, const msb_spec *spec, const char *work_dir, char **state,
		     int *ram_fd, msb_error **err);
/* Remove a template's files (a state that did not restore). */
void msb_vm__template_remove(const char *state);
/* Take down what a shim left in `dir` (processes, cgroups, sockets, jail/). */
int msb_vm__purge(const char *dir, bool remove_dir, msb_error **err);
/* A handle onto one running VM (vm_sandbox.c). */
int msb_vm__sandbox_new(const vm_backend *b, const char *name, const msb_ns_labels *labels,
			msb_sandbox **out, msb_error **err);
/* Report the egress proxy's records in the sandbox's state directory as
 * EgressObserved events, and consume them (the `ns` code: ns_egress.c). */
void msb_vm__egress_drain(int dfd, const msb_ns_labels *l, const msb_egress_reporter *rep);

/* The backend from its JSON object (vm_doctor.c): what the backend-type
 * table's `from_json` for "vm" calls. */
#include <jansson.h>
int msb_vm__from_object(json_t *obj, const char *where, msb_backend **out, msb_error **err);
/* "type" and every key of the vm backend's JSON, NULL-terminated. */
extern const char *const msb_vm__json_keys[];

#endif
