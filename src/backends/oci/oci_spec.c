/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bundle's config.json: the OCI runtime spec's defaults (`runc spec`)
 * made strict. msb-agent is the process, with only CAP_SETPCAP (it empties
 * the bounding set of every workload, which needs it; workloads get none),
 * no_new_privs and rlimits; new pid, network (only lo: egress `closed`),
 * ipc, uts, mount and user namespaces (guest ids 0..65535 onto uid_base..),
 * plus cgroup for crun; the usual masked and read-only paths; for
 * crun a seccomp profile denying what the agent's workload filter
 * denies (gVisor's sentry is its own system call boundary); no resources
 * (the shim's cgroup holds the runtime and everything it starts).
 * docs/internals/oci-backend.md lists every field.
 */
#include <stdio.h>
#include <sys/resource.h>

#include <jansson.h>

#include "backends/oci/oci_spec.h"
#include "util/json.h"

static const char *const masked[] = {
	"/proc/acpi",
	"/proc/asound",
	"/proc/kcore",
	"/proc/keys",
	"/proc/latency_stats",
	"/proc/timer_list",
	"/proc/timer_stats",
	"/proc/sched_debug",
	"/proc/scsi",
	"/sys/firmware",
	"/sys/devices/virtual/powercap",
	NULL,
};
static const char *const readonly[] = {
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL,
};

/* Denied with EPERM for the agent and everything below it (crun). The
 * mount family, unshare and setns are not here: the agent needs them once, to run
 * workloads in a pid namespace of their own with a procfs that hides it
 * (agent/pidns.c); its own workload filter denies them to every workload. */
static const char *const denied[] = {
	"acct",
	"add_key",
	"bpf",
	"clock_adjtime",
	"clock_settime",
	"delete_module",
	"finit_module",
	"init_module",
	"kcmp",
	"kexec_file_load",
	"kexec_load",
	"keyctl",
	"lookup_dcookie",
	"fspick",
	"name_to_handle_at",
	"open_by_handle_at",
	"perf_event_open",
	"pivot_root",
	"process_vm_readv",
	"process_vm_writev",
	"ptrace",
	"quotactl",
	"quotactl_fd",
	"reboot",
	"request_key",
	"swapon",
	"swapoff",
	"syslog",
	"userfaultfd",
	"vhangup",
	"io_uring_setup",
	"io_uring_enter",
	"io_uring_register",
	"iopl",
	"ioperm",
	"settimeofday",
	"adjtimex",
	"nfsservctl",
	"uselib",
	"_sysctl",
	"personality",
	NULL,
};

/* clone with a namespace flag: one rule per flag (default allow). */
static const unsigned long ns_flags[] = {
	0x00020000ul, /* CLONE_NEWNS */
	0x02000000ul, /* CLONE_NEWCGROUP */
	0x04000000ul, /* CLONE_NEWUTS */
	0x08000000ul, /* CLONE_NEWIPC */
	0x10000000ul, /* CLONE_NEWUSER */
	0x20000000ul, /* CLONE_NEWPID */
	0x40000000ul, /* CLONE_NEWNET */
};

static json_t *strings(const char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; a && v[i]; i++)
		if (json_array_append_new(a, json_string(v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *seccomp(void)
{
	json_t *rules = json_array();
	json_t *deny = json_pack("{s:o, s:s, s:i}", "names", strings(denied), "action",
				 "SCMP_ACT_ERRNO", "errnoRet", 1);
	if (!rules || !deny || json_array_append_new(rules, deny) < 0) {
		json_decref(rules);
		return NULL;
	}
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
		json_t *r = json_pack("{s:[s], s:s, s:i, s:[{s:i, s:I, s:I, s:s}]}", "names",
				      "clone", "action", "SCMP_ACT_ERRNO", "errnoRet", 1, "args",
				      "index", 0, "value", (json_int_t)ns_flags[i], "valueTwo",
				      (json_int_t)ns_flags[i], "op", "SCMP_CMP_MASKED_EQ");
		if (!r || json_array_append_new(rules, r) < 0) {
			json_decref(rules);
			return NULL;
		}
	}
	/* clone3's flags live in memory a filter cannot read: libc falls back
	 * to clone on ENOSYS. */
	json_t *c3 = json_pack("{s:[s], s:s, s:i}", "names", "clone3", "action", "SCMP_ACT_ERRNO",
			       "errnoRet", 38);
	if (!c3 || json_array_append_new(rules, c3) < 0) {
		json_decref(rules);
		return NULL;
	}
	return json_pack("{s:s, s:[s,s,s], s:o}", "defaultAction", "SCMP_ACT_ALLOW",
			 "architectures", "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32",
			 "syscalls", rules);
}

static const char *rlimit_name(int resource)
{
	static const struct {
		int r;
		const char *name;
	} names[] = {
		{RLIMIT_AS, "RLIMIT_AS"},	    {RLIMIT_CORE, "RLIMIT_CORE"},
		{RLIMIT_CPU, "RLIMIT_CPU"},	    {RLIMIT_DATA, "RLIMIT_DATA"},
		{RLIMIT_FSIZE, "RLIMIT_FSIZE"},	    {RLIMIT_LOCKS, "RLIMIT_LOCKS"},
		{RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK"}, {RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE"},
		{RLIMIT_NOFILE, "RLIMIT_NOFILE"},   {RLIMIT_NPROC, "RLIMIT_NPROC"},
		{RLIMIT_RSS, "RLIMIT_RSS"},	    {RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING"},
		{RLIMIT_STACK, "RLIMIT_STACK"},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].r == resource)
			return names[i].name;
	return NULL;
}

static int add_mount(json_t *mounts, const char *dest, const char *type, const char *src,
		     const char *const *opts)
{
	json_t *m = json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type", type, "source",
			      src, "options", strings(opts));
	return m ? json_array_append_new(mounts, m) : -1;
}

static json_t *mounts(const oci_spec_input *in)
{
	const msb_ns_config *ns = &in->cfg->ns;
	json_t *m = json_array();
	if (!m)
		return NULL;
	char devpts_gid[16], dev_size[32];
	snprintf(devpts_gid, sizeof(devpts_gid), "gid=5");
	snprintf(dev_size, sizeof(dev_size), "size=65536k");
	const char *const proc[] = {"nosuid", "noexec", "nodev", NULL};
	/* Read-only once the runtime has made its nodes: the only writable
	 * storage is what the host can see (the layer, /dev/shm, the work dir). */
	const char *const dev[] = {"nosuid", "strictatime", "mode=755", dev_size, "ro", NULL};
	const char *const pts[] = {"nosuid",	"noexec",   "newinstance", "ptmxmode=0666",
				   "mode=0620", devpts_gid, NULL};
	const char *const sys[] = {"nosuid", "noexec", "nodev", "ro", NULL};
	const char *const shm[] = {"rbind", "nosuid", "nodev", "noexec", "rw", NULL};
	const char *const work[] = {"rbind", "nosuid", "nodev", "rw", NULL};
	const char *const agent[] = {"bind", "ro", "nosuid", "nodev", NULL};
	const char *const host[] = {"rbind", "ro", "nosuid", "nodev", NULL};
	const char *const tmp[] = {"rbind", "nosuid", "nodev", "rw", NULL};
	_cleanup_free_ char *shm_src = msb__asprintf("%s/%s", in->private_dir, OCI_STATE_SHM);
	_cleanup_free_ char *work_src = msb__asprintf("%s/%s", in->state_dir, MSB_NS_STATE_WORK);
	_cleanup_free_ char *tmp_src =
		msb__asprintf("%s/%s/tmp", in->private_dir, OCI_STATE_ROOTFS);
	if (!shm_src || !work_src || !tmp_src || add_mount(m, "/proc", "proc", "proc", proc) < 0 ||
	    add_mount(m, "/dev", "tmpfs", "tmpfs", dev) < 0 ||
	    add_mount(m, "/dev/pts", "devpts", "devpts", pts) < 0 ||
	    add_mount(m, "/dev/shm", "bind", shm_src, shm) < 0 ||
	    add_mount(m, "/sys", "sysfs", "sysfs", sys) < 0 ||
	    add_mount(m, ns->work_dir, "bind", work_src, work) < 0 ||
	    add_mount(m, OCI_AGENT_GUEST_PATH, "bind", in->agent_path, agent) < 0)
		goto fail;
	/* gVisor mounts a tmpfs of its own at an empty /tmp, which the host
	 * could not see (and which is bounded by memory only): /tmp is bound
	 * onto itself, so it stays the overlay's. */
	if (in->cfg->runtime == OCI_RUNSC && add_mount(m, "/tmp", "bind", tmp_src, tmp) < 0)
		goto fail;
	for (size_t i = 0; in->host_binds && in->host_binds[i]; i++)
		if (add_mount(m, in->host_binds[i], "bind", in->host_binds[i], host) < 0)
			goto fail;
	return m;
fail:
	json_decref(m);
	return NULL;
}

static json_t *process(const oci_spec_input *in)
{
	const msb_ns_config *ns = &in->cfg->ns;
	json_t *rl = json_array();
	for (size_t i = 0; rl && i < ns->n_rlimits; i++) {
		const char *name = rlimit_name(ns->rlimits[i].resource);
		json_int_t v = ns->rlimits[i].value > (uint64_t)INT64_MAX
				       ? INT64_MAX
				       : (json_int_t)ns->rlimits[i].value;
		json_t *o = name ? json_pack("{s:s, s:I, s:I}", "type", name, "hard", v, "soft", v)
				 : NULL;
		if (!name)
			continue;
		if (!o || json_array_append_new(rl, o) < 0) {
			json_decref(rl);
			return NULL;
		}
	}
	if (!rl)
		return NULL;
	/* CAP_SYS_ADMIN in the container's user namespace only, where the
	 * container runs on the host's kernel (crun): the agent's nesting
	 * needs it (a pid namespace, a procfs); workloads get none. gVisor's
	 * sentry runs workloads in a pid namespace of its own making. */
	bool gvisor = in->cfg->runtime == OCI_RUNSC;
	const char *admin = gvisor ? "CAP_SETPCAP" : "CAP_SYS_ADMIN";
	json_t *caps = json_pack("{s:[s,s], s:[s,s], s:[s,s], s:[], s:[]}", "bounding",
				 "CAP_SETPCAP", admin, "effective", "CAP_SETPCAP", admin,
				 "permitted", "CAP_SETPCAP", admin, "inheritable", "ambient");
	/* --no-nest under gVisor: see docs/internals/oci-backend.md ("The agent
	 * under gVisor"). */
	json_t *args =
		json_pack("[s,s,s,s]", OCI_AGENT_GUEST_PATH, "--stdio", "--work", ns->work_dir);
	if (args && gvisor)
		json_array_append_new(args, json_string("--no-nest"));
	return json_pack("{s:b, s:{s:i, s:i}, s:o, s:[s,s], s:s, s:o, s:o, s:b}", "terminal", 0,
			 "user", "uid", 0, "gid", 0, "args", args, "env",
			 "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			 "HOME=/root", "cwd", "/", "capabilities", caps, "rlimits", rl,
			 "noNewPrivileges", 1);
}

static json_t *linux_section(const oci_spec_input *in)
{
	const msb_ns_config *ns = &in->cfg->ns;
	json_t *nss =
		json_pack("[{s:s},{s:s},{s:s},{s:s},{s:s},{s:s}]", "type", "pid", "type", "network",
			  "type", "ipc", "type", "uts", "type", "mount", "type", "user");
	bool kernel = in->cfg->runtime != OCI_RUNSC;
	if (nss && kernel && json_array_append_new(nss, json_pack("{s:s}", "type", "cgroup")) < 0) {
		json_decref(nss);
		return NULL;
	}
	json_t *l =
		json_pack("{s:o, s:[{s:i, s:I, s:i}], s:[{s:i, s:I, s:i}], s:o, s:o}", "namespaces",
			  nss, "uidMappings", "containerID", 0, "hostID", (json_int_t)ns->uid_base,
			  "size", (int)MSB_NS_ID_COUNT, "gidMappings", "containerID", 0, "hostID",
			  (json_int_t)ns->gid_base, "size", (int)MSB_NS_ID_COUNT, "maskedPaths",
			  strings(masked), "readonlyPaths", strings(readonly));
	if (l && kernel && json_object_set_new(l, "seccomp", seccomp()) < 0) {
		json_decref(l);
		return NULL;
	}
	return l;
}

int oci_spec_write(const oci_spec_input *in, char **out)
{
	_cleanup_free_ char *root = msb__asprintf("%s/%s", in->private_dir, OCI_STATE_ROOTFS);
	if (!root)
		return -ENOMEM;
	json_t *doc =
		json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2",
			  "process", process(in), "root", "path", root, "readonly", 0, "hostname",
			  in->cfg->ns.hostname, "mounts", mounts(in), "linux", linux_section(in));
	if (!doc)
		return -ENOMEM;
	char *text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (!text)
		return -ENOMEM;
	*out = text;
	return 0;
}
