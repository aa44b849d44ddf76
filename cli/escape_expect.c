/* SPDX-License-Identifier: Apache-2.0 */
/* The escape suite's expectations (escape_expect.h; docs/security.md). */
#include <string.h>

#include "escape_expect.h"

/* What each probe must come back as on a backend with a boundary. The list
 * is the host's: a probe missing from the guest's report fails. */
const struct cli_expectation cli_escape_expectations[] = {
	{"read-host-canary", "blocked"},
	{"write-host-canary", "blocked"},
	{"read-other-sandbox", "blocked"},
	{"read-via-proc-root", "blocked"},
	{"list-host-homes", "blocked"},
	{"read-etc-shadow", "blocked"},
	{"open-by-handle", "blocked"},
	{"chroot-out", "blocked"},
	{"write-agent-binary", "blocked"},
	{"inherited-fds", "blocked"},
	{"pid1-is-own-agent", "blocked"},
	{"host-pids-hidden", "blocked"},
	{"kallsyms-addresses", "blocked"},
	{"add-key", "blocked"},
	{"keyctl-session", "blocked"},
	{"proc-keys", "blocked"},
	{"sysrq-trigger", "blocked"},
	{"core-pattern", "blocked"},
	{"proc-kcore", "blocked"},
	{"sys-uevent-helper", "blocked"},
	{"cgroup-write", "blocked"},
	{"dmesg", "blocked"},
	{"uid-not-host-root", "blocked"},
	{"mount-tmpfs", "blocked"},
	{"remount-usr-rw", "blocked"},
	{"unmount-proc-mask", "blocked"},
	{"unshare-user-ns", "blocked"},
	{"clone-user-ns", "blocked"},
	{"setns-pid1", "blocked"},
	{"pivot-root", "blocked"},
	{"ptrace-pid1", "blocked"},
	{"process-vm-pid1", "blocked"},
	{"proc-pid1-mem", "blocked"},
	{"kill-pid1", "blocked"},
	{"pid1-oom-score-adj", "blocked"},
	{"pid1-environ", "blocked"},
	{"pid1-maps", "blocked"},
	{"signal-pid1", "blocked"},
	{"init-module", "blocked"},
	{"finit-module", "blocked"},
	{"kexec-load", "blocked"},
	{"bpf", "blocked"},
	{"perf-event-open", "blocked"},
	{"userfaultfd", "blocked"},
	{"io-uring", "blocked"},
	{"reboot", "blocked"},
	{"swapon", "blocked"},
	{"iopl", "blocked"},
	{"raw-socket", "blocked"},
	{"packet-socket", "blocked"},
	{"outbound-tcp", "blocked"},
	{"metadata-address", "blocked"},
	{"host-loopback-tcp", "blocked"},
	{"host-abstract-socket", "blocked"},
	{"shim-socket", "blocked"},
	{"proxy-port", "blocked"},
	{"signal-host-process", "blocked"},
	{"pidfd-host-process", "blocked"},
	{"raise-rlimit-nofile", "blocked"},
	{"raise-rlimit-nproc", "blocked"},
	{"raise-rlimit-memlock", "blocked"},
	{"mknod-block-device", "blocked"},
	{"host-device-nodes", "blocked"},
	{"capabilities-empty", "blocked"},
	{"no-new-privs", "blocked"},
	{"setuid-binary", "blocked"},
	{"seccomp-filter", "blocked"},
	{"settimeofday", "blocked"},
	{"clock-settime", "blocked"},
	{"adjtimex", "blocked"},
	{"sethostname", "blocked"},
	{"setdomainname", "blocked"},
	{"listing-bomb", "contained"},
	{"fill-memory", "contained"},
	{"fork-bomb", "contained"},
	{"fill-writable-layer", "contained"},
	{"fill-dev-shm", "contained"},
	/* Run alone, while the host works on the storage base (issue 15). */
	{"link-swap-storage-base", "blocked"},
};
const size_t cli_escape_n_expectations =
	sizeof(cli_escape_expectations) / sizeof(cli_escape_expectations[0]);

/*
 * Where a backend's own kernel answers for the host's, a probe reads the
 * wrong thing: the oci backend with runsc runs the guest on gVisor's
 * user-space kernel. There the host accepts exactly the answer below
 * (outcome and detail) and says why; every other answer fails as usual.
 * docs/security.md lists these per runtime.
 */
static const struct cli_difference differences[] = {
	{"runsc", "uid-not-host-root", "escaped", "guest uid 0 is host uid 0 (root)",
	 "gVisor's /proc/self/uid_map is its own kernel's identity map; what the host's kernel "
	 "sees is host:guest-root-unprivileged"},
	{"runsc", "host-device-nodes", "escaped", "opened `/dev/fuse`, `/dev/net/tun`",
	 "both are gVisor's own devices (the sentry's FUSE server and its netstack's tun), not "
	 "the host's; using either needs CAP_SYS_ADMIN or CAP_NET_ADMIN, which workloads lack"},
};

const struct cli_difference *cli_escape_difference_of(const char *runtime, const char *probe)
{
	for (size_t i = 0; runtime && i < sizeof(differences) / sizeof(differences[0]); i++)
		if (strcmp(differences[i].runtime, runtime) == 0 &&
		    strcmp(differences[i].probe, probe) == 0)
			return &differences[i];
	return NULL;
}
