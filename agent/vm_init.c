/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest's init in a `vm` sandbox (docs/internals/vm.md). The kernel runs
 * msb-agent as /init of an initramfs msb built, with
 *
 *	/init --vm [--work DIR] [--hostname NAME] [--writable-bytes N]
 *
 * (the words after "--" on the kernel command line). Before the agent's own
 * loop starts, this:
 *
 *  1. mounts /proc, /sys and devtmpfs on /dev of the initramfs;
 *  2. loads the kernel modules under /msb/modules in name order with
 *     finit_module (virtio transport, console, block, erofs, overlay);
 *  3. waits for the image disk (/dev/vda) and the virtio-serial port named
 *     "msb", and for the host end of the port to be connected;
 *  4. builds the root: the image read-only (erofs) under an overlay whose
 *     upper layer is a tmpfs of --writable-bytes, the storage base made in
 *     it, a fresh /proc, a read-only /sys, a small read-only /dev;
 *  5. binds the agent's listening socket at /msb/agent.sock in the initramfs,
 *     forks the identity helper (vm_identity.c: root, every capability, the
 *     initramfs's root, applies each host session's entropy, host name and
 *     instance id) and the port pump (vm_pump.c), which stays in the
 *     initramfs's root and carries every host connection between the port
 *     and that socket; the pump drops to its own uid so workloads cannot
 *     signal it;
 *  6. moves the new root onto / and chroots into it (the initramfs stays
 *     reachable only from the pump), sets the host name.
 *
 * Any failure prints one line on the console (the host keeps its last lines)
 * and powers the guest off: the VM never serves half built.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define VM_MODULES "/msb/modules"
#define VM_LOWER "/msb/lower"
#define VM_RW "/msb/rw"
#define VM_ROOT "/msb/root"
#define VM_SOCK "/msb/agent.sock"
#define VM_DISK "/dev/vda"
#define VM_PORT_NAME "msb"
#define VM_WAIT_NS (10LL * 1000 * 1000 * 1000)

static _Noreturn void halt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void halt(const char *fmt, ...)
{
	char line[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	agent_log("vm init: %s", line);
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void must_mount(const char *src, const char *dst, const char *type, unsigned long flags,
		       const char *data)
{
	if (mkdir(dst, 0755) < 0 && errno != EEXIST)
		halt("mkdir %s: %s", dst, strerror(errno));
	if (mount(src, dst, type, flags, data) < 0)
		halt("mount %s on %s: %s", type ? type : src, dst, strerror(errno));
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load_modules(void)
{
	DIR *d = opendir(VM_MODULES);
	if (!d)
		return; /* a kernel with everything built in */
	char *names[64];
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < 64)
		if (strstr(de->d_name, ".ko") && (names[n] = strdup(de->d_name)))
			n++;
	closedir(d);
	qsort(names, n, sizeof(names[0]), name_cmp);
	for (size_t i = 0; i < n; i++) {
		char path[300];
		snprintf(path, sizeof(path), VM_MODULES "/%s", names[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			halt("open %s: %s", path, strerror(errno));
		if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
			halt("load %s: %s", names[i], strerror(errno));
		close(fd);
		free(names[i]);
	}
}

/* /dev/vportNpM whose name is VM_PORT_NAME. */
static int find_port(char *dev, size_t size)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	if (!d)
		return -1;
	struct dirent *de;
	int found = -1;
	while (found < 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char p[300], name[64] = "";
		snprintf(p, sizeof(p), "/sys/class/virtio-ports/%s/name", de->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n > 0 && name[n - 1] == '\n')
			n--;
		if (n == (ssize_t)strlen(VM_PORT_NAME) &&
		    memcmp(name, VM_PORT_NAME, (size_t)n) == 0) {
			snprintf(dev, size, "/dev/%s", de->d_name);
			found = 0;
		}
	}
	closedir(d);
	return found;
}

static int open_port(void)
{
	int64_t until = agent_now_ns() + VM_WAIT_NS;
	char dev[300];
	while (find_port(dev, sizeof(dev)) < 0) {
		if (agent_now_ns() > until)
			halt("no virtio-serial port named `%s`", VM_PORT_NAME);
		sleep_ms(5);
	}
	int fd;
	while ((fd = open(dev, O_RDWR | O_CLOEXEC | O_NONBLOCK)) < 0) {
		if (agent_now_ns() > until)
			halt("open %s: %s", dev, strerror(errno));
		sleep_ms(5);
	}
	/* While the host end is not connected the port reports a hang-up. */
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP))
			break;
		if (agent_now_ns() > until)
			halt("the host end of %s never connected", dev);
		sleep_ms(10);
	}
	return fd;
}

static void wait_disk(void)
{
	int64_t until = agent_now_ns() + VM_WAIT_NS;
	struct stat st;
	while (stat(VM_DISK, &st) < 0 || !S_ISBLK(st.st_mode)) {
		if (agent_now_ns() > until)
			halt("no image disk %s", VM_DISK);
		sleep_ms(5);
	}
}

static void mkdir_p(const char *path, mode_t mode)
{
	char buf[MSB_PROTO_MAX_PATH];
	size_t len = strlen(path);
	if (len >= sizeof(buf))
		halt("path too long: %s", path);
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			halt("mkdir %s: %s", buf, strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		halt("mkdir %s: %s", buf, strerror(errno));
}

static void make_node(const char *path, mode_t mode, unsigned maj, unsigned min)
{
	if (mknod(path, S_IFCHR | mode, makedev(maj, min)) < 0 && errno != EEXIST)
		halt("mknod %s: %s", path, strerror(errno));
	chmod(path, mode);
}

/* A small /dev in the new root: the usual character devices, pts, shm. */
static void make_dev(const char *root)
{
	char dev[300], p[340];
	snprintf(dev, sizeof(dev), "%s/dev", root);
	must_mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755");
	static const struct {
		const char *name;
		unsigned maj, min;
	} nodes[] = {{"null", 1, 3},   {"zero", 1, 5},	  {"full", 1, 7},
		     {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dev, nodes[i].name);
		make_node(p, 0666, nodes[i].maj, nodes[i].min);
	}
	snprintf(p, sizeof(p), "%s/pts", dev);
	must_mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC,
		   "newinstance,ptmxmode=0666,mode=0620");
	snprintf(p, sizeof(p), "%s/shm", dev);
	must_mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=1777");
	static const char *const links[][2] = {{"pts/ptmx", "ptmx"},
					       {"/proc/self/fd", "fd"},
					       {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"},
					       {"/proc/self/fd/2", "stderr"}};
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dev, links[i][1]);
		if (symlink(links[i][0], p) < 0 && errno != EEXIST)
			halt("symlink %s: %s", p, strerror(errno));
	}
	if (mount(NULL, dev, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) <
	    0)
		halt("read-only /dev: %s", strerror(errno));
}

/*
 * The guest's own kernel is behind the VM boundary, but a workload (guest
 * root without capabilities) must not get to the agent's level through it:
 * /proc/sys is read-only (a writable core_pattern runs a command with every
 * capability; sysctls need no capability check beyond the file mode), and
 * so is sysrq-trigger, and keys and the kernel's timing tables read as
 * /dev/null - the masks the `ns` boundary applies (kcore needs
 * CAP_SYS_RAWIO already).
 */
static void mask_proc(const char *root)
{
	char p[300], null[300];
	snprintf(null, sizeof(null), "%s/dev/null", root);
	static const char *const ro[] = {"sys", "bus", "fs", "irq", "sysrq-trigger"};
	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		snprintf(p, sizeof(p), "%s/proc/%s", root, ro[i]);
		if (access(p, F_OK) != 0)
			continue;
		if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    mount(NULL, p, NULL,
			  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  NULL) < 0)
			halt("read-only %s: %s", p, strerror(errno));
	}
	static const char *const nulled[] = {"keys", "latency_stats", "timer_list", "timer_stats",
					     "sched_debug"};
	for (size_t i = 0; i < sizeof(nulled) / sizeof(nulled[0]); i++) {
		snprintf(p, sizeof(p), "%s/proc/%s", root, nulled[i]);
		if (access(p, F_OK) != 0)
			continue;
		if (mount(null, p, NULL, MS_BIND, NULL) < 0)
			halt("mask %s: %s", p, strerror(errno));
	}
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		halt("open %s: %s", path, strerror(errno));
	ssize_t n = write(fd, text, strlen(text));
	if (n != (ssize_t)strlen(text))
		halt("write %s: %s", path, n < 0 ? strerror(errno) : "short write");
	close(fd);
}

/*
 * The sandbox's limits inside the guest: cgroup v2 at /sys/fs/cgroup of the
 * new root, a `sandbox` cgroup with pids.max and cpu.max holding the init
 * itself (so the agent, the pump and every workload: as on `ns`, the pids
 * limit counts the agent), and the spec's memory.max (the guest's RAM has
 * its kernel's share on top), then made read-only - a workload can read its
 * limits and counters (pids.events tells the host a fork was refused) but
 * not change them. Disk is the writable layer. The init is the guest's
 * PID 1: the OOM killer never chooses it, a workload (oom_score_adj 1000) goes
 * first.
 */
static void limit(const char *root, uint64_t pids_max, uint64_t cpu_millis, uint64_t memory_max)
{
	char cg[300], p[340], v[64];
	snprintf(cg, sizeof(cg), "%s/sys/fs/cgroup", root);
	if (mount("cgroup2", cg, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		halt("mount cgroup2: %s", strerror(errno));
	snprintf(p, sizeof(p), "%s/cgroup.subtree_control", cg);
	write_file(p, "+pids +cpu +memory");
	snprintf(p, sizeof(p), "%s/sandbox", cg);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		halt("mkdir %s: %s", p, strerror(errno));
	if (pids_max) {
		snprintf(p, sizeof(p), "%s/sandbox/pids.max", cg);
		snprintf(v, sizeof(v), "%llu", (unsigned long long)pids_max);
		write_file(p, v);
	}
	if (cpu_millis) {
		snprintf(p, sizeof(p), "%s/sandbox/cpu.max", cg);
		snprintf(v, sizeof(v), "%llu 100000", (unsigned long long)cpu_millis * 100);
		write_file(p, v);
	}
	if (memory_max) {
		snprintf(p, sizeof(p), "%s/sandbox/memory.max", cg);
		snprintf(v, sizeof(v), "%llu", (unsigned long long)memory_max);
		write_file(p, v);
	}
	snprintf(p, sizeof(p), "%s/sandbox/cgroup.procs", cg);
	write_file(p, "0");
	if (mount(NULL, cg, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) <
	    0)
		halt("read-only cgroup2: %s", strerror(errno));
}

/* The loopback interface up: the guest's only one (the VM has no network
 * device). The egress proxy's port (agent/egress.c) listens on it, and
 * workloads may talk to themselves over it, as on `ns`. */
static void loopback_up(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		halt("the loopback interface: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		halt("the loopback interface up: %s", strerror(errno));
	close(fd);
}

static int listen_socket(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		halt("socket: %s", strerror(errno));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", VM_SOCK);
	unlink(VM_SOCK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(VM_SOCK, 0666) < 0 ||
	    listen(fd, 128) < 0)
		halt("agent socket: %s", strerror(errno));
	return fd;
}

static uint64_t parse_u64(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end)
		halt("not a number: `%s`", s);
	return v;
}

/* The identity helper (vm_identity.c) keeps every capability in the
 * initramfs's root and a handle on the guest's root; the port pump
 * (vm_pump.c) asks it to apply each host session's identity. */
static void start_helpers(int port, int lfd)
{
	int req[2], ack[2];
	int rootfd = open(VM_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0 || pipe2(req, O_CLOEXEC) < 0 || pipe2(ack, O_CLOEXEC) < 0)
		halt("the identity helper's pipes: %s", strerror(errno));
	pid_t helper = fork();
	if (helper < 0)
		halt("fork the identity helper: %s", strerror(errno));
	if (helper == 0) {
		close(lfd);
		close(port);
		close(req[1]);
		close(ack[0]);
		prctl(PR_SET_NAME, "msb-identity", 0, 0, 0);
		_exit(vm_identity_run(req[0], ack[1], rootfd));
	}
	close(rootfd);
	close(req[0]);
	close(ack[1]);
	pid_t pump = fork();
	if (pump < 0)
		halt("fork the port pump: %s", strerror(errno));
	if (pump == 0) {
		close(lfd);
		_exit(vm_pump_run(port, VM_SOCK, req[1], ack[0]));
	}
	close(port);
	close(req[1]);
	close(ack[0]);
}

int vm_init(int argc, char **argv, const char **work)
{
	if (argc > 2 && strcmp(argv[2], "--probe") == 0) {
		/* The host's KVM probe (src/backends/vm/probe.c): reaching here
		 * is the proof; say so on the console and power off. */
		static const char marker[] = "msb-vm-probe: init reached\n";
		ssize_t w = write(STDOUT_FILENO, marker, sizeof(marker) - 1);
		(void)w;
		reboot(RB_POWER_OFF);
		_exit(0);
	}
	const char *hostname = "msb";
	uint64_t writable = 64ull << 20;
	uint64_t layers = 0; /* oci: the disk holds layer directories 0 (top) .. N-1 */
	uint64_t pids_max = 0, cpu_millis = 0, memory_max = 0; /* the sandbox's cgroup; 0 = none */
	for (int i = 2; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			halt("option %s needs a value", argv[i]);
		if (strcmp(argv[i], "--work") == 0)
			*work = v;
		else if (strcmp(argv[i], "--hostname") == 0)
			hostname = v;
		else if (strcmp(argv[i], "--writable-bytes") == 0)
			writable = parse_u64(v);
		else if (strcmp(argv[i], "--layers") == 0)
			layers = parse_u64(v);
		else if (strcmp(argv[i], "--pids-max") == 0)
			pids_max = parse_u64(v);
		else if (strcmp(argv[i], "--cpu-millis") == 0)
			cpu_millis = parse_u64(v);
		else if (strcmp(argv[i], "--memory-max") == 0)
			memory_max = parse_u64(v);
		else
			halt("unknown option %s", argv[i]);
		i++;
	}
	if ((*work)[0] != '/' || strlen(*work) >= 1024)
		halt("--work must be an absolute path");

	umask(022);
	must_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	must_mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	must_mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755");
	load_modules();
	wait_disk();

	/* The root: image below, a size-capped tmpfs on top. */
	must_mount(VM_DISK, VM_LOWER, "erofs", MS_RDONLY | MS_NODEV, NULL);
	char opts[1600];
	snprintf(opts, sizeof(opts), "size=%llu,mode=0755", (unsigned long long)writable);
	must_mount("tmpfs", VM_RW, "tmpfs", MS_NOSUID | MS_NODEV, opts);
	mkdir_p(VM_RW "/upper", 0755);
	mkdir_p(VM_RW "/work", 0755);
	char lower[1200];
	if (layers == 0) {
		snprintf(lower, sizeof(lower), "%s", VM_LOWER);
	} else {
		/* Stacked, top first; whiteouts and opaque directories as the
		 * host unpacked them (user.overlay.* xattrs: userxattr). */
		if (layers > 64)
			halt("--layers %llu: at most 64", (unsigned long long)layers);
		size_t o = 0;
		for (uint64_t i = 0; i < layers; i++)
			o += (size_t)snprintf(lower + o, sizeof(lower) - o, "%s%s/%llu",
					      i ? ":" : "", VM_LOWER, (unsigned long long)i);
	}
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s/upper,workdir=%s/work%s", lower,
		 VM_RW, VM_RW, layers ? ",userxattr" : "");
	must_mount("overlay", VM_ROOT, "overlay", MS_NOSUID | MS_NODEV, opts);

	/* A `dir:` image may lack /tmp: make it (in the writable layer). */
	if (mkdir(VM_ROOT "/tmp", 01777) == 0)
		chmod(VM_ROOT "/tmp", 01777);
	char p[1200];
	snprintf(p, sizeof(p), "%s%s", VM_ROOT, *work);
	mkdir_p(p, 0700);
	snprintf(p, sizeof(p), "%s/proc", VM_ROOT);
	must_mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	snprintf(p, sizeof(p), "%s/sys", VM_ROOT);
	must_mount("sysfs", p, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	make_dev(VM_ROOT);
	mask_proc(VM_ROOT);
	limit(VM_ROOT, pids_max, cpu_millis, memory_max);
	/* What the fingerprint is measured against (layer.c): the root as
	 * built, before the identity helper or any workload writes. */
	int lr = vm_layer_setup(VM_RW "/upper");
	if (lr < 0)
		halt("the writable layer's baseline: %s", strerror(-lr));

	loopback_up();
	int port = open_port();
	int lfd = listen_socket();
	start_helpers(port, lfd);

	if (chdir(VM_ROOT) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
	    chdir("/") < 0)
		halt("switch to the new root: %s", strerror(errno));
	if (sethostname(hostname, strlen(hostname)) < 0)
		halt("sethostname: %s", strerror(errno));
	prctl(PR_SET_NAME, "msb-agent", 0, 0, 0);
	return lfd;
}
