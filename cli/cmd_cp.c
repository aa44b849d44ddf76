/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb cp: files and directories between the host and a sandbox's storage
 * base, through the confined file plane (the msb_sandbox file methods) and
 * within the spec's transfer caps (files_in one way, files_out the other).
 *
 * Everything is read and counted against the caps before anything is
 * written, so a refusal leaves nothing half-copied. The host side is never
 * followed through a link: the source is read with O_NOFOLLOW and fd-relative
 * walks, the destination is written through the filesystem sink (openat2
 * beneath its root, no links, exclusive unless --replace, docs/outputs.md).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <msb/outputs.h>

#include "cli.h"

#define GUEST_PREFIX "sandbox:"
/* Directories one copy may hold (files are bounded by max_files). */
#define MAX_DIRS 4096
#define MAX_DEPTH 64

enum { OPT_REPLACE = CLI_OPT_VERB, OPT_MAX_FILE, OPT_MAX_TOTAL, OPT_MAX_FILES };

static const cli_option cp_options[] = {
	CLI_TARGET_ROWS,
	{"replace", NULL, "replace existing files on the host (default: refuse them)", OPT_REPLACE,
	 CLI_VALUE_NONE, NULL},
	{"max-bytes-per-file", "N", "the spec's per-file cap (default 8 MiB)", OPT_MAX_FILE,
	 CLI_VALUE_TEXT, NULL},
	{"max-total-bytes", "N", "the spec's cap on all files together (default 32 MiB)",
	 OPT_MAX_TOTAL, CLI_VALUE_TEXT, NULL},
	{"max-files", "N", "the spec's cap on the number of files (default 64)", OPT_MAX_FILES,
	 CLI_VALUE_TEXT, NULL},
	CLI_OPTION_END,
};

static int cmd_cp(int argc, char **argv);
const cli_verb verb_cp = {
	.name = "cp",
	.summary = "copy files and directories between the host and a sandbox",
	.synopsis = "msb cp --thread T [KEY OPTIONS] HOST_PATH sandbox:PATH\n"
		    "       msb cp --thread T [KEY OPTIONS] sandbox:PATH HOST_PATH",
	.description =
		"The literal prefix `sandbox:` marks the guest side; PATH is relative to the\n"
		"storage base. The sandbox is the key's, named the way `exec` names it, and is\n"
		"acquired (warm or new) through the router. Files and directories move through\n"
		"the confined file plane: a link in the sandbox or a path leaving the storage\n"
		"base is refused, and so is a copy over the spec's transfer caps (files_in into\n"
		"the sandbox, files_out out of it; raise them with the --max-* options, within\n"
		"what the backend declares). Nothing is written until everything was read.\n"
		"\n"
		"On the host nothing is followed through a link; files land exclusively (an\n"
		"existing one is refused unless --replace) with mode 0644. Into an existing\n"
		"directory a copy lands under the source's name, as with cp(1).\n",
	.options = cp_options,
	.operand_value = CLI_VALUE_FILE,
	.run = cmd_cp,
};

/* One file or directory of the copy, relative to the copy's root ("" = the
 * root itself, when it is a file). */
struct item {
	char *rel;
	bool dir;
	uint8_t *data;
	size_t len;
};

struct copy {
	struct item *v;
	size_t n, cap;
	size_t files, dirs;
	uint64_t total;
	msb_transfer_limits caps;
	const char *direction; /* files_in or files_out */
};

static void copy_clear(struct copy *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].rel);
		free(c->v[i].data);
	}
	free(c->v);
	memset(c, 0, sizeof(*c));
}

static int cap_refusal(const struct copy *c, const char *cap, const char *what, msb_error **err)
{
	return msb_error_set(
		err, MSB_E_TRANSFER_CAP_EXCEEDED,
		"`%s`: the copy is over the spec's %s cap %s (%llu bytes per file, "
		"%llu bytes in all, %llu files): nothing was copied",
		what, c->direction, cap, (unsigned long long)c->caps.max_bytes_per_file,
		(unsigned long long)c->caps.max_total_bytes, (unsigned long long)c->caps.max_files);
}

/* Count one more file of `size` bytes against the caps. */
static int count_file(struct copy *c, const char *what, uint64_t size, msb_error **err)
{
	if (c->files + 1 > c->caps.max_files)
		return cap_refusal(c, "max_files", what, err);
	if (size > c->caps.max_bytes_per_file)
		return cap_refusal(c, "max_bytes_per_file", what, err);
	if (size > c->caps.max_total_bytes - c->total)
		return cap_refusal(c, "max_total_bytes", what, err);
	c->files++;
	c->total += size;
	return 0;
}

static int add(struct copy *c, const char *rel, bool dir, uint8_t *data, size_t len,
	       msb_error **err)
{
	if (dir && ++c->dirs > MAX_DIRS)
		return msb_error_set(err, MSB_E_VALUE, "more than %d directories in one copy",
				     MAX_DIRS);
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 16;
		struct item *nv = reallocarray(c->v, ncap, sizeof(*nv));
		if (!nv)
			return msb_error_set(err, MSB_E_NOMEM, "out of memory");
		c->v = nv;
		c->cap = ncap;
	}
	char *r = strdup(rel);
	if (!r)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	c->v[c->n++] = (struct item){r, dir, data, len};
	return 0;
}

static char *join(const char *a, const char *b)
{
	char *out = NULL;
	if (!*a)
		return strdup(b);
	if (!*b)
		return strdup(a);
	return asprintf(&out, "%s/%s", a, b) < 0 ? NULL : out;
}

/* ---- the host side, read ---------------------------------------------------------------- */

/* A regular file the caller opened (no follow): its bytes, within the caps. */
static int read_host_file(struct copy *c, int fd, const char *shown, const char *rel,
			  msb_error **err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return msb_error_set(err, MSB_E_OS, "host `%s`: %s", shown, strerror(errno));
	int r = count_file(c, shown, (uint64_t)st.st_size, err);
	if (r < 0)
		return r;
	size_t cap = (size_t)st.st_size, n = 0;
	uint8_t *buf = malloc(cap + 1);
	if (!buf)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	/* Read one byte past the size: a file that grew is refused, not cut. */
	for (;;) {
		ssize_t got = read(fd, buf + n, cap + 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;
			free(buf);
			return msb_error_set(err, MSB_E_OS, "host `%s`: %s", shown, strerror(e));
		}
		if (got == 0)
			break;
		n += (size_t)got;
		if (n > cap) {
			free(buf);
			return msb_error_set(err, MSB_E_OS,
					     "host `%s` changed size while it was read", shown);
		}
	}
	r = add(c, rel, false, buf, n, err);
	if (r < 0)
		free(buf);
	return r;
}

static int refuse_host_entry(const char *shown, mode_t mode, msb_error **err)
{
	if (S_ISLNK(mode))
		return msb_error_set(err, MSB_E_OS, "host `%s` is a link: not followed", shown);
	return msb_error_set(err, MSB_E_OS, "host `%s` is not a regular file or a directory",
			     shown);
}

/* Every entry of the directory `dirfd` (rel beneath the root), depth-first. */
static int walk_host(struct copy *c, int dirfd, const char *shown, const char *rel, int depth,
		     msb_error **err)
{
	if (depth > MAX_DEPTH)
		return msb_error_set(err, MSB_E_VALUE, "host `%s`: more than %d levels deep", shown,
				     MAX_DEPTH);
	int r = add(c, rel, true, NULL, 0, err);
	if (r < 0)
		return r;
	int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return msb_error_set(err, MSB_E_OS, "host `%s`: %s", shown, strerror(errno));
	}
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char *sub_rel = join(rel, de->d_name), *sub_shown = join(shown, de->d_name);
		if (!sub_rel || !sub_shown) {
			r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		} else {
			/* Never through a link, never a fifo left blocking. */
			int fd = openat(dirfd, de->d_name,
					O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
			struct stat st;
			if (fd < 0 && errno == ELOOP)
				r = refuse_host_entry(sub_shown, S_IFLNK, err);
			else if (fd < 0 || fstat(fd, &st) < 0)
				r = msb_error_set(err, MSB_E_OS, "host `%s`: %s", sub_shown,
						  strerror(errno));
			else if (S_ISDIR(st.st_mode))
				r = walk_host(c, fd, sub_shown, sub_rel, depth + 1, err);
			else if (S_ISREG(st.st_mode))
				r = read_host_file(c, fd, sub_shown, sub_rel, err);
			else
				r = refuse_host_entry(sub_shown, st.st_mode, err);
			if (fd >= 0)
				close(fd);
		}
		free(sub_rel);
		free(sub_shown);
	}
	closedir(d);
	return r;
}

static int read_host(struct copy *c, const char *path, bool *is_dir, msb_error **err)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ELOOP)
		return refuse_host_entry(path, S_IFLNK, err);
	if (fd < 0)
		return msb_error_set(err, errno == ENOENT ? MSB_E_NOT_FOUND : MSB_E_OS,
				     "host `%s`: %s", path, strerror(errno));
	struct stat st;
	int r = fstat(fd, &st) < 0
			? msb_error_set(err, MSB_E_OS, "host `%s`: %s", path, strerror(errno))
		: S_ISDIR(st.st_mode) ? walk_host(c, fd, path, "", 0, err)
		: S_ISREG(st.st_mode) ? read_host_file(c, fd, path, "", err)
				      : refuse_host_entry(path, st.st_mode, err);
	*is_dir = r == 0 && S_ISDIR(st.st_mode);
	close(fd);
	return r;
}

/* ---- the guest side, read ------------------------------------------------------------- */

static int refuse_guest_entry(const msb_entry *e, const char *path, msb_error **err)
{
	if (e->kind == MSB_ENTRY_SYMLINK)
		return msb_error_set(err, MSB_E_OS, "`%s` is a link: refusing to copy through it",
				     path);
	return msb_error_set(err, MSB_E_OS, "`%s` is not a regular file or a directory", path);
}

static int read_guest_file(struct copy *c, msb_sandbox *sb, const msb_entry *e, const char *path,
			   const char *rel, msb_error **err)
{
	int r = count_file(c, path, e->size_known ? e->size_bytes : 0, err);
	if (r < 0)
		return r;
	/* At most what is left of both caps: a file that grew is refused. */
	uint64_t left = c->caps.max_total_bytes - (c->total - (e->size_known ? e->size_bytes : 0));
	uint64_t max = c->caps.max_bytes_per_file < left ? c->caps.max_bytes_per_file : left;
	uint8_t *data = NULL;
	size_t len = 0;
	if ((r = msb_sandbox_read_file(sb, path, NULL, max, &data, &len, err)) < 0)
		return r;
	c->total = c->total - (e->size_known ? e->size_bytes : 0) + len;
	r = add(c, rel, false, data, len, err);
	if (r < 0)
		free(data);
	return r;
}

static int walk_guest(struct copy *c, msb_sandbox *sb, const char *path, const char *rel, int depth,
		      msb_error **err)
{
	if (depth > MAX_DEPTH)
		return msb_error_set(err, MSB_E_VALUE, "`%s`: more than %d levels deep", path,
				     MAX_DEPTH);
	int r = add(c, rel, true, NULL, 0, err);
	if (r < 0)
		return r;
	msb_entry *v = NULL;
	size_t n = 0;
	if ((r = msb_sandbox_list_dir(sb, path, NULL, &v, &n, err)) < 0)
		return r;
	/* Refuse a link or a special file before reading anything below. */
	for (size_t i = 0; r == 0 && i < n; i++)
		if (v[i].kind != MSB_ENTRY_FILE && v[i].kind != MSB_ENTRY_DIRECTORY)
			r = refuse_guest_entry(&v[i], v[i].path, err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const char *slash = strrchr(v[i].path, '/');
		char *sub_rel = join(rel, slash ? slash + 1 : v[i].path);
		if (!sub_rel)
			r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
		else if (v[i].kind == MSB_ENTRY_DIRECTORY)
			r = walk_guest(c, sb, v[i].path, sub_rel, depth + 1, err);
		else
			r = read_guest_file(c, sb, &v[i], v[i].path, sub_rel, err);
		free(sub_rel);
	}
	msb_entries_free(v, n);
	return r;
}

static int read_guest(struct copy *c, msb_sandbox *sb, const char *path, bool *is_dir,
		      msb_error **err)
{
	bool present = false;
	msb_entry e = {0};
	int r = msb_sandbox_stat_file(sb, path, NULL, &present, &e, err);
	if (r < 0)
		return r;
	if (!present)
		return msb_error_set(err, MSB_E_NOT_FOUND, "no such file `%s` in the sandbox",
				     path);
	*is_dir = e.kind == MSB_ENTRY_DIRECTORY;
	if (e.kind == MSB_ENTRY_DIRECTORY)
		r = walk_guest(c, sb, path, "", 0, err);
	else if (e.kind == MSB_ENTRY_FILE)
		r = read_guest_file(c, sb, &e, path, "", err);
	else
		r = refuse_guest_entry(&e, path, err);
	msb_entry_clear(&e);
	return r;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* The last component of a path ("." for the storage base itself). */
static const char *base_name(const char *p, char *buf, size_t size)
{
	snprintf(buf, size, "%s", p);
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	const char *slash = strrchr(buf, '/');
	return slash ? slash + 1 : buf;
}

static int write_guest(const struct copy *c, msb_sandbox *sb, const char *dest, msb_error **err)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct item *it = &c->v[i];
		char *path = join(dest, it->rel);
		if (!path)
			return msb_error_set(err, MSB_E_NOMEM, "out of memory");
		int r = 0;
		if (!it->dir) {
			r = msb_sandbox_write_file(sb, path, it->data, it->len, NULL, err);
		} else {
			/* The file plane makes directories as parents of a file: an
			 * empty one is made by a placeholder written and removed. */
			bool present = false;
			msb_entry e = {0};
			r = msb_sandbox_stat_file(sb, path, NULL, &present, &e, err);
			if (r == 0 && present && e.kind != MSB_ENTRY_DIRECTORY)
				r = msb_error_set(
					err, MSB_E_NOT_DIRECTORY,
					"`%s` exists in the sandbox and is not a directory", path);
			msb_entry_clear(&e);
			char *mark = r == 0 && !present ? join(path, ".msb-cp-mkdir") : NULL;
			if (r == 0 && !present && !mark)
				r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
			if (mark && (r = msb_sandbox_write_file(sb, mark, NULL, 0, NULL, err)) == 0)
				r = msb_sandbox_remove(sb, mark, NULL, false, err);
			free(mark);
		}
		free(path);
		if (r < 0)
			return r;
	}
	return 0;
}

static long sys_openat2(int dirfd, const char *path, struct open_how *how)
{
	long r;
	do
		r = syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
	while (r < 0 && (errno == EINTR || errno == EAGAIN));
	return r;
}

/* mkdir -p of `rel` beneath rootfd, each component opened beneath the one
 * before it with no link resolved (an empty directory of the copy; files
 * land through the sink, which makes their parents the same way). */
static int mkdir_beneath(int rootfd, const char *rel, msb_error **err)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", rel);
	int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	char *save = NULL;
	for (char *seg = strtok_r(buf, "/", &save); cur >= 0 && seg;
	     seg = strtok_r(NULL, "/", &save)) {
		struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
						  RESOLVE_NO_MAGICLINKS};
		if (mkdirat(cur, seg, 0755) < 0 && errno != EEXIST) {
			close(cur);
			return msb_error_set(err, MSB_E_OS, "host directory `%s`: %s", rel,
					     strerror(errno));
		}
		int next = (int)sys_openat2(cur, seg, &how);
		int e = errno;
		close(cur);
		if (next < 0)
			return msb_error_set(err,
					     e == ELOOP ? MSB_E_LANDING_NOT_CONFINED : MSB_E_OS,
					     "host directory `%s`: %s", rel, strerror(e));
		cur = next;
	}
	if (cur >= 0)
		close(cur);
	return 0;
}

static int write_host(const struct copy *c, const char *host, const char *guest_name, bool replace,
		      msb_error **err)
{
	/* An existing directory receives the copy under the source's name;
	 * otherwise the path's parent is the root and its last part the name. */
	struct stat st;
	char dir[PATH_MAX], name[PATH_MAX];
	const bool exists = lstat(host, &st) == 0;
	if (!exists && errno != ENOENT)
		return msb_error_set(err, MSB_E_OS, "host `%s`: %s", host, strerror(errno));
	if (exists && S_ISLNK(st.st_mode))
		return msb_error_set(err, MSB_E_LANDING_NOT_CONFINED,
				     "host `%s` is a link: not followed", host);
	if (exists && S_ISDIR(st.st_mode)) {
		snprintf(dir, sizeof(dir), "%s", host);
		snprintf(name, sizeof(name), "%s", guest_name);
	} else {
		char tmp[PATH_MAX], base[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s", host);
		snprintf(dir, sizeof(dir), "%s", dirname(tmp));
		snprintf(name, sizeof(name), "%s", base_name(host, base, sizeof(base)));
	}
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || !*name)
		name[0] = '\0'; /* the storage base's contents, straight into dir */
	msb_fs_sink_options so = MSB_FS_SINK_OPTIONS_INIT;
	so.existing = replace ? MSB_LANDING_REPLACE : MSB_LANDING_REFUSE;
	msb_output_sink *sink = NULL;
	int r = msb_fs_sink_new(dir, &so, &sink, err);
	if (r < 0)
		return r;
	int rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		r = msb_error_set(err, MSB_E_OS, "host `%s`: %s", dir, strerror(errno));
	/* Exclusive: the destination itself must not exist (unless --replace);
	 * the sink refuses each file again without a check-then-write window. */
	if (r == 0 && *name && !replace && fstatat(rootfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		r = msb_error_set(err, MSB_E_LANDING_EXISTS,
				  "host `%s/%s` exists: nothing was copied (pass --replace)", dir,
				  name);
	for (size_t i = 0; r == 0 && i < c->n; i++) {
		const struct item *it = &c->v[i];
		char *rel = join(name, it->rel);
		if (!rel) {
			r = msb_error_set(err, MSB_E_NOMEM, "out of memory");
			break;
		}
		if (it->dir) {
			if (*rel)
				r = mkdir_beneath(rootfd, rel, err);
		} else {
			msb_artifact a = {
				.name = rel, .content = it->data, .len = it->len, .kind = "cp"};
			msb_landed_artifact landed = {0};
			r = sink->deliver(sink->userdata, &a, NULL, &landed, err);
			msb_landed_artifact_clear(&landed);
		}
		free(rel);
	}
	if (rootfd >= 0)
		close(rootfd);
	msb_output_sink_free(sink);
	return r;
}

/* ---- the verb ------------------------------------------------------------------------- */

static bool parse_cap(const char *arg, uint64_t *out)
{
	return cli_parse_count(arg, true, out);
}

static int cmd_cp(int argc, char **argv)
{
	struct option opts[32];
	if (!cli_getopt_table(&verb_cp, opts, 32))
		return 1;
	cli_target t;
	cli_target_init(&t);
	bool replace = false;
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int taken = cli_target_option(&t, &verb_cp, c, optarg);
		if (taken < 0)
			return 2;
		if (taken)
			continue;
		switch (c) {
		case OPT_REPLACE:
			replace = true;
			break;
		case OPT_MAX_FILE:
		case OPT_MAX_TOTAL:
		case OPT_MAX_FILES:
			if (!parse_cap(optarg, c == OPT_MAX_FILE    ? &t.transfer.max_bytes_per_file
					       : c == OPT_MAX_TOTAL ? &t.transfer.max_total_bytes
								    : &t.transfer.max_files))
				return cli_usage(&verb_cp, "--max-* want a positive count (K, M, G "
							   "allowed)");
			break;
		default:
			return cli_usage(&verb_cp, "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (argc - optind != 2)
		return cli_usage(&verb_cp, "name a source and a destination, one of them "
					   "`sandbox:PATH`");
	const char *src = argv[optind], *dst = argv[optind + 1];
	const size_t np = strlen(GUEST_PREFIX);
	const bool in = strncmp(dst, GUEST_PREFIX, np) == 0;
	const bool out = strncmp(src, GUEST_PREFIX, np) == 0;
	if (in == out)
		return cli_usage(&verb_cp, "exactly one side is `sandbox:PATH`");
	if (!t.thread)
		return cli_usage(&verb_cp, "--thread is required");
	cli_locate_helpers();

	msb_error *err = NULL;
	msb_router *router = NULL;
	msb_sandbox *sb = NULL;
	msb_spec *spec = NULL;
	const msb_capset need = MSB_CAP_EXEC | (in ? MSB_CAP_FILES_IN : MSB_CAP_FILES_OUT);
	if (cli_target_acquire(&t, need, &router, &sb, &spec, &err) < 0)
		return cli_fail(err);
	struct copy cp = {.direction = in ? "files_in" : "files_out"};
	cp.caps = in ? msb_spec_files_in(spec) : msb_spec_files_out(spec);
	bool is_dir = false;
	int r;
	if (in) {
		const char *guest = dst + np;
		r = read_host(&cp, src, &is_dir, &err);
		/* Into an existing directory: under the source's name. */
		bool present = false;
		msb_entry e = {0};
		char *dest = NULL;
		if (r == 0)
			r = msb_sandbox_stat_file(sb, *guest ? guest : ".", NULL, &present, &e,
						  &err);
		if (r == 0 && present && e.kind == MSB_ENTRY_DIRECTORY) {
			char buf[PATH_MAX];
			const char *b = base_name(src, buf, sizeof(buf));
			dest = strcmp(b, ".") && strcmp(b, "..") && strcmp(b, "/") ? join(guest, b)
										   : strdup(guest);
		} else if (r == 0) {
			dest = strdup(guest);
		}
		msb_entry_clear(&e);
		if (r == 0 && !dest)
			r = msb_error_set(&err, MSB_E_NOMEM, "out of memory");
		if (r == 0)
			r = write_guest(&cp, sb, dest, &err);
		free(dest);
	} else {
		const char *guest = *(src + np) ? src + np : ".";
		r = read_guest(&cp, sb, guest, &is_dir, &err);
		char buf[PATH_MAX];
		if (r == 0)
			r = write_host(&cp, dst, base_name(guest, buf, sizeof(buf)), replace, &err);
	}
	copy_clear(&cp);
	msb_spec_unref(spec);
	msb_sandbox_free(sb);
	msb_router_free(router);
	return r < 0 ? cli_fail(err) : 0;
}
