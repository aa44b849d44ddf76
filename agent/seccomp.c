/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The workload seccomp filter: default allow, an explicit deny list in the
 * spirit of the common container default profile, returning EPERM.
 *
 *  - a foreign architecture (e.g. the i386 entry on x86_64) kills the process;
 *  - x32 system calls (bit 30 on x86_64) get EPERM;
 *  - clone3 gets ENOSYS (its flags live in memory a filter cannot read; libc
 *    falls back to clone), clone and unshare with any namespace flag get EPERM;
 *  - the deny list below gets EPERM;
 *  - kill, tkill, tgkill, rt_(tg)sigqueueinfo and pidfd_open aimed at pid 1
 *    (the agent) get EPERM.
 *
 * Hand-rolled classic BPF: the kernel ABI constants are spelt out here so
 * that the agent builds against musl, which ships no linux/ headers.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

/* struct sock_filter / sock_fprog (linux/filter.h) */
struct bpf_insn {
	uint16_t code;
	uint8_t jt;
	uint8_t jf;
	uint32_t k;
};
struct bpf_prog {
	unsigned short len;
	struct bpf_insn *filter;
};

#define BPF_LD_W_ABS 0x20u /* BPF_LD | BPF_W | BPF_ABS */
#define BPF_JEQ_K 0x15u	   /* BPF_JMP | BPF_JEQ | BPF_K */
#define BPF_JGE_K 0x35u	   /* BPF_JMP | BPF_JGE | BPF_K */
#define BPF_JSET_K 0x45u   /* BPF_JMP | BPF_JSET | BPF_K */
#define BPF_RET_K 0x06u	   /* BPF_RET | BPF_K */

#define RET_KILL_PROCESS 0x80000000u
#define RET_ERRNO 0x00050000u
#define RET_ALLOW 0x7fff0000u

/* struct seccomp_data offsets */
#define OFF_NR 0u
#define OFF_ARCH 4u
#define OFF_ARG0_LO 16u /* little-endian: the low word of args[0] */

#define SECCOMP_SET_MODE_FILTER 1u
#ifndef PR_SET_SECCOMP
#define PR_SET_SECCOMP 22
#endif
#define SECCOMP_MODE_FILTER 2

#if defined(__x86_64__)
#define NATIVE_ARCH 0xc000003eu /* AUDIT_ARCH_X86_64 */
#define X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define NATIVE_ARCH 0xc00000b7u /* AUDIT_ARCH_AARCH64 */
#else
#error "msb-agent: add this architecture's AUDIT_ARCH to seccomp.c"
#endif

/* Numbers of the newer calls are shared by every architecture. */
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef SYS_io_uring_enter
#define SYS_io_uring_enter 426
#endif
#ifndef SYS_io_uring_register
#define SYS_io_uring_register 427
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fsconfig
#define SYS_fsconfig 431
#endif
#ifndef SYS_fsmount
#define SYS_fsmount 432
#endif
#ifndef SYS_fspick
#define SYS_fspick 433
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

/* clone/unshare namespace flags (linux/sched.h). CLONE_NEWTIME shares its
 * bit with clone's exit-signal byte, so it is tested for unshare only. */
#define NS_FLAGS_CLONE 0x7e020000u /* NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */
#define NS_FLAGS_UNSHARE (NS_FLAGS_CLONE | 0x00000080u) /* | CLONE_NEWTIME */

static const unsigned denied[] = {
	SYS_acct,
	SYS_add_key,
	SYS_bpf,
	SYS_clock_adjtime,
	SYS_clock_settime,
	SYS_delete_module,
	SYS_finit_module,
	SYS_init_module,
	SYS_kcmp,
	SYS_kexec_load,
#ifdef SYS_kexec_file_load
	SYS_kexec_file_load,
#endif
	SYS_keyctl,
	SYS_request_key,
	SYS_lookup_dcookie,
	SYS_mount,
	SYS_umount2,
	SYS_move_mount,
	SYS_open_tree,
	SYS_fsopen,
	SYS_fsconfig,
	SYS_fsmount,
	SYS_fspick,
	SYS_mount_setattr,
	SYS_name_to_handle_at,
	SYS_open_by_handle_at,
	SYS_nfsservctl,
	SYS_perf_event_open,
	SYS_pivot_root,
	SYS_process_vm_readv,
	SYS_process_vm_writev,
	SYS_ptrace,
	SYS_quotactl,
	SYS_quotactl_fd,
	SYS_reboot,
	SYS_setns,
	SYS_settimeofday,
	SYS_swapon,
	SYS_swapoff,
	SYS_syslog,
	SYS_userfaultfd,
	SYS_vhangup,
	SYS_io_uring_setup,
	SYS_io_uring_enter,
	SYS_io_uring_register,
#ifdef SYS_create_module
	SYS_create_module,
#endif
#ifdef SYS_get_kernel_syms
	SYS_get_kernel_syms,
#endif
#ifdef SYS_query_module
	SYS_query_module,
#endif
#ifdef SYS_uselib
	SYS_uselib,
#endif
#ifdef SYS_ustat
	SYS_ustat,
#endif
#ifdef SYS_sysfs
	SYS_sysfs,
#endif
#ifdef SYS__sysctl
	SYS__sysctl,
#endif
#ifdef SYS_ioperm
	SYS_ioperm,
#endif
#ifdef SYS_iopl
	SYS_iopl,
#endif
#ifdef SYS_umount
	SYS_umount,
#endif
#ifdef SYS_stime
	SYS_stime,
#endif
#ifdef SYS_vm86
	SYS_vm86,
#endif
#ifdef SYS_vm86old
	SYS_vm86old,
#endif
};

#define NDENIED (sizeof(denied) / sizeof(denied[0]))

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
/* Calls whose first argument names a target process (or thread group). */
static const unsigned pid1_calls[] = {
	SYS_kill, SYS_tkill, SYS_tgkill, SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo, SYS_pidfd_open,
};
#define NPID1 (sizeof(pid1_calls) / sizeof(pid1_calls[0]))

/* prologue 4-5, denies, 3 special, the pid-1 calls, ret allow, 3 arg
 * checks, 4 returns */
#define PROG_MAX (NDENIED + NPID1 + 30)

struct asm_ctx {
	struct bpf_insn insn[PROG_MAX];
	unsigned n;
	/* forward jumps to a label, patched at the end */
	unsigned fix_at[PROG_MAX];
	int fix_label[PROG_MAX];
	unsigned nfix;
};

enum { L_EPERM, L_ENOSYS, L_CLONE, L_UNSHARE, L_PID1, L_COUNT };

static void emit(struct asm_ctx *a, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	a->insn[a->n++] = (struct bpf_insn){code, jt, jf, k};
}

/* if (A == k) goto label; (jt patched later) */
static void jeq_to(struct asm_ctx *a, uint32_t k, int label)
{
	a->fix_at[a->nfix] = a->n;
	a->fix_label[a->nfix++] = label;
	emit(a, BPF_JEQ_K, 0, 0, k);
}

static int build(struct asm_ctx *a, struct bpf_prog *prog)
{
	unsigned label_at[L_COUNT];

	a->n = a->nfix = 0;
	emit(a, BPF_LD_W_ABS, 0, 0, OFF_ARCH);
	emit(a, BPF_JEQ_K, 1, 0, NATIVE_ARCH);
	emit(a, BPF_RET_K, 0, 0, RET_KILL_PROCESS);
	emit(a, BPF_LD_W_ABS, 0, 0, OFF_NR);
#ifdef X32_BIT
	emit(a, BPF_JGE_K, 0, 1, X32_BIT);
	emit(a, BPF_RET_K, 0, 0, RET_ERRNO | EPERM);
#endif
	for (size_t i = 0; i < NDENIED; i++)
		jeq_to(a, denied[i], L_EPERM);
	jeq_to(a, SYS_clone3, L_ENOSYS);
	jeq_to(a, SYS_clone, L_CLONE);
	jeq_to(a, SYS_unshare, L_UNSHARE);
	for (size_t i = 0; i < NPID1; i++)
		jeq_to(a, pid1_calls[i], L_PID1);
	emit(a, BPF_RET_K, 0, 0, RET_ALLOW);

	label_at[L_CLONE] = a->n;
	emit(a, BPF_LD_W_ABS, 0, 0, OFF_ARG0_LO);
	emit(a, BPF_JSET_K, 0, 1, NS_FLAGS_CLONE);
	emit(a, BPF_RET_K, 0, 0, RET_ERRNO | EPERM);
	emit(a, BPF_RET_K, 0, 0, RET_ALLOW);
	label_at[L_UNSHARE] = a->n;
	emit(a, BPF_LD_W_ABS, 0, 0, OFF_ARG0_LO);
	emit(a, BPF_JSET_K, 0, 1, NS_FLAGS_UNSHARE);
	emit(a, BPF_RET_K, 0, 0, RET_ERRNO | EPERM);
	emit(a, BPF_RET_K, 0, 0, RET_ALLOW);
	/* A signal (or a pidfd) aimed at PID 1, the agent: Linux drops what a
	 * process of the namespace sends its init without a handler, gVisor
	 * delivers it, and the agent handles SIGTERM. The pid is an int: its
	 * low word is what the kernel reads. */
	label_at[L_PID1] = a->n;
	emit(a, BPF_LD_W_ABS, 0, 0, OFF_ARG0_LO);
	emit(a, BPF_JEQ_K, 0, 1, 1);
	emit(a, BPF_RET_K, 0, 0, RET_ERRNO | EPERM);
	emit(a, BPF_RET_K, 0, 0, RET_ALLOW);
	label_at[L_EPERM] = a->n;
	emit(a, BPF_RET_K, 0, 0, RET_ERRNO | EPERM);
	label_at[L_ENOSYS] = a->n;
	emit(a, BPF_RET_K, 0, 0, RET_ERRNO | ENOSYS);

	for (unsigned i = 0; i < a->nfix; i++) {
		unsigned from = a->fix_at[i] + 1;
		unsigned to = label_at[a->fix_label[i]];
		if (to < from || to - from > 255)
			return -E2BIG;
		a->insn[a->fix_at[i]].jt = (uint8_t)(to - from);
	}
	prog->len = (unsigned short)a->n;
	prog->filter = a->insn;
	return 0;
}

int seccomp_install(void)
{
	static struct asm_ctx ctx;
	struct bpf_prog prog;
	int rc = build(&ctx, &prog);
	if (rc < 0)
		return rc;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0u, &prog) == 0)
		return 0;
	if (errno != ENOSYS)
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0)
		return 0;
	return -errno;
}
