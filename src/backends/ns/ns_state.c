/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "ns_state.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/sha256.h"
#include "backends/ns/boundary/boundary.h"

void msb_ns__labels_clear(msb_ns_labels *l)
{
	free(l->scope);
	free(l->thread_id);
	free(l->agent_dir);
	free(l->kind);
	free(l->call_id);
	free(l->instance_id);
	free(l->work_dir);
	free(l->image);
	memset(l, 0, sizeof(*l));
}

int msb_ns__state_dir(const char *state_root, char **out, msb_error **err)
{
	const char *root = state_root;
	_cleanup_free_ char *owned = NULL;
	if (!root || !*root)
		root = getenv("MSB_STATE_DIR");
	if (!root || !*root) {
		if (geteuid() == 0) {
			root = "/run/msb";
		} else {
			const char *xdg = getenv("XDG_RUNTIME_DIR");
			if (!xdg || !*xdg)
				return msb_error_set(err, MSB_E_VALUE,
						     "no state directory: set MSB_STATE_DIR or "
						     "XDG_RUNTIME_DIR");
			owned = msb__asprintf("%s/msb", xdg);
			if (!owned)
				return msb__error_nomem(err);
			root = owned;
		}
	}
	if (root[0] != '/')
		return msb_error_set(err, MSB_E_VALUE, "state directory `%s` must be absolute",
				     root);
	char *dir = msb__asprintf("%s/ns", root);
	if (!dir)
		return msb__error_nomem(err);
	/* <dir>/<name>/agent.sock must fit in sun_path (108 bytes). */
	if (strlen(dir) + 1 + 36 + 1 + strlen(MSB_NS_STATE_SOCKET) >= 108) {
		free(dir);
		return msb_error_set(err, MSB_E_VALUE,
				     "state directory `%s` is too long for a unix socket path",
				     root);
	}
	*out = dir;
	return 0;
}

static void hash_field(msb_sha256 *s, const char *v)
{
	char len[32];
	int n = snprintf(len, sizeof(len), "%zu:", v ? strlen(v) : (size_t)0);
	msb__sha256_update(s, len, (size_t)n);
	if (v)
		msb__sha256_update(s, v, strlen(v));
	msb__sha256_update(s, v ? ";" : "!", 1);
}

void msb_ns__name(const msb_key *key, const char *kind, char out[37])
{
	static const char hex[] = "0123456789abcdef";
	msb_sha256 s;
	uint8_t d[32];
	msb__sha256_init(&s);
	hash_field(&s, key->scope);
	hash_field(&s, key->thread_id);
	hash_field(&s, key->agent_dir);
	hash_field(&s, kind);
	hash_field(&s, key->call_id);
	msb__sha256_final(&s, d);
	memcpy(out, "msb-", 4);
	for (int i = 0; i < 16; i++) {
		out[4 + 2 * i] = hex[d[i] >> 4];
		out[5 + 2 * i] = hex[d[i] & 15];
	}
	out[36] = '\0';
}

static json_t *jstr(const char *s)
{
	return s ? json_string(s) : json_null();
}

int msb_ns__labels_write(int dirfd, const msb_ns_labels *l, msb_error **err)
{
	json_t *o =
		json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o}", "scope", jstr(l->scope),
			  "thread_id", jstr(l->thread_id), "agent_dir", jstr(l->agent_dir), "kind",
			  jstr(l->kind), "call_id", jstr(l->call_id), "instance_id",
			  jstr(l->instance_id), "work_dir", jstr(l->work_dir), "created_ns",
			  (json_int_t)l->created_ns, "image", jstr(l->image));
	if (!o)
		return msb__error_nomem(err);
	_cleanup_free_ char *text = msb__json_dump(o);
	json_decref(o);
	if (!text)
		return msb__error_nomem(err);
	int r = msb__write_file_atomic_at(dirfd, MSB_NS_LABELS, text, strlen(text), 0600);
	if (r < 0)
		return msb__error_errno(err, r, "cannot write sandbox labels");
	return 0;
}

static int dup_field(json_t *o, const char *k, bool required, char **out, msb_error **err)
{
	const char *v = NULL;
	bool present = false;
	if (msb__json_get_string(o, k, "labels", &v, &present, err) < 0)
		return MSB_E_VALUE;
	if (!present) {
		if (required)
			return msb_error_set(err, MSB_E_VALUE, "labels: `%s` missing", k);
		*out = NULL;
		return 0;
	}
	*out = strdup(v);
	return *out ? 0 : msb__error_nomem(err);
}

int msb_ns__labels_read(int dirfd, msb_ns_labels *out, msb_error **err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = msb__read_file_at(dirfd, MSB_NS_LABELS, 64 * 1024, &text, &len);
	if (r < 0)
		return msb__error_errno(err, r, "cannot read sandbox labels");
	json_t *o = NULL;
	if (msb__json_load_object(text, len, "labels", &o, err) < 0)
		return MSB_E_VALUE;
	msb_ns_labels l = {0};
	int q = 0;
	if (dup_field(o, "scope", true, &l.scope, err) < 0 ||
	    dup_field(o, "thread_id", true, &l.thread_id, err) < 0 ||
	    dup_field(o, "agent_dir", true, &l.agent_dir, err) < 0 ||
	    dup_field(o, "kind", true, &l.kind, err) < 0 ||
	    dup_field(o, "call_id", false, &l.call_id, err) < 0 ||
	    dup_field(o, "instance_id", true, &l.instance_id, err) < 0 ||
	    dup_field(o, "work_dir", false, &l.work_dir, err) < 0 ||
	    dup_field(o, "image", false, &l.image, err) < 0)
		q = MSB_E_VALUE;
	json_t *c = json_object_get(o, "created_ns");
	if (json_is_integer(c))
		l.created_ns = json_integer_value(c);
	json_decref(o);
	if (q < 0) {
		msb_ns__labels_clear(&l);
		return q;
	}
	*out = l;
	return 0;
}

bool msb_ns__labels_match(const msb_ns_labels *l, const msb_key *key, const char *kind,
			  const char *instance_id)
{
	if (!msb__streq_null(l->scope, key->scope) ||
	    !msb__streq_null(l->thread_id, key->thread_id) ||
	    !msb__streq_null(l->agent_dir, key->agent_dir))
		return false;
	/* A key naming a call selects that call's sandbox only; a conversation
	 * key selects the conversation's sandboxes and its calls'. */
	if (key->call_id && !msb__streq_null(l->call_id, key->call_id))
		return false;
	if (kind && !msb__streq_null(l->kind, kind))
		return false;
	if (instance_id && !msb__streq_null(l->instance_id, instance_id))
		return false;
	return true;
}

int msb_ns__shim_alive(int dirfd, int64_t *pid, int *pidfd)
{
	*pid = 0;
	if (pidfd)
		*pidfd = -1;
	pid_t p = 0;
	uint64_t start = 0;
	if (msb_ns__read_pid_file(dirfd, MSB_NS_STATE_SHIM_PID, &p, &start) < 0)
		return 0;
	int fd = msb_ns__pidfd_if_same(p, start);
	if (fd < 0)
		return 0;
	*pid = p;
	if (pidfd)
		*pidfd = fd;
	else
		close(fd);
	return 0;
}

msb_ns_liveness msb_ns__liveness_settled(int dirfd, int64_t *shim_pid, char **why,
					 int64_t settle_ns, int *shim_pidfd)
{
	int64_t until = msb__now_ns() + settle_ns;
	if (shim_pidfd)
		*shim_pidfd = -1;
	for (;;) {
		int64_t shim = 0;
		if (shim_pidfd && *shim_pidfd >= 0) {
			close(*shim_pidfd);
			*shim_pidfd = -1;
		}
		msb_ns_liveness live = msb_ns__liveness_init(dirfd, &shim, why, NULL, shim_pidfd);
		if (shim_pid)
			*shim_pid = shim;
		/* Dead with its shim alive and no record: the shim is writing it. */
		if (live != MSB_NS_DEAD || shim == 0 || msb__now_ns() >= until ||
		    faccessat(dirfd, MSB_NS_STATE_DEAD, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			return live;
		if (why) {
			free(*why);
			*why = NULL;
		}
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

bool msb_ns__init_alive(int dirfd)
{
	pid_t p = 0;
	uint64_t start = 0;
	if (msb_ns__read_pid_file(dirfd, MSB_NS_STATE_INIT_PID, &p, &start) < 0)
		return false;
	int fd = msb_ns__pidfd_if_same(p, start);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

msb_ns_liveness msb_ns__liveness(int dirfd, int64_t *shim_pid, char **why)
{
	return msb_ns__liveness_init(dirfd, shim_pid, why, NULL, NULL);
}

msb_ns_liveness msb_ns__liveness_init(int dirfd, int64_t *shim_pid, char **why, bool *init_alive,
				      int *shim_pidfd)
{
	int64_t pid = 0;
	if (why)
		*why = NULL;
	if (init_alive)
		*init_alive = false;
	msb_ns__shim_alive(dirfd, &pid, shim_pidfd);
	if (shim_pid)
		*shim_pid = pid;
	/* The shim's record of its init's death: first, since the shim is
	 * still alive while it takes the dead sandbox down. */
	_cleanup_free_ char *rec = NULL;
	size_t len = 0;
	if (msb__read_file_at(dirfd, MSB_NS_STATE_DEAD, 1024, &rec, &len) == 0) {
		while (len > 0 && (rec[len - 1] == '\n' || rec[len - 1] == '\0'))
			rec[--len] = '\0';
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)rec[i] < 0x20)
				rec[i] = ' ';
		if (why)
			*why = len ? TAKE_PTR(rec) : strdup("its agent died");
		return MSB_NS_DEAD;
	}
	if (pid > 0) {
		/* Its shim lives; its agent must too. An agent that died (or is
		 * exiting) before its shim recorded how is dead already, never
		 * `running` (the fault suite's acquire.*-agent cases). There is no
		 * init.pid while a shim starts or resets its sandbox. */
		pid_t ip = 0;
		uint64_t istart = 0;
		if (msb_ns__read_pid_file(dirfd, MSB_NS_STATE_INIT_PID, &ip, &istart) < 0)
			return MSB_NS_RUNNING;
		int fd = msb_ns__pidfd_if_same(ip, istart);
		if (fd >= 0) {
			close(fd);
			if (init_alive)
				*init_alive = true;
		}
		if (fd != -ESRCH)
			return MSB_NS_RUNNING; /* alive, or not known to be dead */
		if (why)
			*why = msb__asprintf("its agent (pid %d) died; its shim (pid %lld) has not "
					     "recorded how yet",
					     (int)ip, (long long)pid);
		return MSB_NS_DEAD;
	}
	/* shim.pid is removed last by a shim that took its sandbox down; still
	 * there, its shim died without doing so (SIGKILL, a crash). */
	pid_t p = 0;
	uint64_t start = 0;
	if (msb_ns__read_pid_file(dirfd, MSB_NS_STATE_SHIM_PID, &p, &start) == 0) {
		if (why) {
			char state = 0;
			uint64_t now = 0;
			bool zombie = msb_ns__proc_stat(p, &state, &now) == 0 && now == start &&
				      state == 'Z';
			*why = msb__asprintf("its shim (pid %d) %s without taking it down", (int)p,
					     zombie ? "died (a zombie its parent has not reaped)"
						    : "died");
		}
		return MSB_NS_DEAD;
	}
	return MSB_NS_STALE;
}
