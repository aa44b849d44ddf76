/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The VMM behind a small interface: how a VM's monitor is told what to run
 * (argv), started in its jail (jail.c) and stopped. qemu is the one there is
 * (vmm_qemu.c); a second VMM (Firecracker, cloud-hypervisor) is another
 * msb_vmm_ops where installed. Used by msb-vm-shim.
 */
#ifndef MSB_VM_VMM_H
#define MSB_VM_VMM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backends/ns/boundary/boundary.h"
#include "util/util.h"

/* Where the jail puts things, as the VMM sees them. */
#define MSB_VMM_JAIL_KERNEL "/vm/kernel"
#define MSB_VMM_JAIL_INITRD "/vm/initrd"
#define MSB_VMM_JAIL_DISK "/vm/disk"
#define MSB_VMM_JAIL_RUN "/run/vm" /* the host's <state>/jail/run, writable */
#define MSB_VMM_SERIAL_SOCK "serial.sock"
#define MSB_VMM_QMP_SOCK "qmp.sock"

typedef struct msb_vmm_config {
	const char *binary; /* the VMM's host path (it must live under /usr) */
	const char *kernel; /* host paths, bound read-only into the jail */
	const char *initrd;
	const char *disk;
	const char *jail_dir; /* <state>/jail: holds root/ (mount point) and run/ */
	const char *cmdline;  /* the guest kernel's command line */
	uint64_t memory_mib;
	uint32_t vcpus;
	bool kvm;
	uid_t uid; /* the jail's unprivileged ids */
	gid_t gid;
	int console_fd;	       /* the VMM's stdout and stderr (the guest console) */
	msb_ns_cgroup *cgroup; /* planned and recorded, or NULL */
	/* Restore: the VM's saved state is read from this open file (kept
	 * open into the VMM, same number) instead of booting. */
	bool incoming;
	int incoming_fd;
	/* ... or later, through the monitor (`-incoming defer`): how a state
	 * saved with x-ignore-shared is restored (the capability must be set
	 * before the stream is read). */
	bool incoming_defer;
	bool qmp; /* a monitor socket, MSB_VMM_QMP_SOCK in the run directory */
	/* Guest RAM in a file kept open into the VMM at ram_fd (mapped by
	 * /proc/self/fd/N); without `ram`, anonymous RAM. `ram_shared`: written
	 * through to the file (a template being saved); else mapped private,
	 * copy-on-write (a restore over the template's sealed copy). */
	bool ram;
	int ram_fd;
	bool ram_shared;
} msb_vmm_config;

typedef struct msb_vmm_ops {
	const char *name;
	/* The VMM's argv for this configuration, jail paths (a strv). */
	int (*argv)(const msb_vmm_config *c, char ***out);
} msb_vmm_ops;

extern const msb_vmm_ops msb_vmm__qemu;

typedef struct msb_vmm {
	pid_t pid; /* host pid (the VMM is PID 1 of its own pid namespace) */
	int pidfd;
	uint64_t start_time;
	bool exited;
	int status;
} msb_vmm;

/* Start the VMM in its jail (jail.c). Refused in a multi-threaded process. */
int msb_vmm__start(const msb_vmm_ops *ops, const msb_vmm_config *c, msb_vmm *out, msb_error **err);
/* Our seccomp filter for the VMM (jail_seccomp.c): 0 or a negative errno. */
int msb_vmm__seccomp(void);
/* SIGKILL and reap; no-op once reaped. */
void msb_vmm__stop(msb_vmm *v);
/* Reap after the pidfd became readable. */
void msb_vmm__reap(msb_vmm *v);

#endif
