/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-vm-shim: starts one `vm` sandbox (a qemu microVM in its jail), holds
 * it, carries the host's connections to the guest agent, and takes it all
 * down. docs/internals/vm.md.
 *
 *   msb-vm-shim --state DIR --config FILE [--ready-fd N] [--name NAME]
 *               [--restore STATE --ram-fd N] [--log FILE]
 *
 * A separate program from msb-shim: what the two share (detaching, pid files,
 * cgroups, the purge) is in the ns boundary library both link; what a VM
 * needs (the jail, the VMM, the port multiplexer) is not what a namespace
 * sandbox needs, and neither shim carries the other's code.
 *
 * In DIR it writes shim.pid, the cgroups record (before creating them),
 * init.pid (the VMM's host pid and start time), jail/ (the jail's mount
 * point and run directory, where qemu's serial socket is), and listens on
 * agent.sock. Unlike on `ns`, the shim is in the data path: every host
 * connection to agent.sock is one stream of the mux (src/proto/mux_link.h)
 * over the guest's virtio-serial port. It reports "ok\n" on --ready-fd once
 * the guest's agent is listening (the guest sent READY), or "error:
 * REASON\n" with the last console lines. When the VMM exits, or on
 * SIGTERM/SIGINT/SIGHUP/SIGQUIT, it kills the VMM, removes the cgroups, the
 * sockets, jail/ and its own files (shim.pid last). If the shim is killed,
 * the VMM dies with it (parent-death signal) and the purge
 * (msb_ns__state_purge, then jail/) cleans the rest.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "backends/ns/boundary/boundary.h"
#include "backends/ns/boundary/shim.h"
#include "backends/vm/vmm.h"
#include "vm_egress.h"
#include "proto/mux_link.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/sha256.h"

#include "vm_shim.h"

static void report(struct shim *s, const char *line)
{
	msb_ns__shim_report(&s->ready_fd, line);
}

/* Keep the console's last CONSOLE_KEEP bytes (the guest writes as much as it
 * likes; the shim never holds more). */
static void drain_console(struct shim *s)
{
	char buf[4096];
	for (;;) {
		ssize_t n = read(s->console_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		size_t k = (size_t)n;
		if (k >= CONSOLE_KEEP) {
			memcpy(s->console, buf + k - CONSOLE_KEEP, CONSOLE_KEEP);
			s->console_len = CONSOLE_KEEP;
			continue;
		}
		if (s->console_len + k > CONSOLE_KEEP) {
			size_t drop = s->console_len + k - CONSOLE_KEEP;
			memmove(s->console, s->console + drop, s->console_len - drop);
			s->console_len -= drop;
		}
		memcpy(s->console + s->console_len, buf, k);
		s->console_len += k;
	}
}

/* The console's last line(s) as one printable line, for an error. */
static void console_tail(struct shim *s, char *out, size_t size)
{
	if (s->console_fd >= 0)
		drain_console(s);
	size_t len = s->console_len;
	while (len > 0 && (s->console[len - 1] == '\n' || s->console[len - 1] == '\r'))
		len--;
	size_t start = len > 240 ? len - 240 : 0;
	size_t o = 0;
	for (size_t i = start; i < len && o + 1 < size; i++) {
		unsigned char ch = (unsigned char)s->console[i];
		out[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : ' ';
	}
	out[o] = '\0';
}

static void stop_proxy(struct shim *s);

static int teardown(struct shim *s)
{
	int ret = 0;
	stop_proxy(s);
	msb_mux_link_free(s->link);
	s->link = NULL;
	if (s->vmm_started) {
		msb_vmm__stop(&s->vmm);
		s->vmm_started = false;
	}
	if (s->console_fd >= 0) {
		drain_console(s);
		close(s->console_fd);
		s->console_fd = -1;
	}
	if (s->console_len) {
		ssize_t w = write(STDERR_FILENO, s->console, s->console_len);
		(void)w;
	}
	if (s->ram_tmp) {
		unlink(s->ram_tmp);
		free(s->ram_tmp);
		s->ram_tmp = NULL;
	}
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		s->listen_fd = -1;
	}
	if (s->ctl_fd >= 0) {
		close(s->ctl_fd);
		s->ctl_fd = -1;
	}
	if (s->cg) {
		msb_error *e = NULL;
		if (msb_ns__cgroup_destroy(s->cg, &e) < 0) {
			msb_ns__shim_log("msb-vm-shim: %s", msb_error_message(e));
			ret = -1;
		}
		msb_error_free(e);
		msb_ns__cgroup_free(s->cg);
		s->cg = NULL;
	}
	if (s->dfd >= 0 && s->wrote_pid) {
		int r = msb__rm_rf_at(s->dfd, JAIL_DIR);
		if (r == 0)
			r = msb_ns__state_remove_files(s->dfd, false);
		if (r < 0) {
			msb_ns__shim_log("msb-vm-shim: remove state files: %s", strerror(-r));
			ret = -1;
		}
	}
	return ret;
}

static _Noreturn void vdie(struct shim *s, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static _Noreturn void vdie(struct shim *s, const char *fmt, va_list ap)
{
	char msg[900], line[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	snprintf(line, sizeof(line), "error: %s\n", msg);
	msb_ns__shim_log("msb-vm-shim: %s", msg);
	teardown(s);
	report(s, line);
	if (s->ctl_conn >= 0) {
		ssize_t w = send(s->ctl_conn, line, strlen(line), MSG_NOSIGNAL);
		(void)w;
	}
	_exit(1);
}

static _Noreturn void die(struct shim *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static _Noreturn void die(struct shim *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vdie(s, fmt, ap);
}

_Noreturn void shim_die(struct shim *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vdie(s, fmt, ap);
}

static void usage(void)
{
	fputs("usage: msb-vm-shim --state DIR --config FILE [--ready-fd N] [--name NAME]\n"
	      "                   [--restore STATE --ram-fd N] [--log FILE]\n",
	      stderr);
}

static int parse_args(struct shim *s, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			return -1;
		i++;
		if (strcmp(a, "--state") == 0) {
			s->state_dir = (char *)v;
		} else if (strcmp(a, "--config") == 0) {
			s->config_path = (char *)v;
		} else if (strcmp(a, "--name") == 0) {
			s->name = (char *)v;
		} else if (strcmp(a, "--restore") == 0) {
			s->restore_arg = v;
		} else if (strcmp(a, "--ram-fd") == 0) {
			char *end = NULL;
			long n = strtol(v, &end, 10);
			if (!*v || *end || n < 3 || n > 1024)
				return -1;
			s->ram_fd = (int)n;
		} else if (strcmp(a, "--log") == 0) {
			s->log_path = v;
		} else if (strcmp(a, "--ready-fd") == 0) {
			if ((s->ready_fd = msb_ns__shim_ready_fd(v)) < 0)
				return -1;
		} else {
			return -1;
		}
	}
	return s->state_dir && s->config_path ? 0 : -1;
}

static void resolve_paths(struct shim *s)
{
	char *cfg = realpath(s->config_path, NULL);
	if (!cfg)
		die(s, "config `%s`: %s", s->config_path, strerror(errno));
	s->config_path = cfg;
	char *dir = realpath(s->state_dir, NULL);
	if (!dir)
		die(s, "state dir `%s`: %s", s->state_dir, strerror(errno));
	s->state_dir = dir;
	const char *base = strrchr(dir, '/');
	s->name = strdup(s->name ? s->name : base && base[1] ? base + 1 : "vm");
	if (!s->name)
		die(s, "out of memory");
}

static char *dup_string(struct shim *s, json_t *o, const char *key, bool required)
{
	const char *v = NULL;
	bool present = false;
	msb_error *e = NULL;
	if (msb__json_get_string(o, key, "vm shim config", &v, &present, &e) < 0)
		die(s, "%s", msb_error_message(e));
	if (!present) {
		if (required)
			die(s, "vm shim config: `%s` missing", key);
		return NULL;
	}
	char *c = strdup(v);
	if (!c)
		die(s, "out of memory");
	return c;
}

static uint64_t get_u64(struct shim *s, json_t *o, const char *key, uint64_t def)
{
	uint64_t v = def;
	msb_error *e = NULL;
	if (msb__json_get_u64(o, key, "vm shim config", &v, NULL, &e) < 0)
		die(s, "%s", msb_error_message(e));
	return v;
}

static void load_config(struct shim *s)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = msb__read_file_at(AT_FDCWD, s->config_path, CONFIG_MAX, &text, &len);
	if (r < 0)
		die(s, "config `%s`: %s", s->config_path, strerror(-r));
	static const char *const keys[] = {"qemu",	    "kernel",	"initrd",
					   "disk",	    "cmdline",	"memory_mib",
					   "vcpus",	    "kvm",	"jail_uid",
					   "memory_max",    "pids_max", "cpu_quota_us",
					   "ready_timeout", "save_to",	"restore_from",
					   "save_ram_to",   NULL};
	json_t *o = NULL;
	msb_error *e = NULL;
	if (msb__json_load_object(text, len, "vm shim config", &o, &e) < 0 ||
	    msb__json_check_keys(o, keys, "vm shim config", &e) < 0)
		die(s, "%s", msb_error_message(e));
	s->qemu = dup_string(s, o, "qemu", true);
	s->kernel = dup_string(s, o, "kernel", true);
	s->initrd = dup_string(s, o, "initrd", true);
	s->disk = dup_string(s, o, "disk", true);
	s->cmdline = dup_string(s, o, "cmdline", true);
	s->save_to = dup_string(s, o, "save_to", false);
	s->save_ram_to = dup_string(s, o, "save_ram_to", false);
	s->restore_from = dup_string(s, o, "restore_from", false);
	if (s->restore_arg) {
		free(s->restore_from);
		s->restore_from = strdup(s->restore_arg);
		if (!s->restore_from)
			die(s, "out of memory");
	}
	if (s->save_to && s->restore_from)
		die(s, "vm shim config: `save_to` and `restore_from` together");
	if (!s->save_to != !s->save_ram_to)
		die(s, "vm shim config: `save_to` and `save_ram_to` go together");
	if (s->restore_from && s->ram_fd < 0)
		die(s, "a restore needs the template's RAM (--ram-fd)");
	s->memory_mib = get_u64(s, o, "memory_mib", 256);
	s->vcpus = get_u64(s, o, "vcpus", 1);
	s->jail_uid = get_u64(s, o, "jail_uid", 0);
	s->memory_max = get_u64(s, o, "memory_max", 0);
	s->pids_max = get_u64(s, o, "pids_max", 0);
	s->cpu_quota_us = get_u64(s, o, "cpu_quota_us", 0);
	double t = 120;
	if (msb__json_get_double(o, "ready_timeout", "vm shim config", &t, NULL, &e) < 0 ||
	    msb__json_get_bool(o, "kvm", "vm shim config", &s->kvm, NULL, &e) < 0)
		die(s, "%s", msb_error_message(e));
	s->ready_timeout = t;
	json_decref(o);
	if (s->memory_mib < 16 || s->memory_mib > (1u << 20) || s->vcpus < 1 || s->vcpus > 64)
		die(s, "vm shim config: memory_mib or vcpus out of range");
	if (s->jail_uid == 0 || s->jail_uid > 0xfffffffe)
		die(s, "vm shim config: `jail_uid` must be an unprivileged id");
	if (!(s->ready_timeout > 0 && s->ready_timeout <= 3600))
		die(s, "vm shim config: `ready_timeout` out of range");
}

/* egress.json beside shim.json: the allowlist proxy's configuration (a
 * template has none). */
static void load_egress(struct shim *s)
{
	char why[600];
	if (vm_egress_load(s->state_dir, &s->egress_json, &s->egress_len, why, sizeof(why)) < 0)
		die(s, "%s", why);
	if (s->egress_json && s->save_to)
		die(s, "egress: a template has no egress proxy");
}

static void detach(struct shim *s)
{
	char why[900];
	if (msb_ns__shim_detach(s->log_path, why, sizeof(why)) < 0)
		die(s, "%s", why);
}

static void purge_stale(struct shim *s)
{
	msb_error *e = NULL;
	if (msb_ns__state_purge(s->state_dir, false, STALE_TIMEOUT_MS, &e) < 0)
		die(s, "clean up after a dead shim: %s", msb_error_message(e));
	int r = msb__rm_rf_at(s->dfd, JAIL_DIR);
	if (r < 0)
		die(s, "clean up after a dead shim: remove jail/: %s", strerror(-r));
}

static void check_state_dir(struct shim *s)
{
	char why[900];
	if (msb_ns__shim_open_state(s->state_dir, &s->dfd, why, sizeof(why)) < 0)
		die(s, "%s", why);
	pid_t pid;
	if (msb_ns__shim_previous(s->dfd, &pid) > 0)
		die(s, "a shim (pid %d) already holds `%s`", (int)pid, s->state_dir);
	purge_stale(s);
}

static void write_pid(struct shim *s)
{
	int r = msb_ns__shim_write_pid(s->dfd);
	if (r < 0)
		die(s, "write %s: %s", MSB_NS_STATE_SHIM_PID, strerror(-r));
	s->wrote_pid = true;
}

/* jail/ (root only), jail/root (the jail's mount point), jail/run (the
 * jail's uid: qemu makes its socket there). */
static void make_jail_dirs(struct shim *s)
{
	if (mkdirat(s->dfd, JAIL_DIR, 0711) < 0)
		die(s, "create jail/: %s", strerror(errno));
	_cleanup_close_ int jfd =
		openat(s->dfd, JAIL_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (jfd < 0 || fchmod(jfd, 0711) < 0 || mkdirat(jfd, "root", 0700) < 0 ||
	    mkdirat(jfd, "run", 0700) < 0)
		die(s, "create jail/: %s", strerror(errno));
	_cleanup_close_ int rfd =
		openat(jfd, "run", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0 || fchown(rfd, (uid_t)s->jail_uid, (gid_t)s->jail_uid) < 0)
		die(s, "jail/run: %s", strerror(errno));
}

static int listen_at(struct shim *s, const char *name, int backlog)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", s->state_dir, name);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", s->dfd, name);
	if (unlinkat(s->dfd, name, 0) < 0 && errno != ENOENT)
		die(s, "remove a stale %s: %s", name, strerror(errno));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die(s, "socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, backlog) < 0) {
		close(fd);
		die(s, "listen on %s: %s", name, strerror(errno));
	}
	return fd;
}

static void make_cgroup(struct shim *s)
{
	msb_ns_config cfg;
	if (msb_ns__config_init(&cfg) < 0)
		die(s, "out of memory");
	cfg.memory_max = s->memory_max;
	cfg.pids_max = s->pids_max;
	cfg.cpu_quota_us = s->cpu_quota_us;
	uint8_t d[32];
	msb_sha256 h;
	msb__sha256_init(&h);
	msb__sha256_update(&h, s->state_dir, strlen(s->state_dir));
	msb__sha256_final(&h, d);
	_cleanup_free_ char *leaf =
		msb__asprintf("%s-%02x%02x%02x%02x", s->name, d[0], d[1], d[2], d[3]);
	msb_error *e = NULL;
	int r = leaf ? msb_ns__cgroup_plan(&cfg, leaf, &s->cg, &e) : -ENOMEM;
	msb_ns__config_clear(&cfg);
	if (r < 0)
		die(s, "%s", e ? msb_error_message(e) : "out of memory");
	if (!s->cg)
		return;
	_cleanup_free_ char *rec = msb_ns__cgroup_record(s->cg);
	if (!rec)
		die(s, "out of memory");
	r = msb__write_file_atomic_at(s->dfd, MSB_NS_STATE_CGROUPS, rec, strlen(rec), 0644);
	if (r < 0)
		die(s, "write %s: %s", MSB_NS_STATE_CGROUPS, strerror(-r));
}

static void start_vmm(struct shim *s)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		die(s, "pipe: %s", strerror(errno));
	_cleanup_free_ char *jail = msb__asprintf("%s/%s", s->state_dir, JAIL_DIR);
	if (!jail)
		die(s, "out of memory");
	msb_vmm_config c = {
		.binary = s->qemu,
		.kernel = s->kernel,
		.initrd = s->initrd,
		.disk = s->disk,
		.jail_dir = jail,
		.cmdline = s->cmdline,
		.memory_mib = s->memory_mib,
		.vcpus = (uint32_t)s->vcpus,
		.kvm = s->kvm,
		.uid = (uid_t)s->jail_uid,
		.gid = (gid_t)s->jail_uid,
		.console_fd = pfd[1],
		.cgroup = s->cg,
		.qmp = s->save_to || s->restore_from,
	};
	if (s->save_ram_to && s->ram_fd < 0)
		shim_make_ram_file(s);
	if (s->ram_fd >= 0) {
		c.ram = true;
		c.ram_fd = s->ram_fd;
		c.ram_shared = s->save_ram_to != NULL;
	}
	_cleanup_close_ int in = -1;
	if (s->restore_from) {
		in = open(s->restore_from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (in < 0)
			die(s, "saved state `%s`: %s", s->restore_from, strerror(errno));
		c.incoming = true;
		c.incoming_fd = in;
		/* The capability first (QMP), then the stream (restore_incoming). */
		c.incoming_defer = true;
		s->incoming_fd = in;
	}
	msb_error *e = NULL;
	int r = msb_vmm__start(&msb_vmm__qemu, &c, &s->vmm, &e);
	close(pfd[1]);
	s->console_fd = pfd[0];
	fcntl(s->console_fd, F_SETFL, O_NONBLOCK);
	if (r < 0)
		die(s, "%s", msb_error_message(e));
	s->vmm_started = true;
	r = msb_ns__write_pid_file(s->dfd, MSB_NS_STATE_INIT_PID, s->vmm.pid, s->vmm.start_time);
	if (r < 0)
		die(s, "write %s: %s", MSB_NS_STATE_INIT_PID, strerror(-r));
	s->t_exec = msb__now_ns();
}

static bool vmm_exited(struct shim *s)
{
	struct pollfd p = {.fd = s->vmm.pidfd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

static _Noreturn void die_vm(struct shim *s, const char *what)
{
	char tail[256];
	/* Exited, or still running past the deadline: either way stopped and
	 * reaped here (a bare wait would hang on a VMM that still runs). */
	msb_vmm__stop(&s->vmm);
	console_tail(s, tail, sizeof(tail));
	die(s, "%s (status 0x%x); console: %s", what, (unsigned)s->vmm.status,
	    tail[0] ? tail : "(nothing)");
}

/* The guest's instance id: 24 hex digits, new for every VM (a reset too). */
static void new_instance_id(struct shim *s)
{
	uint8_t idb[12];
	if (getrandom(idb, sizeof(idb), 0) != (ssize_t)sizeof(idb))
		die(s, "getrandom: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(idb); i++)
		snprintf(s->instance_id + 2 * i, 3, "%02x", idb[i]);
}

/* A new host session on a fresh link (mux.h): a random session number,
 * fresh entropy, the host name and the instance id, which the guest applies
 * before its READY. */
static void begin_session(struct shim *s)
{
	uint8_t p[MSB_MUX_SESSION_LEN];
	memset(p, 0, sizeof(p));
	memcpy(p, MSB_MUX_SESSION_MAGIC, MSB_MUX_SESSION_MAGIC_LEN);
	uint8_t *seed = p + MSB_MUX_SESSION_MAGIC_LEN;
	uint8_t *host = seed + MSB_MUX_SESSION_SEED;
	uint8_t *id = host + MSB_MUX_SESSION_NAME;
	uint32_t session = 0;
	while (session == 0)
		if (getrandom(&session, sizeof(session), 0) != (ssize_t)sizeof(session))
			die(s, "getrandom: %s", strerror(errno));
	if (getrandom(seed, MSB_MUX_SESSION_SEED, 0) != (ssize_t)MSB_MUX_SESSION_SEED)
		die(s, "getrandom: %s", strerror(errno));
	size_t hlen = strlen(s->name);
	memcpy(host, s->name, hlen < MSB_MUX_SESSION_NAME ? hlen : MSB_MUX_SESSION_NAME - 1);
	memcpy(id, s->instance_id, strlen(s->instance_id));
	if (msb_mux_link_send_session(s->link, session, p) < 0)
		die(s, "out of memory");
	explicit_bzero(p, sizeof(p));
}

/* qemu makes the socket early in its start; connect as soon as it is there. */
static void connect_serial(struct shim *s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/run/%s", s->state_dir, JAIL_DIR,
			 MSB_VMM_SERIAL_SOCK);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s/run/%s", s->dfd,
			 JAIL_DIR, MSB_VMM_SERIAL_SOCK);
	int64_t until = msb__now_ns() + SERIAL_CONNECT_NS;
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die(s, "socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			/* The directory is the VMM's to write: whatever answers
			 * must be the VMM itself, never a socket it linked in. */
			struct ucred cr;
			socklen_t crlen = sizeof(cr);
			if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 ||
			    cr.pid != s->vmm.pid || cr.uid != (uid_t)s->jail_uid)
				die(s, "the serial socket is not the VMM's (peer pid %d uid %u)",
				    (int)cr.pid, (unsigned)cr.uid);
			s->link = msb_mux_link_new(fd, true, NULL, NULL);
			if (!s->link)
				die(s, "out of memory");
			begin_session(s);
			s->t_serial = msb__now_ns();
			return;
		}
		int e = errno;
		close(fd);
		if (vmm_exited(s))
			die_vm(s, "the VMM exited before its serial socket was there");
		if (msb__now_ns() > until)
			die(s, "the VMM's serial socket did not appear: %s", strerror(e));
		drain_console(s);
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

/* ---- the egress allowlist proxy (vm_egress.c) ------------------------------------ */

static void stop_proxy(struct shim *s)
{
	vm_egress_stop(&s->egress);
}

static void serve(struct shim *s, int sfd, bool until_ready);

/* With an allowlist: start the proxy and serve (its connection to the agent
 * among the rest) until it reports that the agent listens, so that no exec
 * starts before its proxy variables are right. A failure takes the sandbox
 * down. */
static void start_proxy(struct shim *s, int sfd)
{
	if (!s->egress_json)
		return;
	char why[600];
	int64_t t0 = msb__now_ns();
	if (vm_egress_start(&s->egress, s->dfd, s->egress_json, s->egress_len, why, sizeof(why)) <
	    0)
		die(s, "%s", why);
	serve(s, sfd, false);
	if (s->egress.report >= 0)
		die(s, "egress: the VM or the shim stopped before the proxy was ready");
	msb_ns__shim_log("msb-vm-shim: `%s`: egress proxy ready (pid %d) in %.3f s", s->name,
			 (int)s->egress.pid, (double)(msb__now_ns() - t0) / 1e9);
}

enum { P_VMM, P_SIG, P_CONSOLE, P_LISTEN, P_CTL, P_PROXY, P_LINK };

static void serve_control(struct shim *s, int sfd);

/* Serve until the VMM exits or a signal comes. `until_ready`: return once the
 * guest said READY (or die at the deadline). While the egress proxy is
 * starting (vm_egress.c), return once it reported instead. */
static void serve(struct shim *s, int sfd, bool until_ready)
{
	int64_t deadline = msb__now_ns() + (int64_t)(s->ready_timeout * 1e9);
	struct pollfd fds[P_LINK + 1 + MSB_MUX_MAX_STREAMS];
	for (;;) {
		if (until_ready && msb_mux_link_ready(s->link))
			return;
		fds[P_VMM] = (struct pollfd){.fd = s->vmm.pidfd, .events = POLLIN};
		fds[P_SIG] = (struct pollfd){.fd = sfd, .events = POLLIN};
		fds[P_CONSOLE] = (struct pollfd){.fd = s->console_fd, .events = POLLIN};
		bool room = msb_mux_link_streams(s->link) < MSB_MUX_MAX_STREAMS;
		fds[P_LISTEN] = (struct pollfd){.fd = !until_ready && room ? s->listen_fd : -1,
						.events = POLLIN};
		/* While the proxy starts: its report; then: its exit. */
		bool starting = s->egress.report >= 0;
		fds[P_CTL] = (struct pollfd){.fd = until_ready || starting ? -1 : s->ctl_fd,
					     .events = POLLIN};
		fds[P_PROXY] = (struct pollfd){.fd = until_ready ? -1
						     : starting	 ? s->egress.report
								 : s->egress.pidfd,
					       .events = POLLIN};
		size_t n = msb_mux_link_pollfds(s->link, fds + P_LINK, 1 + MSB_MUX_MAX_STREAMS);
		int timeout = -1;
		if (until_ready) {
			int64_t left = (deadline - msb__now_ns()) / 1000000;
			if (left <= 0)
				die_vm(s, "the guest agent was not ready in time");
			timeout = left > INT_MAX ? INT_MAX : (int)left;
		}
		int pr = poll(fds, P_LINK + n, timeout);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			die(s, "poll: %s", strerror(errno));
		}
		if (fds[P_VMM].revents) {
			if (until_ready)
				die_vm(s, "the VM stopped before its agent was ready");
			msb_vmm__reap(&s->vmm);
			msb_ns__shim_log("msb-vm-shim: the VMM exited (status 0x%x)",
					 (unsigned)s->vmm.status);
			return;
		}
		if (fds[P_SIG].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (until_ready)
					die(s, "signal %u during start", (unsigned)si.ssi_signo);
				msb_ns__shim_log("msb-vm-shim: signal %u: taking the VM down",
						 (unsigned)si.ssi_signo);
				return;
			}
		}
		if (fds[P_CONSOLE].revents)
			drain_console(s);
		if (fds[P_PROXY].revents) {
			char why[600];
			if (s->egress.report >= 0) {
				if (vm_egress_report(&s->egress, why, sizeof(why)) < 0)
					die(s, "%s", why);
				return;
			}
			/* Its connection to the agent ended: egress is closed
			 * until the shim starts it again. */
			msb_ns__shim_log("msb-vm-shim: the egress proxy exited");
			stop_proxy(s);
		}
		if (fds[P_CTL].revents) {
			serve_control(s, sfd);
			continue; /* a reset replaced the link and the VMM */
		}
		if (fds[P_LISTEN].revents) {
			int c = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0 && msb_mux_link_add(s->link, c) < 0)
				msb_ns__shim_log("msb-vm-shim: a connection refused: too many");
		}
		int r = msb_mux_link_handle(s->link, fds + P_LINK, n);
		if (r < 0) {
			if (until_ready)
				die_vm(s, "the guest's channel failed during start");
			msb_ns__shim_log("msb-vm-shim: the guest channel failed: %s",
					 msb_mux_link_why(s->link));
			return;
		}
	}
}

/* The VMM started, the saved state given to it (a restore), the first
 * session begun, served until the guest's READY; the time each step took
 * logged (docs/internals/vm.md, "Where a restore's time goes"). */
static void boot_vm(struct shim *s, int sfd)
{
	s->t_setup = msb__now_ns();
	s->t_qmp = 0;
	start_vmm(s);
	if (s->restore_from)
		shim_restore_incoming(s);
	connect_serial(s);
	serve(s, sfd, true);
	s->t_ready = msb__now_ns();
	int64_t qmp = s->t_qmp ? s->t_qmp : s->t_exec;
	msb_ns__shim_log("msb-vm-shim: `%s` ready (%s), VMM pid %d: setup %.1f ms, jail and "
			 "exec %.1f ms, monitor %.1f ms, serial %.1f ms, READY %.1f ms",
			 s->name, s->restore_from ? "restored" : "booted", (int)s->vmm.pid,
			 (double)(s->t_setup - s->t0) / 1e6, (double)(s->t_exec - s->t_setup) / 1e6,
			 (double)(qmp - s->t_exec) / 1e6, (double)(s->t_serial - qmp) / 1e6,
			 (double)(s->t_ready - s->t_serial) / 1e6);
}

/* Reset: the state of creation again - the VMM stopped, its jail and
 * cgroup made anew, a fresh VM booted from the same configuration. Every
 * host connection ends with the old VM. A failure takes the sandbox down. */
static void reset_vm(struct shim *s, int sfd)
{
	msb_ns__shim_log("msb-vm-shim: reset of `%s`", s->name);
	stop_proxy(s);
	msb_mux_link_free(s->link);
	s->link = NULL;
	msb_vmm__stop(&s->vmm);
	s->vmm_started = false;
	if (s->console_fd >= 0) {
		close(s->console_fd);
		s->console_fd = -1;
	}
	s->console_len = 0;
	unlinkat(s->dfd, MSB_NS_STATE_INIT_PID, 0);
	if (s->cg) {
		msb_error *e = NULL;
		if (msb_ns__cgroup_destroy(s->cg, &e) < 0)
			die(s, "reset: %s", msb_error_message(e));
		msb_ns__cgroup_free(s->cg);
		s->cg = NULL;
	}
	int r = msb__rm_rf_at(s->dfd, JAIL_DIR);
	if (r < 0)
		die(s, "reset: remove jail/: %s", strerror(-r));
	make_jail_dirs(s);
	make_cgroup(s);
	/* A new VM: a new identity in the guest (a restore gets it from its
	 * first session, as any restored VM does). A template removed since
	 * (stale, or swept): the VM boots, on RAM of its own. */
	new_instance_id(s);
	if (s->restore_from && access(s->restore_from, R_OK) != 0) {
		free(s->restore_from);
		s->restore_from = NULL;
		close(s->ram_fd);
		s->ram_fd = -1;
	}
	boot_vm(s, sfd);
	start_proxy(s, sfd);
}

/* A new host session with the same VM: every host connection ends, the
 * serial socket is connected anew and the guest, on the new SESSION, drops
 * the old session and answers READY. What a restored VM's shim does on its
 * first connection; a failure takes the sandbox down. */
static void reconnect_vm(struct shim *s, int sfd)
{
	int64_t t0 = msb__now_ns();
	stop_proxy(s);
	msb_mux_link_free(s->link);
	s->link = NULL;
	connect_serial(s);
	serve(s, sfd, true);
	msb_ns__shim_log("msb-vm-shim: `%s`: a new session, ready in %.3f s", s->name,
			 (double)(msb__now_ns() - t0) / 1e9);
	start_proxy(s, sfd);
}

/* One request line on shim.sock (the protocol of the ns shim's control
 * socket; `reset` and `reconnect` are the ones a VM serves). The socket is
 * the owner's only. */
static void serve_control(struct shim *s, int sfd)
{
	int conn = accept4(s->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		return;
	char line[MSB_NS_CONTROL_LINE_MAX];
	size_t len = 0;
	int64_t deadline = msb__now_ns() + 2000LL * 1000000;
	while (len < sizeof(line) - 1 && !memchr(line, '\n', len)) {
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		struct pollfd p = {.fd = conn, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t n = read(conn, line + len, sizeof(line) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	line[len] = '\0';
	char *nl = strchr(line, '\n');
	const char *answer = "error: unknown request\n";
	if (nl) {
		*nl = '\0';
		if (strcmp(line, MSB_NS_CONTROL_RESET) == 0) {
			s->ctl_conn = conn;
			reset_vm(s, sfd);
			s->ctl_conn = -1;
			answer = "ok\n";
		} else if (strcmp(line, VM_CONTROL_RECONNECT) == 0) {
			s->ctl_conn = conn;
			reconnect_vm(s, sfd);
			s->ctl_conn = -1;
			answer = "ok\n";
		}
	}
	ssize_t w = send(conn, answer, strlen(answer), MSG_NOSIGNAL);
	(void)w;
	close(conn);
}

/* For vm_shim_snapshot.c (vm_shim.h). */
_Noreturn void shim_die_vm(struct shim *s, const char *what)
{
	die_vm(s, what);
}

bool shim_vmm_exited(struct shim *s)
{
	return vmm_exited(s);
}

void shim_drain_console(struct shim *s)
{
	drain_console(s);
}

int main(int argc, char **argv)
{
	static struct shim s = {.ready_fd = -1,
				.dfd = -1,
				.listen_fd = -1,
				.console_fd = -1,
				.ctl_fd = -1,
				.ctl_conn = -1,
				.ram_fd = -1,
				.egress = VM_EGRESS_INIT};
	s.t0 = msb__now_ns();
	if (parse_args(&s, argc, argv) < 0) {
		usage();
		if (s.ready_fd >= 0)
			report(&s, "error: msb-vm-shim: bad arguments\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int sfd = msb_ns__shim_signalfd();
	if (sfd < 0)
		die(&s, "signalfd: %s", strerror(-sfd));
	umask(077);
	if (geteuid() != 0)
		die(&s, "the vm backend's jail needs root (an ordinary user's VM is not "
			"served yet)");
	resolve_paths(&s);
	load_config(&s);
	load_egress(&s);
	new_instance_id(&s);
	if (s.ram_fd >= 0)
		shim_check_ram(&s);
	detach(&s);
	check_state_dir(&s);
	write_pid(&s);
	make_jail_dirs(&s);
	s.listen_fd = listen_at(&s, MSB_NS_STATE_SOCKET, 128);
	s.ctl_fd = listen_at(&s, MSB_NS_STATE_CONTROL, 16);
	make_cgroup(&s);
	boot_vm(&s, sfd);
	if (s.save_to) {
		shim_save_template(&s);
		report(&s, "ok\n");
		close(sfd);
		int tr = teardown(&s);
		close(s.dfd);
		return tr == 0 ? 0 : 1;
	}
	start_proxy(&s, sfd);
	report(&s, "ok\n");
	serve(&s, sfd, false);
	close(sfd);
	int r = teardown(&s);
	close(s.dfd);
	return r == 0 ? 0 : 1;
}
