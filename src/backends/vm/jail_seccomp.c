/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Our seccomp filter under the VMM, installed by the jail before it execs
 * qemu (qemu then stacks its own, `-sandbox on`). Default allow; EPERM for
 * what a VMM never needs and an escape would want: tracing and reading other
 * processes, kernel modules and kexec, mounts and the mount API, namespaces
 * (setns, unshare, clone with a namespace flag; clone3, whose flags a filter
 * cannot read, gets ENOSYS so libc falls back to clone), bpf, perf events,
 * userfaultfd, keyrings, io_uring, handles to files by number, clocks,
 * swap, reboot, accounting, quotas, personality, I/O ports. A foreign
 * architecture's entry kills the process.
 */
#include <sched.h>
#include <seccomp.h>

#include "vmm.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static const int denied[] = {
	SCMP_SYS(ptrace),
	SCMP_SYS(process_vm_readv),
	SCMP_SYS(process_vm_writev),
	SCMP_SYS(kcmp),
	SCMP_SYS(pidfd_getfd),
	SCMP_SYS(init_module),
	SCMP_SYS(finit_module),
	SCMP_SYS(delete_module),
	SCMP_SYS(kexec_load),
	SCMP_SYS(kexec_file_load),
	SCMP_SYS(mount),
	SCMP_SYS(umount2),
	SCMP_SYS(pivot_root),
	SCMP_SYS(chroot),
	SCMP_SYS(open_tree),
	SCMP_SYS(move_mount),
	SCMP_SYS(fsopen),
	SCMP_SYS(fsconfig),
	SCMP_SYS(fsmount),
	SCMP_SYS(fspick),
	SCMP_SYS(mount_setattr),
	SCMP_SYS(setns),
	SCMP_SYS(unshare),
	SCMP_SYS(bpf),
	SCMP_SYS(perf_event_open),
	SCMP_SYS(userfaultfd),
	SCMP_SYS(keyctl),
	SCMP_SYS(add_key),
	SCMP_SYS(request_key),
	SCMP_SYS(io_uring_setup),
	SCMP_SYS(io_uring_enter),
	SCMP_SYS(io_uring_register),
	SCMP_SYS(open_by_handle_at),
	SCMP_SYS(name_to_handle_at),
	SCMP_SYS(settimeofday),
	SCMP_SYS(clock_settime),
	SCMP_SYS(clock_adjtime),
	SCMP_SYS(adjtimex),
	SCMP_SYS(swapon),
	SCMP_SYS(swapoff),
	SCMP_SYS(reboot),
	SCMP_SYS(acct),
	SCMP_SYS(quotactl),
	SCMP_SYS(personality),
	SCMP_SYS(iopl),
	SCMP_SYS(ioperm),
	SCMP_SYS(syslog),
	SCMP_SYS(vhangup),
	SCMP_SYS(lookup_dcookie),
	SCMP_SYS(uselib),
	SCMP_SYS(sethostname),
	SCMP_SYS(setdomainname),
};

int msb_vmm__seccomp(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	for (size_t i = 0; r == 0 && i < sizeof(denied) / sizeof(denied[0]); i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), denied[i], 0);
	/* Any one namespace flag: one rule per bit (MASKED_EQ needs all). */
	static const uint64_t bits[] = {CLONE_NEWNS,	 CLONE_NEWPID, CLONE_NEWNET,
					CLONE_NEWUTS,	 CLONE_NEWIPC, CLONE_NEWUSER,
					CLONE_NEWCGROUP, CLONE_NEWTIME};
	for (size_t i = 0; r == 0 && i < sizeof(bits) / sizeof(bits[0]); i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, bits[i], bits[i]));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r;
}
