/* SPDX-License-Identifier: Apache-2.0 */
/* The escape suite's expectations (escape_expect.h; docs/security.md). */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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

/*
 * Where a container engine's boundary, or a VM's, answers otherwise than ns's,
 * and why (docs/security.md, "Container engines", "The `vm` backend"). "engine": the engine's own
 * configuration decides (blocked or escaped are both its answer, named in the
 * table; an error or a missing report still fails).
 */
static const struct {
	const char *backend, *probe, *expected;
} engine_answers[] = {
	/* Root in the container is host root unless the engine remaps users
	 * (dockerd --userns-remap, rootless podman). */
	{"docker", "uid-not-host-root", "engine"},
	{"docker", "host:guest-root-unprivileged", "engine"},
	/* The engine's seccomp profile decides (docker 25 refuses io_uring, 20.10
	 * allows it). */
	{"docker", "io-uring", "engine"},
	/* PID 1 is the container's `sleep infinity`, the workloads' peer (same
	 * uid, same pid namespace): there is no agent to protect, and reaching it
	 * reaches nothing outside. */
	{"docker", "ptrace-pid1", "escaped"},
	{"docker", "proc-pid1-mem", "escaped"},
	{"docker", "pid1-oom-score-adj", "escaped"},
	{"docker", "pid1-environ", "escaped"},
	{"docker", "pid1-maps", "escaped"},
	/* Root keeps the engine's default capabilities less msb's drops (file
	 * ownership, setuid and setgid inside the container); no_new_privs is
	 * set, so a setuid binary gains nothing past them. */
	{"docker", "capabilities-empty", "escaped"},
	{"docker", "setuid-binary", "escaped"},
	/* No writable-layer bound on overlay2 without xfs quotas: the fill
	 * writes four times ESC_WRITABLE into the engine's data root. */
	{"docker", "fill-writable-layer", "escaped"},
	/* A guest's /proc/self/uid_map is its own kernel's identity map: guest
	 * root is the guest kernel's root, behind the VM boundary. What the
	 * host's kernel sees is host:guest-root-unprivileged (the VMM's uid,
	 * the jail's own). */
	{"vm", "uid-not-host-root", "escaped"},
};

const char *cli_escape_expected_for_probe(const char *backend, const char *probe)
{
	for (size_t i = 0; backend && i < sizeof(engine_answers) / sizeof(engine_answers[0]); i++)
		if (strcmp(engine_answers[i].backend, backend) == 0 &&
		    strcmp(engine_answers[i].probe, probe) == 0)
			return engine_answers[i].expected;
	return NULL;
}

const char *cli_escape_expected_for(const char *backend, const struct cli_expectation *e)
{
	const char *w = cli_escape_expected_for_probe(backend, e->probe);
	return w ? w : e->expected;
}

bool cli_escape_outcome_ok(const char *want, const char *outcome)
{
	if (strcmp(want, "engine") == 0)
		return strcmp(outcome, "blocked") == 0 || strcmp(outcome, "escaped") == 0;
	return strcmp(outcome, want) == 0;
}

const char *cli_escape_init_for(const char *backend)
{
	return backend && strcmp(backend, "docker") == 0 ? "sleep" : "agent";
}

bool cli_escape_vmm_uid(const char *work, uid_t *uid, char *detail, size_t size)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%.4000s", work);
	char *slash = strrchr(path, '/');
	if (slash)
		snprintf(slash, sizeof(path) - (size_t)(slash - path), "/init.pid");
	int pid = 0;
	FILE *f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%d", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	char proc[32];
	snprintf(proc, sizeof(proc), "/proc/%d", pid);
	struct stat st;
	if (pid <= 0 || stat(proc, &st) < 0) {
		snprintf(detail, size, "no VMM to look at: `%s` names no live process", path);
		return false;
	}
	*uid = st.st_uid;
	snprintf(detail, size, "the guest's VMM (pid %d) runs as host uid %u", pid,
		 (unsigned)st.st_uid);
	return true;
}
