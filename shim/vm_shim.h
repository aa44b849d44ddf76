/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-vm-shim's state, shared by its files: msb-vm-shim.c (start, serve,
 * reset, teardown) and vm_shim_snapshot.c (a template's save, a restore
 * through qemu's monitor, the template's RAM).
 */
#ifndef MSB_VM_SHIM_H
#define MSB_VM_SHIM_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/ns/boundary/boundary.h"
#include "backends/vm/vmm.h"
#include "proto/mux_link.h"
#include "vm_egress.h"

#define CONFIG_MAX (64 * 1024)
#define STALE_TIMEOUT_MS 2000
#define CONSOLE_KEEP 4096
#define SERIAL_CONNECT_NS (20LL * 1000 * 1000 * 1000)
#define JAIL_DIR "jail"
/* The control request for a new host session with the same VM. */
#define VM_CONTROL_RECONNECT "reconnect"

struct shim {
	char *state_dir;
	char *config_path;
	char *name;
	const char *log_path;
	const char *restore_arg; /* --restore: overrides the config's restore_from */
	int ram_fd;		 /* --ram-fd: the template's RAM, a sealed memfd */
	int ready_fd;
	int dfd;
	int listen_fd;
	int console_fd; /* read end of the VMM's stdout/stderr */
	int ctl_fd;	/* shim.sock: "reset" */
	int ctl_conn;	/* the control request being served: shim_die() answers it */
	msb_mux_link *link;
	msb_ns_cgroup *cg;
	msb_vmm vmm;
	bool vmm_started;
	bool wrote_pid;
	/* configuration */
	char *qemu, *kernel, *initrd, *disk, *cmdline;
	char *save_to;	    /* template: save the ready VM's state here, then go */
	char *save_ram_to;  /* ... and its RAM (a file it ran in) here */
	char *ram_tmp;	    /* that file while the template runs */
	char *restore_from; /* restore that state instead of booting */
	uint64_t memory_mib, vcpus, jail_uid, memory_max, pids_max, cpu_quota_us;
	double ready_timeout;
	bool kvm;
	char instance_id[MSB_MUX_SESSION_ID]; /* hex, NUL-terminated */
	int incoming_fd;		      /* the VMM's number for the saved state */
	/* Where a start's time goes (docs/internals/vm.md, "Where a restore's
	 * time goes"): ns since the shim's exec, logged once ready. */
	int64_t t0, t_setup, t_exec, t_qmp, t_serial, t_ready;
	/* egress allowlist: the proxy runs in a child of the shim (start_proxy) */
	char *egress_json;
	size_t egress_len;
	vm_egress egress;
	/* the guest console's last bytes */
	char console[CONSOLE_KEEP];
	size_t console_len;
};

_Noreturn void shim_die(struct shim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The VMM stopped and reaped, the console's tail in the error. */
_Noreturn void shim_die_vm(struct shim *s, const char *what);
bool shim_vmm_exited(struct shim *s);
void shim_drain_console(struct shim *s);

/* ---- vm_shim_snapshot.c ---- */

/* A restore's RAM (--ram-fd): refused unless a sealed memfd of the
 * guest's size. */
void shim_check_ram(struct shim *s);
/* A template's own RAM file, the jail's uid's while it runs. */
void shim_make_ram_file(struct shim *s);
/* A restore: x-ignore-shared set, the saved state given (QMP). */
void shim_restore_incoming(struct shim *s);
/* A template: the ready VM saved (devices to save_to, RAM to save_ram_to). */
void shim_save_template(struct shim *s);

#endif
