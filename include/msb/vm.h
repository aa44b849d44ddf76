/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/vm.h - the `vm` backend: one qemu microVM (`-M microvm`) per sandbox.
 *
 * Each sandbox is a guest kernel booted by qemu, msb-agent as the guest's
 * init speaking the wire protocol over a virtio-serial port, the image as a
 * read-only erofs disk under a size-capped writable overlay, and no network
 * device at all. A per-sandbox `msb-vm-shim` on the host starts qemu in its
 * jail, holds it, carries every host connection over the port, and takes it
 * all down. State lives in `<state root>/vm/<name>/` with the name derived
 * from the key and kind as on `ns`, so any process can find, reuse and
 * dispose a VM another process made.
 *
 * Isolation is declared from what the host proves, never from configuration:
 * `microvm` only when a probe guest booted under hardware-assisted KVM
 * within its deadline; under qemu's TCG (pure emulation, which qemu makes no
 * security promise for) the backend declares `container`. docs/vm.md.
 *
 * Thread-safety: as msb/ns.h.
 */
#ifndef MSB_VM_H
#define MSB_VM_H

#include <msb/backend.h>
#include <msb/common.h>
#include <msb/error.h>
#include <msb/ns.h>

MSB_BEGIN_DECLS

typedef struct msb_vm_options {
	unsigned version;
	const char *name;	 /* NULL = "vm" */
	const char *state_root;	 /* NULL = as msb_ns_options.state_root */
	const char *cache_dir;	 /* built initramfs and images; NULL = <state root>/vm-cache */
	const char *shim_path;	 /* NULL = $MSB_VM_SHIM, else the installed msb-vm-shim */
	const char *agent_path;	 /* NULL = $MSB_AGENT, else the installed msb-agent */
	const char *qemu_path;	 /* NULL = qemu-system-x86_64 in /usr/bin, /usr/local/bin */
	const char *kernel_path; /* NULL = the newest /boot/vmlinuz-*-cloud-amd64 */
	const char *modules_dir; /* NULL = /lib/modules/<the kernel's version> */
	const char *image;	 /* "host" (default), "dir:/PATH" or "oci:/PATH[:TAG]" */
	/* Programs the `host` image carries with everything they need (NULL =
	 * a shell, coreutils' everyday programs and python3). NULL-terminated. */
	const char *const *host_programs;
	const char *accel;	  /* "auto" (default: KVM when probed working, else TCG),
				   * "kvm" (refused unless probed working) or "tcg" */
	uint64_t memory_bytes;	  /* guest RAM; 0 = 256 MiB */
	uint32_t vcpus;		  /* 0 = 1 */
	uint64_t writable_bytes;  /* the writable layer (a tmpfs in guest RAM); 0 = 64 MiB,
				   * at most half the RAM */
	uint64_t pids_max;	  /* the VMM's cgroup pids limit; 0 = 64 */
	uint64_t cpu_millis;	  /* the VMM's CPU quota; 0 = one CPU per vCPU */
	double start_timeout;	  /* seconds to wait for a new VM's agent; 0 = 120 */
	double kvm_probe_timeout; /* seconds the KVM probe guest gets; 0 = 5 */
	/* Each new VM restored from its template (booted and saved once per
	 * configuration, under cache_dir/snapshots; a cold boot when that
	 * fails): 0 (the default) and positive yes, negative no - every VM
	 * boots (issue 18). */
	int snapshots;
	/* The allowlist proxy's settings (docs/egress.md, the `ns` backend's
	 * `egress` object as JSON text; NULL = the defaults), for specs with
	 * egress `allowlist`. */
	const char *egress_config;
} msb_vm_options;
#define MSB_VM_OPTIONS_VERSION 1
#define MSB_VM_OPTIONS_INIT                                                                        \
	{                                                                                          \
		MSB_VM_OPTIONS_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,      \
			NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 0, NULL                                   \
	}

/* Make the backend: finds qemu and the kernel, builds (or finds cached) the
 * initramfs and the image, and probes KVM (once per host boot, cached) to
 * decide the rung. Nothing is started until acquire. MSB_E_VALUE names what
 * is missing (qemu, kernel, modules, mkfs.erofs) or a refused option
 * (accel "kvm" where KVM does not work). */
MSB_EXTERN int msb_vm_backend_new(const msb_vm_options *opts, msb_backend **out, msb_error **err);

/*
 * The backend from its JSON object (strict: unknown keys refused), the keys
 * being msb_vm_options' names: type ("vm"), name, state_dir, cache_dir,
 * qemu, kernel, modules_dir, image, host_programs (array of strings), accel,
 * memory_bytes, vcpus, writable_bytes, pids_max, cpu_millis, start_timeout,
 * kvm_probe_timeout, snapshots, egress (an object: the allowlist proxy's
 * settings, as `ns`'s). For the backend-type table.
 */
MSB_EXTERN int msb_vm_backend_from_json(const char *json, size_t len, msb_backend **out,
					msb_error **err);

/* The state root a vm backend resolved (as msb_ns_backend_state_root), which
 * holds vm/<name>/ per sandbox: what the escape suite reads. NULL when `b`
 * is not a vm backend. Borrowed while b lives. */
MSB_EXTERN const char *msb_vm_backend_state_root(const msb_backend *b);

/* Every VM under the state root, read from labels on disk (as msb_ns_list). */
MSB_EXTERN int msb_vm_list(const msb_vm_options *opts, msb_ns_entry **entries, size_t *n,
			   msb_error **err);

/*
 * msb doctor for `vm`: probes (vm.qemu, vm.kernel, vm.modules, vm.mkfs_erofs,
 * vm.kvm - a real guest under accel=kvm, never /dev/kvm opening - and
 * vm.rung) and one verdict for backend "vm" saying which accelerator, which
 * rung and why. May take the KVM probe's deadline (5 s) when no probe of
 * this boot is cached. Free with msb_doctor_report_free().
 */
MSB_EXTERN int msb_vm_doctor(const msb_vm_options *opts, msb_doctor_report **out, msb_error **err);

MSB_END_DECLS

#endif
