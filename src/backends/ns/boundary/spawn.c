/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Creating the sandbox: clone3 into new namespaces, the parent/child
 * hand-shake, and the child's path to exec'ing the agent as PID 1.
 *
 *   parent                                 child (PID 1 of the new pid ns)
 *   create the cgroups, set the limits;
 *   v1: open their `tasks` files
 *   clone3(NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWCGROUP|PIDFD
 *          [|INTO_CGROUP: v2])
 *   write uid_map, gid_map     ──'M'──▶    v1: write "0" to each `tasks` (moves
 *                              ──'G'──▶    itself), re-root the cgroup ns;
 *                                          take uid/gid 0, make / private,
 *                                          lo up, hostname, build the rootfs,
 *   (keeps the writable layer) ◀─'L'──     + SCM_RIGHTS: the writable layer, /dev/shm
 *                                          pivot_root, rlimits,
 *   read the error pipe until  ◀─EOF──     no_new_privs, fds, execveat(agent)
 *   EOF (CLOEXEC: exec done)
 *
 * The child writes one line to the error pipe and exits when a step fails;
 * the parent turns it into the error it returns.
 */
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <grp.h>

#include "backends/ns/boundary/boundary_int.h"
#include "util/fs.h"
#include "util/syscalls.h"

#define SYNC_MAPPED 'M'
#define SYNC_GO 'G'
#define SYNC_LAYER 'L'
#define SPAWN_TIMEOUT_MS 30000

static const uint64_t ns_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
				 CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;

struct child_ctx {
	const msb_ns_config *cfg;
	msb_ns_rootfs rf;
	int sync_fd;  /* read end: SYNC_MAPPED, then SYNC_GO */
	int err_fd;   /* write end of the error pipe */
	int agent_fd; /* O_RDONLY executable */
	int listen_fd;
	int null_fd;
	int stdio_fd;
	bool single_id;
	bool unshare_cgroup; /* attached after the clone (v1): re-root the cgroup ns */
	/* v1: the sandbox's `tasks` files, opened by the parent: the child
	 * writes "0" to each and so moves itself in (msb_ns__cgroup_tasks_fds) */
	const int *tasks_fds;
	size_t n_tasks;
	char *const *argv;
	char *const *envp;
	char *const *envp_etc; /* envp and MSB_AGENT_ETC_FD=4 */
};

bool msb_ns__privileged(void)
{
	return geteuid() == 0;
}

/* ---- child ------------------------------------------------------------------ */

static _Noreturn void child_fail(struct child_ctx *c, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static _Noreturn void child_fail(struct child_ctx *c, int r, const char *fmt, ...)
{
	char what[384], msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	msb_ns__fmt_err(msg, sizeof(msg), r, "%s", what);
	ssize_t w = write(c->err_fd, msg, strlen(msg));
	(void)w;
	_exit(127);
}

static _Noreturn void child_fail_msg(struct child_ctx *c, const char *msg)
{
	ssize_t w = write(c->err_fd, msg, strlen(msg));
	(void)w;
	_exit(127);
}

static void child_wait_for(struct child_ctx *c, char want)
{
	char b = 0;
	ssize_t n;
	do
		n = read(c->sync_fd, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1 || b != want)
		_exit(126); /* the parent gave up or died: nobody reads an error */
}

static int loopback_up(void)
{
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return -errno;
	return 0;
}

/* Mark every fd from `first` up close-on-exec. */
static int cloexec_from(int first)
{
	int r = msb__sys_close_range((unsigned)first, ~0U, CLOSE_RANGE_CLOEXEC);
	if (r != -ENOSYS && r != -EINVAL)
		return r;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -errno;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		if (*end || fd < first || fd == dirfd(d))
			continue;
		int fl = fcntl((int)fd, F_GETFD);
		if (fl >= 0)
			fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
	}
	closedir(d);
	return 0;
}

static int send_layer(int sock, int layer_fd, int shm_fd)
{
	int fds[2] = {layer_fd, shm_fd};
	char tag = SYNC_LAYER;
	struct iovec iov = {.iov_base = &tag, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(fds))];
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : n < 0 ? -errno : -EIO;
}

static _Noreturn void child_main(struct child_ctx *c)
{
	/* Undo what the shim set up for itself: the agent starts clean. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	umask(022);

	child_wait_for(c, SYNC_MAPPED);
	/* v1: into the sandbox's cgroups before anything is charged, through
	 * the files the parent opened (its credentials are the ones checked);
	 * then make them the root of this cgroup namespace. */
	for (size_t i = 0; i < c->n_tasks; i++) {
		ssize_t w;
		do
			w = write(c->tasks_fds[i], "0", 1);
		while (w < 0 && errno == EINTR);
		if (w != 1)
			child_fail(c, w < 0 ? -errno : -EIO, "join the sandbox's cgroup");
		close(c->tasks_fds[i]);
	}
	if (c->unshare_cgroup && unshare(CLONE_NEWCGROUP) < 0)
		child_fail(c, -errno, "re-root the cgroup namespace");
	if (msb_ns__rootfs_open(&c->rf) < 0)
		child_fail_msg(c, c->rf.err);
	/* Become the namespace's root (kuid uid_base, or the caller). */
	if (setresgid(0, 0, 0) < 0)
		child_fail(c, -errno, "setresgid 0");
	if (!c->single_id && setgroups(0, NULL) < 0)
		child_fail(c, -errno, "setgroups");
	if (setresuid(0, 0, 0) < 0)
		child_fail(c, -errno, "setresuid 0");
	/* Set after the id change (which clears it); then make sure the parent
	 * did not die in between. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(c, -errno, "set the parent-death signal");
	char peek;
	if (recv(c->sync_fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
		_exit(126);

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(c, -errno, "make / private");
	int r = loopback_up();
	if (r < 0)
		child_fail(c, r, "bring up lo");
	if (sethostname(c->cfg->hostname, strlen(c->cfg->hostname)) < 0)
		child_fail(c, -errno, "set the host name");
	if (msb_ns__rootfs_build(&c->rf) < 0)
		child_fail_msg(c, c->rf.err);
	/* The parent keeps the writable storage open: the host reads what
	 * changed from there, never from inside. */
	r = send_layer(c->sync_fd, c->rf.layer_fd, c->rf.shm_fd);
	if (r < 0)
		child_fail(c, r, "hand over the writable layer");

	child_wait_for(c, SYNC_GO);
	for (size_t i = 0; i < c->cfg->n_rlimits; i++) {
		const msb_ns_rlimit *rl = &c->cfg->rlimits[i];
		struct rlimit cur;
		if (getrlimit(rl->resource, &cur) < 0)
			child_fail(c, -errno, "getrlimit %d", rl->resource);
		rlim_t v = (rlim_t)rl->value;
		if (cur.rlim_max != RLIM_INFINITY && v > cur.rlim_max)
			v = cur.rlim_max; /* only ever lowered */
		struct rlimit nl = {v, v};
		if (setrlimit(rl->resource, &nl) < 0)
			child_fail(c, -errno, "setrlimit %d", rl->resource);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(c, -errno, "set no_new_privs");

	/* fds: 0 /dev/null, 1-2 the log (or /dev/null), 3 the listening socket,
	 * 4 the synthesized /etc (`host` image; MSB_AGENT_ETC_FD). */
	int efd = fcntl(c->err_fd, F_DUPFD_CLOEXEC, 10);
	int afd = fcntl(c->agent_fd, F_DUPFD_CLOEXEC, 10);
	int lfd = fcntl(c->listen_fd, F_DUPFD_CLOEXEC, 10);
	int nfd = fcntl(c->null_fd, F_DUPFD_CLOEXEC, 10);
	int ofd = fcntl(c->stdio_fd >= 0 ? c->stdio_fd : c->null_fd, F_DUPFD_CLOEXEC, 10);
	int tfd = c->rf.etc_fd >= 0 ? fcntl(c->rf.etc_fd, F_DUPFD_CLOEXEC, 10) : -1;
	if (efd < 0 || afd < 0 || lfd < 0 || nfd < 0 || ofd < 0 || (c->rf.etc_fd >= 0 && tfd < 0))
		child_fail(c, -errno, "duplicate fds");
	c->err_fd = efd;
	if (dup2(nfd, 0) < 0 || dup2(ofd, 1) < 0 || dup2(ofd, 2) < 0 || dup2(lfd, 3) < 0)
		child_fail(c, -errno, "set up fds 0-3");
	if (tfd >= 0 && dup2(tfd, 4) < 0)
		child_fail(c, -errno, "set up fd 4");
	if ((r = cloexec_from(tfd >= 0 ? 5 : 4)) < 0)
		child_fail(c, r, "close inherited fds");
	char *const *envp = tfd >= 0 ? c->envp_etc : c->envp;
	r = msb__sys_execveat(afd, "", c->argv, envp, AT_EMPTY_PATH);
	child_fail(c, r, "exec the agent");
}

/* ---- parent ----------------------------------------------------------------- */

static int write_proc_file(pid_t pid, const char *name, const char *content)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	return msb_ns__write_string(AT_FDCWD, path, content);
}

static int write_maps(pid_t pid, const msb_ns_config *cfg, bool single_id, msb_error **err)
{
	char map[64];
	int r;
	if (single_id) {
		if ((r = write_proc_file(pid, "setgroups", "deny")) < 0)
			return msb__error_errno(err, r, "ns spawn: write setgroups");
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)geteuid());
		if ((r = write_proc_file(pid, "uid_map", map)) < 0)
			return msb__error_errno(err, r, "ns spawn: write uid_map");
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)getegid());
		if ((r = write_proc_file(pid, "gid_map", map)) < 0)
			return msb__error_errno(err, r, "ns spawn: write gid_map");
		return 0;
	}
	snprintf(map, sizeof(map), "0 %u %u\n", cfg->uid_base, MSB_NS_ID_COUNT);
	if ((r = write_proc_file(pid, "uid_map", map)) < 0)
		return msb__error_errno(err, r, "ns spawn: write uid_map `%s`", "0 base 65536");
	snprintf(map, sizeof(map), "0 %u %u\n", cfg->gid_base, MSB_NS_ID_COUNT);
	if ((r = write_proc_file(pid, "gid_map", map)) < 0)
		return msb__error_errno(err, r, "ns spawn: write gid_map");
	return 0;
}

static int thread_count(void)
{
	_cleanup_free_ char *stat = NULL;
	int r = msb__read_file_at(AT_FDCWD, "/proc/self/stat", 4096, &stat, NULL);
	if (r < 0)
		return r;
	const char *p = strrchr(stat, ')');
	if (!p)
		return -EINVAL;
	/* Fields after the command: 3 state ... 20 num_threads. */
	int field = 2;
	for (p++; *p && field < 20; p++)
		if (*p == ' ')
			field++;
	return (int)strtol(p, NULL, 10);
}

static int send_sync(int fd, char b)
{
	ssize_t n;
	do
		n = send(fd, &b, 1, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -EPIPE;
}

/* The child's writable layer and /dev/shm, queued on the sync socket. */
static int recv_layer(int sock, int *layer_fd, int *shm_fd)
{
	char tag = 0;
	struct iovec iov = {.iov_base = &tag, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	ssize_t n;
	do
		n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	int fds[2] = {-1, -1};
	size_t got = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (got < 2)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	if (n != 1 || tag != SYNC_LAYER || got != 2 || (msg.msg_flags & MSG_CTRUNC)) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		return -EPROTO;
	}
	*layer_fd = fds[0];
	*shm_fd = fds[1];
	return 0;
}

/* Everything opened for the child, closed by the parent after the clone. */
struct spawn_fds {
	int agent, image, stage, null, sync[2], errp[2];
	struct stat image_st, stage_st, work_st;
	dev_t layer_dev[MSB_NS_MAX_LAYERS];
	ino_t layer_ino[MSB_NS_MAX_LAYERS];
	int layer_fds[MSB_NS_MAX_LAYERS]; /* filled by the child */
	/* v1: the sandbox's `tasks` files (msb_ns__cgroup_tasks_fds), for the
	 * child; the parent closes its copies once it is cloned */
	int tasks[3];
	size_t n_tasks;
};

static void close_tasks(struct spawn_fds *f)
{
	for (size_t i = 0; i < f->n_tasks; i++)
		close(f->tasks[i]);
	f->n_tasks = 0;
}

static void close_fds(struct spawn_fds *f)
{
	close_tasks(f);
	int *all[] = {&f->agent,   &f->image,	&f->stage,   &f->null,
		      &f->sync[0], &f->sync[1], &f->errp[0], &f->errp[1]};
	for (size_t i = 0; i < MSB_ARRAY_SIZE(all); i++)
		if (*all[i] >= 0) {
			close(*all[i]);
			*all[i] = -1;
		}
}

static int open_inputs(const msb_ns_config *cfg, const msb_ns_spawn_opts *opts, struct spawn_fds *f,
		       msb_error **err)
{
	struct stat st, root;
	f->agent = open(opts->agent_path, O_RDONLY | O_CLOEXEC);
	if (f->agent < 0)
		return msb__error_errno(err, -errno, "ns spawn: open the agent `%s`",
					opts->agent_path);
	if (fstat(f->agent, &st) < 0 || !S_ISREG(st.st_mode))
		return msb_error_set(err, MSB_E_VALUE, "ns spawn: agent `%s` is not a regular file",
				     opts->agent_path);
	if (cfg->image == MSB_NS_IMAGE_DIR) {
		f->image = open(cfg->image_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (f->image < 0)
			return msb__error_errno(err, -errno, "ns spawn: image `dir:%s`",
						cfg->image_path);
		if (fstat(f->image, &f->image_st) < 0 || stat("/", &root) < 0)
			return msb__error_errno(err, -errno, "ns spawn: stat the image");
		if (f->image_st.st_dev == root.st_dev && f->image_st.st_ino == root.st_ino)
			return msb_error_set(err, MSB_E_VALUE,
					     "ns spawn: image `dir:%s` is the host's root; use the "
					     "`host` image",
					     cfg->image_path);
	}
	for (size_t i = 0; cfg->image == MSB_NS_IMAGE_OCI && i < cfg->n_layers; i++) {
		_cleanup_close_ int fd = open(cfg->layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0)
			return msb__error_errno(err, -errno, "ns spawn: image layer `%s`",
						cfg->layers[i]);
		f->layer_dev[i] = st.st_dev;
		f->layer_ino[i] = st.st_ino;
	}
	f->stage = open(opts->state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f->stage < 0 || fstat(f->stage, &f->stage_st) < 0)
		return msb__error_errno(err, -errno, "ns spawn: open the state dir `%s`",
					opts->state_dir);
	if (fstat(opts->work_fd, &f->work_st) < 0 || !S_ISDIR(f->work_st.st_mode))
		return msb_error_set(err, MSB_E_VALUE, "ns spawn: the work dir is not a directory");
	f->null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (f->null < 0)
		return msb__error_errno(err, -errno, "ns spawn: open /dev/null");
	/* A socket pair for the parent's side so that a dead child means EPIPE,
	 * never SIGPIPE in the caller. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f->sync) < 0 ||
	    pipe2(f->errp, O_CLOEXEC) < 0)
		return msb__error_errno(err, -errno, "ns spawn: pipe");
	return 0;
}

/* What the child needs: the inputs opened for it, its ids, its argv. */
/* The agent's environment; with the `host` image's synthesized /etc, its fd. */
#define AGENT_ENV                                                                                  \
	(char *)"MSB_AGENT_LISTEN_FD=3",                                                           \
		(char *)"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",       \
		(char *)"HOME=/root"
static char *const agent_envp[] = {AGENT_ENV, NULL};
static char *const agent_envp_etc[] = {AGENT_ENV, (char *)"MSB_AGENT_ETC_FD=4", NULL};

static void child_ctx_init(struct child_ctx *c, const msb_ns_config *cfg,
			   const msb_ns_spawn_opts *opts, struct spawn_fds *f, bool single_id,
			   bool v1, char *const *argv)
{
	*c = (struct child_ctx){
		.cfg = cfg,
		.rf = {.cfg = cfg,
		       .stage_path = opts->state_dir,
		       .work_path = opts->work_path,
		       .stage_dev = f->stage_st.st_dev,
		       .stage_ino = f->stage_st.st_ino,
		       .work_dev = f->work_st.st_dev,
		       .work_ino = f->work_st.st_ino,
		       .image_dev = f->image_st.st_dev,
		       .image_ino = f->image_st.st_ino,
		       .stage_fd = -1,
		       .work_fd = -1,
		       .image_fd = -1,
		       .layer_dev = f->layer_dev,
		       .layer_ino = f->layer_ino,
		       .layer_fds = f->layer_fds,
		       .single_id = single_id,
		       .layer_fd = -1,
		       .shm_fd = -1,
		       .etc_fd = -1},
		.sync_fd = f->sync[0],
		.err_fd = f->errp[1],
		.agent_fd = f->agent,
		.listen_fd = opts->listen_fd,
		.null_fd = f->null,
		.stdio_fd = opts->stdio_fd,
		.single_id = single_id,
		.unshare_cgroup = v1,
		.tasks_fds = f->tasks,
		.n_tasks = f->n_tasks,
		.argv = argv,
		.envp = agent_envp,
		.envp_etc = agent_envp_etc,
	};
}

/* Kill and reap a child that did not make it. */
static void abandon(msb_ns_sandbox *sb)
{
	msb_ns__kill(sb);
	msb_ns__wait(sb);
}

/* After the clone: map the child's ids and let it go on (on v1 it moves
 * itself into its cgroups, child_main); timed into sb->timing, *t4 when
 * done. */
static int release_child(msb_ns_sandbox *sb, const msb_ns_config *cfg, int sync_fd, bool single_id,
			 int64_t t2, int64_t *t4, msb_error **err)
{
	int r = write_maps(sb->pid, cfg, single_id, err);
	if (r == 0 && send_sync(sync_fd, SYNC_MAPPED) < 0)
		r = msb_error_set(err, MSB_E_RUNTIME,
				  "ns spawn: the child died before its ids "
				  "were mapped");
	*t4 = msb__now_ns();
	sb->timing.map_ns = *t4 - t2;
	sb->timing.attach_ns = 0; /* v1: the child's own, below its work */
	if (r == 0)
		send_sync(sync_fd, SYNC_GO); /* a dead child shows on the error pipe */
	return r;
}

/* The child's verdict on the error pipe, from `since` on: EOF once it has
 * exec'd the agent (0), its failure message (into msg, NUL-terminated; its
 * length), or nothing within the spawn timeout (*timed_out). */
static size_t read_verdict(int errfd, int64_t since, char *msg, size_t size, bool *timed_out)
{
	size_t len = 0;
	*timed_out = false;
	for (;;) {
		int64_t left = SPAWN_TIMEOUT_MS - (msb__now_ns() - since) / 1000000;
		struct pollfd pfd = {.fd = errfd, .events = POLLIN};
		int pr = left > 0 ? poll(&pfd, 1, (int)left) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			*timed_out = true;
			break;
		}
		ssize_t n = read(errfd, msg + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == size - 1)
			break;
	}
	msg[len] = '\0';
	return len;
}

/* The agent was exec'd: its process must still be there, and its start
 * time (which pins it against pid reuse) readable. */
static int check_alive(msb_ns_sandbox *sb, msb_error **err)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid((idtype_t)P_PIDFD, (id_t)sb->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	    si.si_pid != 0) {
		int code = si.si_status;
		bool sig = si.si_code != CLD_EXITED;
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns spawn: the sandbox's init %s %d during start",
				     sig ? "was killed by signal" : "exited with status", code);
	}
	int r = msb_ns__proc_start_time(sb->pid, &sb->start_time);
	if (r < 0)
		return msb__error_errno(err, r, "ns spawn: read the init's start time");
	return 0;
}

int msb_ns__spawn(const msb_ns_config *cfg, const msb_ns_spawn_opts *opts, msb_ns_sandbox **out,
		  msb_error **err)
{
	int64_t t0 = msb__now_ns();
	int r = msb_ns__config_check(cfg, err);
	if (r < 0)
		return r;
	if (!opts || !opts->state_dir || opts->state_dir[0] != '/' || !opts->agent_path ||
	    opts->listen_fd < 0 || opts->work_fd < 0 || !opts->work_path ||
	    opts->work_path[0] != '/')
		return msb_error_set(err, MSB_E_VALUE,
				     "ns spawn: state dir, agent, listening socket and work dir "
				     "are required");
	int threads = thread_count();
	if (threads != 1)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns spawn: refusing to create namespaces from a process with "
				     "%d threads (must be single-threaded)",
				     threads);
	bool single_id = !msb_ns__privileged();
	/* The cgroup exists before the clone: v2 clones straight into it
	 * (CLONE_INTO_CGROUP); on v1 the child moves itself in through its
	 * `tasks` files, which it inherits. Neither waits for the global lock a
	 * move of another process takes (DESIGN §8). */
	bool v1 = opts->cgroup && msb_ns__cgroup_version(opts->cgroup) == 1;
	int64_t tc = msb__now_ns();
	if (opts->cgroup && (r = msb_ns__cgroup_setup(opts->cgroup, err)) < 0)
		return r;
	int cgroup_fd = opts->cgroup ? msb_ns__cgroup_clone_fd(opts->cgroup) : -1;
	struct spawn_fds f = {.agent = -1,
			      .image = -1,
			      .stage = -1,
			      .null = -1,
			      .sync = {-1, -1},
			      .errp = {-1, -1}};
	if ((r = msb_ns__cgroup_tasks_fds(opts->cgroup, f.tasks, 3, &f.n_tasks, err)) < 0)
		return r;
	int64_t tc_done = msb__now_ns();
	r = open_inputs(cfg, opts, &f, err);
	if (r < 0) {
		close_fds(&f);
		return r;
	}
	char *default_argv[] = {(char *)"msb-agent", (char *)"--work", cfg->work_dir, NULL};
	struct child_ctx c;
	child_ctx_init(&c, cfg, opts, &f, single_id, v1,
		       opts->agent_argv ? opts->agent_argv : default_argv);

	msb_ns_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb) {
		close_fds(&f);
		return msb__error_nomem(err);
	}
	sb->pidfd = -1;
	sb->layer_fd = -1;
	sb->shm_fd = -1;
	uint64_t flags = ns_flags | CLONE_PIDFD | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
	int64_t t1 = msb__now_ns();
	pid_t pid = msb__sys_clone3(flags, SIGCHLD, cgroup_fd, &sb->pidfd);
	if (pid == 0) {
		close(f.sync[1]);
		close(f.errp[0]);
		child_main(&c);
	}
	int64_t t2 = msb__now_ns();
	close_tasks(&f); /* the child has its own */
	if (pid < 0) {
		close_fds(&f);
		free(sb);
		return msb__error_errno(err, pid, "ns spawn: clone3 into new namespaces");
	}
	sb->pid = pid;
	close(f.sync[0]);
	f.sync[0] = -1;
	close(f.errp[1]);
	f.errp[1] = -1;
	sb->timing.clone_ns = t2 - t1;

	int64_t t4 = t2;
	sb->timing.cgroup_ns = tc_done - tc;
	r = release_child(sb, cfg, f.sync[1], single_id, t2, &t4, err);
	if (r < 0) {
		abandon(sb);
		msb_ns__sandbox_free(sb);
		close_fds(&f);
		return r;
	}

	char msg[512];
	bool timed_out = false;
	size_t len = read_verdict(f.errp[0], t4, msg, sizeof(msg), &timed_out);
	int lr = timed_out || len > 0 ? 0 : recv_layer(f.sync[1], &sb->layer_fd, &sb->shm_fd);
	close_fds(&f);
	int64_t t5 = msb__now_ns();
	sb->timing.wait_ns = t5 - t4;
	if (timed_out)
		r = msb_error_set(err, MSB_E_TIMEOUT,
				  "ns spawn: the sandbox did not start within %d ms",
				  SPAWN_TIMEOUT_MS);
	else if (len > 0)
		r = msb_error_set(err, MSB_E_RUNTIME, "ns spawn: %s", msg);
	else if (lr < 0)
		r = msb__error_errno(err, lr,
				     "ns spawn: the child did not hand over its writable layer");
	else
		r = check_alive(sb, err);
	if (r < 0) {
		abandon(sb);
		msb_ns__sandbox_free(sb);
		return r;
	}
	sb->timing.total_ns = msb__now_ns() - t0;
	*out = sb;
	return 0;
}

int msb_ns__kill(msb_ns_sandbox *sb)
{
	if (!sb || sb->exited || sb->pidfd < 0)
		return 0;
	int r = msb__sys_pidfd_send_signal(sb->pidfd, SIGKILL, 0);
	return r == -ESRCH ? 0 : r;
}

int msb_ns__wait(msb_ns_sandbox *sb)
{
	if (!sb || sb->exited)
		return 0;
	siginfo_t si;
	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid((idtype_t)P_PIDFD, (id_t)sb->pidfd, &si, WEXITED) == 0)
			break;
		if (errno != EINTR)
			return -errno;
	}
	sb->exited = true;
	sb->status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
	return 0;
}

void msb_ns__sandbox_free(msb_ns_sandbox *sb)
{
	if (!sb)
		return;
	if (!sb->exited && sb->pidfd >= 0) {
		msb_ns__kill(sb);
		msb_ns__wait(sb);
	}
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	if (sb->layer_fd >= 0)
		close(sb->layer_fd);
	if (sb->shm_fd >= 0)
		close(sb->shm_fd);
	free(sb);
}
