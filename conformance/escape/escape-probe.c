/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-escape-probe: run inside a sandbox, try what a container or microVM
 * boundary forbids, and report each attempt as one JSON line:
 *
 *   {"probe":"ptrace-pid1","outcome":"blocked","detail":"EPERM","why":"..."}
 *
 * outcome is "blocked" (the attempt was refused, or what it reached was the
 * sandbox's own), "contained" (a resource limit stopped it), "escaped" (it
 * worked), or "error" (the probe could not tell). The verdict is not made
 * here: the guest is untrusted, so `msb conformance --escape` compares each
 * outcome with its own expectations and cross-checks the host (its
 * hostname, clock, canary files, processes). docs/security.md lists every
 * probe.
 *
 * A static binary (musl), placed in the sandbox through the file plane. It
 * never writes outside the sandbox on purpose: every write attempt aims at a
 * path the host created for the test, and every opened-for-write system
 * file is closed without writing.
 */
#include "probe.h"

/* ---- the table ------------------------------------------------------------------------ */

static const struct probe probes[] = {
	{"read-host-canary", "a host file outside the sandbox, by its host path", p_canary},
	{"write-host-canary", "creating a file at a host path the test made", p_canary_write},
	{"read-other-sandbox", "another sandbox's storage base, by its host path", p_neighbour},
	{"read-via-proc-root", "every visible /proc/PID/root, for the host's canary", p_proc_root},
	{"list-host-homes", "/root, /home, /var/lib, /run of the host", p_host_home},
	{"read-etc-shadow", "the host's password hashes", p_shadow},
	{"open-by-handle", "the shocker escape: a host inode by file handle", p_handle},
	{"chroot-out", "chroot needs CAP_SYS_CHROOT, the classic way out of a jail", p_chroot},
	{"write-agent-binary", "runc CVE-2019-5736: the runtime's binary via /proc/1/exe",
	 p_exe_write},
	{"inherited-fds", "a descriptor the agent leaked is a door to the host", p_fds},
	{"pid1-is-own-agent", "a pid namespace: PID 1 is the sandbox's agent, not the host's init",
	 p_pid1},
	{"host-pids-hidden", "the host's processes (msb-shim, a host sleeper) must not be visible",
	 p_host_pids},
	{"kallsyms-addresses", "kernel addresses defeat KASLR", p_kallsyms},
	{"add-key", "the kernel keyring is not namespaced: keys of the host", p_add_key},
	{"keyctl-session", "joining a session keyring reaches the host's keys", p_keyctl},
	{"proc-keys", "/proc/keys lists keys the caller can view", p_proc_keys},
	{"sysrq-trigger", "one write reboots or crashes the host", p_sysrq},
	{"core-pattern", "a writable core_pattern runs a host command as root", p_core_pattern},
	{"proc-kcore", "the host kernel's memory", p_kcore},
	{"sys-uevent-helper", "a writable uevent_helper runs a host command as root", p_sys_write},
	{"cgroup-write", "moving out of, or raising, the sandbox's cgroup", p_cgroup_write},
	{"dmesg", "the kernel log leaks addresses and host activity", p_dmesg},
	{"uid-not-host-root", "guest root must not be host root", p_uid_map},
	{"mount-tmpfs", "mounting is how a guest rearranges its view of the host", p_mount_tmpfs},
	{"remount-usr-rw", "the host's /usr is bound read-only", p_remount},
	{"unmount-proc-mask", "removing a /proc mask exposes what it hides", p_umount_mask},
	{"unshare-user-ns", "a nested user namespace regains every capability", p_unshare_user},
	{"clone-user-ns", "the same through clone(CLONE_NEWUSER)", p_clone_newuser},
	{"setns-pid1", "joining another namespace by its /proc entry", p_setns},
	{"pivot-root", "changing the root filesystem", p_pivot_root},
	{"ptrace-pid1", "tracing the agent takes over what it can do", p_ptrace},
	{"process-vm-pid1", "reading the agent's memory", p_process_vm},
	{"proc-pid1-mem", "the agent's memory through /proc", p_proc_mem},
	{"kill-pid1", "a workload must not be able to kill its agent", p_kill_pid1},
	{"pid1-oom-score-adj", "raising the agent's OOM score gets it killed by a memory fill",
	 p_pid1_oom_score},
	{"pid1-environ", "the agent's environment", p_pid1_environ},
	{"pid1-maps", "the agent's memory layout, the first step to its memory", p_pid1_maps},
	{"init-module", "loading kernel code", p_init_module},
	{"finit-module", "loading kernel code from a file", p_finit_module},
	{"kexec-load", "replacing the running kernel", p_kexec},
	{"bpf", "kernel programs and maps: a large attack surface", p_bpf},
	{"perf-event-open", "performance counters leak and have had exploitable bugs", p_perf},
	{"userfaultfd", "a tool for winning kernel races", p_userfaultfd},
	{"io-uring", "a large, frequently exploited kernel interface", p_io_uring},
	{"reboot", "rebooting the host", p_reboot},
	{"swapon", "host swap configuration", p_swapon},
	{"iopl", "raw I/O port access", p_iopl},
	{"raw-socket", "crafting packets (spoofing) needs CAP_NET_RAW", p_raw},
	{"packet-socket", "sniffing and injecting frames", p_packet},
	{"outbound-tcp", "closed egress: no route out", p_outbound},
	{"metadata-address", "the cloud metadata service hands out credentials", p_metadata},
	{"host-loopback-tcp", "a service on the host's loopback", p_host_tcp},
	{"host-abstract-socket", "abstract unix sockets belong to the network namespace",
	 p_abstract},
	{"shim-socket", "the shim's control socket would let the guest drive the host side",
	 p_shim_sock},
	{"proxy-port", "the egress proxy must not tunnel to loopback or unlisted hosts", p_proxy},
	{"signal-host-process", "a process outside the sandbox, by its host pid", p_signal_host},
	{"pidfd-host-process", "a host process by pidfd", p_pidfd},
	{"raise-rlimit-nofile", "hard rlimits only go down", p_rlimit_nofile},
	{"raise-rlimit-nproc", "hard rlimits only go down", p_rlimit_nproc},
	{"raise-rlimit-memlock", "hard rlimits only go down", p_rlimit_core},
	{"mknod-block-device", "a device node is raw access to host hardware", p_mknod},
	{"host-device-nodes", "the minimal /dev holds no host disk, memory or kvm", p_dev_nodes},
	{"capabilities-empty", "workloads run with every capability set empty", p_caps},
	{"no-new-privs", "setuid binaries must not raise privileges", p_nnp},
	{"setuid-binary", "a setuid-root copy of a binary runs without capabilities", p_setuid_bin},
	{"seccomp-filter", "the syscall filter behind half of these refusals", p_seccomp},
	{"settimeofday", "the clock is not namespaced: a change moves the host's", p_settimeofday},
	{"clock-settime", "the same through clock_settime", p_clock_settime},
	{"adjtimex", "the same through adjtimex", p_adjtimex},
	{"sethostname", "the hostname must not leak out of the UTS namespace", p_sethostname},
	{"setdomainname", "the same for the NIS domain name", p_setdomainname},
	{"listing-bomb", "a guest listing the host reads must not make it allocate without bound",
	 p_listing_bomb},
	/* Last: a limit that does not hold could take the sandbox down. */
	{"fill-memory", "memory past the limit starves the host", p_memory},
	{"fork-bomb", "processes past the limit starve the host", p_pids},
	{"fill-writable-layer", "disk past the writable limit fills the host", p_disk},
	{"fill-dev-shm", "/dev/shm is memory: it must count against the limit", p_shm},
	/* Very last: where it works it takes the sandbox, and this run, down. */
	{"signal-pid1", "a signal the agent catches must not stop it", p_signal_pid1},
};

/* Probes run only when named with --only (and given --swap-seconds): the host
 * runs each in an exec of its own and works on the sandbox while it runs. */
static const struct probe alone_probes[] = {
	{"link-swap-storage-base",
	 "the host's syscalls on names in the storage base must never follow a link the guest "
	 "swapped in",
	 p_link_swap},
};

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 32)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* `name` is one of the comma-separated names in `list`. */
static bool listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

static void report(const struct ctx *c, const struct probe *p)
{
	struct res r = {"error", "the probe did not report"};
	p->run(c, &r);
	printf("{\"probe\":");
	json_str(p->name);
	printf(",\"outcome\":");
	json_str(r.outcome);
	printf(",\"detail\":");
	json_str(r.detail);
	printf(",\"why\":");
	json_str(p->why);
	printf("}\n");
}

static uint64_t num(const char *s)
{
	return s ? strtoull(s, NULL, 10) : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--caps-only") == 0) {
		char v[64] = "";
		status_field("CapEff", v, sizeof(v));
		printf("%s\n", v);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
			printf("%s\n", probes[i].name);
		for (size_t i = 0; i < sizeof(alone_probes) / sizeof(alone_probes[0]); i++)
			printf("%s\n", alone_probes[i].name);
		return 0;
	}
	struct ctx c = {0};
	const char *only = NULL; /* a comma-separated subset, for diagnosis */
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--canary"))
			c.canary = v;
		else if (!strcmp(k, "--canary-write"))
			c.canary_w = v;
		else if (!strcmp(k, "--neighbour"))
			c.neighbour = v;
		else if (!strcmp(k, "--shim-sock"))
			c.shim_sock = v;
		else if (!strcmp(k, "--abstract"))
			c.abstract = v;
		else if (!strcmp(k, "--tcp-port"))
			c.tcp_port = (int)num(v);
		else if (!strcmp(k, "--host-pid"))
			c.host_pid = (int)num(v);
		else if (!strcmp(k, "--memory"))
			c.memory = num(v);
		else if (!strcmp(k, "--pids"))
			c.pids = num(v);
		else if (!strcmp(k, "--writable"))
			c.writable = num(v);
		else if (!strcmp(k, "--only"))
			only = v;
		else if (!strcmp(k, "--swap-base"))
			c.swap_base = v;
		else if (!strcmp(k, "--swap-target"))
			c.swap_target = v;
		else if (!strcmp(k, "--swap-dir"))
			c.swap_dir = v;
		else if (!strcmp(k, "--swap-seconds"))
			c.swap_seconds = strtod(v, NULL);
		else if (!strcmp(k, "--bomb"))
			c.bomb = v;
		else if (!strcmp(k, "--init"))
			c.init = v;
		else if (!strcmp(k, "--init"))
			c.init = v;
	}
	if (!c.canary || !c.canary_w || !c.neighbour || !c.shim_sock || !c.abstract) {
		fprintf(stderr, "usage: msb-escape-probe --canary P --canary-write P --neighbour P "
				"--shim-sock P --abstract NAME --tcp-port N --host-pid N "
				"[--memory B --pids N --writable B --bomb DIR] [--init WORD] "
				"[--only NAMES] "
				"[--swap-base D "
				"--swap-target P --swap-dir D --swap-seconds S]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	/* The reporter is the OOM killer's last choice among the probes: the
	 * agent starts every workload at 1000 (agent/child.c), a workload may
	 * lower itself to 0, and each filler goes back to 1000 in the child
	 * that fills (probe_limits.c). A killed reporter loses every later
	 * probe. */
	oom_adj("0");
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		if (!only || listed(only, probes[i].name))
			report(&c, &probes[i]);
	for (size_t i = 0; i < sizeof(alone_probes) / sizeof(alone_probes[0]); i++)
		if (only && listed(only, alone_probes[i].name) && c.swap_seconds > 0)
			report(&c, &alone_probes[i]);
	return 0;
}
