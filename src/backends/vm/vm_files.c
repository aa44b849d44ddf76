/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `vm` file plane. The host cannot see a guest's files, so each call is
 * one file request the agent serves inside the guest (agent/files.c,
 * MSB_PROTO_EXEC_FILE): the path is confined and normalised here first
 * (msb_ns__relative, the same rules as on `ns`), the agent walks it from the
 * storage base with O_NOFOLLOW at every component, and everything that
 * comes back is counted here against its cap before it is believed: a read
 * never gets more than max_bytes + 1 bytes of output (the exec's budget), a
 * listing at most MAX_LIST_BYTES, a stat one short line.
 */
#include <inttypes.h>
#include <stdio.h>

#include "backends/ns/ns_files.h"
#include "vm_files.h"

#define FILE_TIMEOUT 300.0
#define MAX_LIST_BYTES ((uint64_t)16 << 20)
#define MAX_LIST 65536

/* The agent's statuses (agent/agent.h AGENT_FILE_*). */
enum { VF_OK = 0, VF_VALUE = 2, VF_NOT_FOUND, VF_NOT_DIR, VF_IS_DIR, VF_OS, VF_CAP, VF_PERMISSION };

static char *guest_line(const msb_exec_result *res)
{
	/* The agent's one line, shown as data: printable bytes only, bounded. */
	size_t n = res->stderr_len < 300 ? res->stderr_len : 300;
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = res->stderr_bytes[i];
		if (c == '\n')
			break;
		s[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	s[o] = '\0';
	return s;
}

static int refusal(const vm_files *f, const char *path, const msb_exec_result *res, msb_error **err)
{
	_cleanup_free_ char *why = guest_line(res);
	const char *w = why ? why : "";
	int code;
	switch (res->exit_code) {
	case VF_VALUE:
		code = MSB_E_VALUE;
		break;
	case VF_NOT_FOUND:
		code = MSB_E_NOT_FOUND;
		break;
	case VF_NOT_DIR:
		code = MSB_E_NOT_DIRECTORY;
		break;
	case VF_IS_DIR:
		code = MSB_E_IS_DIRECTORY;
		break;
	case VF_PERMISSION:
		code = MSB_E_PERMISSION;
		break;
	case VF_OS:
		code = MSB_E_OS;
		break;
	default:
		return msb_error_set(err, MSB_E_RUNTIME,
				     "%s: the guest's file request for `%s` failed (status %d): %s",
				     f->backend, path, res->exit_code, w);
	}
	int r = msb_error_set(err, code, "%s: %s", path, w);
	msb__error_set_path(err, path);
	return r;
}

static int relative(const vm_files *f, const char *path, const char *wd, char **rel, char **wd_rel,
		    msb_error **err)
{
	ns_files nf = {.host_base = NULL, .guest_base = f->guest_base};
	return msb_ns__relative(&nf, path, wd, rel, wd_rel, err);
}

static int request(const vm_files *f, const char *const *argv, const uint8_t *in, size_t in_len,
		   uint64_t budget, msb_exec_result *res, msb_error **err)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.stdin_data = in;
	req.stdin_len = in_len;
	req.timeout = FILE_TIMEOUT;
	req.max_output_bytes = budget;
	memset(res, 0, sizeof(*res));
	return f->run(f->ud, &req, res, err);
}

int msb_vm__write_file(const vm_files *f, const char *path, const uint8_t *data, size_t len,
		       const char *wd, msb_error **err)
{
	_cleanup_free_ char *rel = NULL;
	int r = relative(f, path, wd, &rel, NULL, err);
	if (r < 0)
		return r;
	if (!*rel)
		return msb_error_set(err, MSB_E_VALUE, "cannot write the working directory itself");
	const char *argv[] = {"write", rel, NULL};
	msb_exec_result res;
	r = request(f, argv, data, len, 4096, &res, err);
	if (r == 0 && res.exit_code != 0)
		r = refusal(f, path, &res, err);
	msb_exec_result_clear(&res);
	return r;
}

static msb_entry_kind kind_of(char k)
{
	return k == 'F'	  ? MSB_ENTRY_FILE
	       : k == 'D' ? MSB_ENTRY_DIRECTORY
	       : k == 'L' ? MSB_ENTRY_SYMLINK
			  : MSB_ENTRY_OTHER;
}

/* "K SIZE" then `term` at p (len bytes); *used counts through `term`. */
static int parse_head(const char *p, size_t len, char term, char *k, uint64_t *size, size_t *used)
{
	if (len < 4 || !strchr("FDLO", p[0]) || p[1] != ' ')
		return -1;
	uint64_t v = 0;
	size_t i = 2;
	for (; i < len && i < 22 && p[i] >= '0' && p[i] <= '9'; i++)
		v = v * 10 + (uint64_t)(p[i] - '0');
	if (i == 2 || i >= len || p[i] != term)
		return -1;
	*k = p[0];
	*size = v;
	*used = i + 1;
	return 0;
}

static char *shown_name(const char *wd_rel, const char *rel)
{
	size_t n = strlen(wd_rel);
	if (n == 0)
		return msb__strdup(*rel ? rel : ".");
	return msb__strdup(rel[n] ? rel + n + 1 : ".");
}

int msb_vm__stat_file(const vm_files *f, const char *path, const char *wd, bool *present,
		      msb_entry *out, msb_error **err)
{
	_cleanup_free_ char *rel = NULL, *wd_rel = NULL;
	int r = relative(f, path, wd, &rel, &wd_rel, err);
	if (r < 0)
		return r;
	const char *argv[] = {"stat", *rel ? rel : ".", NULL};
	msb_exec_result res;
	if ((r = request(f, argv, NULL, 0, 64, &res, err)) < 0)
		return r;
	if (res.exit_code != 0) {
		r = refusal(f, path, &res, err);
	} else if (res.stdout_len == 2 && memcmp(res.stdout_bytes, "-\n", 2) == 0) {
		*present = false;
	} else {
		char k;
		uint64_t size;
		size_t used;
		if (parse_head((const char *)res.stdout_bytes, res.stdout_len, '\n', &k, &size,
			       &used) < 0 ||
		    used != res.stdout_len) {
			r = msb_error_set(err, MSB_E_PROTOCOL,
					  "%s: the guest answered a stat of `%s` with nonsense",
					  f->backend, path);
		} else {
			memset(out, 0, sizeof(*out));
			out->path = shown_name(wd_rel, rel);
			out->kind = kind_of(k);
			out->size_known = k == 'F';
			out->size_bytes = k == 'F' ? size : 0;
			*present = true;
			if (!out->path)
				r = msb__error_nomem(err);
		}
	}
	msb_exec_result_clear(&res);
	return r;
}

int msb_vm__read_file(const vm_files *f, const char *path, const char *wd, uint64_t max_bytes,
		      uint8_t **data, size_t *len, msb_error **err)
{
	if (max_bytes > MSB_VM_MAX_FILE_BYTES)
		max_bytes = MSB_VM_MAX_FILE_BYTES;
	_cleanup_free_ char *rel = NULL, *wd_rel = NULL;
	int r = relative(f, path, wd, &rel, &wd_rel, err);
	if (r < 0)
		return r;
	char max[32];
	snprintf(max, sizeof(max), "%" PRIu64, max_bytes);
	const char *argv[] = {"read", *rel ? rel : ".", max, NULL};
	msb_exec_result res;
	/* One byte more than the cap: a guest that sends more is caught. */
	if ((r = request(f, argv, NULL, 0, max_bytes + 1, &res, err)) < 0)
		return r;
	if (res.exit_code == VF_CAP ||
	    (res.exit_code == 0 && (res.truncated || res.stdout_len > max_bytes))) {
		r = msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED,
				  "`%s` exceeds the max_bytes_per_file cap of %" PRIu64 " bytes",
				  path, max_bytes);
		_cleanup_free_ char *name = shown_name(wd_rel, rel);
		msb__error_set_cap(err, "max_bytes_per_file", name ? name : path);
	} else if (res.exit_code != 0) {
		r = refusal(f, path, &res, err);
	} else {
		*data = TAKE_PTR(res.stdout_bytes);
		*len = res.stdout_len;
		res.stdout_len = 0;
	}
	msb_exec_result_clear(&res);
	return r;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const msb_entry *)a)->path, ((const msb_entry *)b)->path);
}

int msb_vm__list_dir(const vm_files *f, const char *path, const char *wd, msb_entry **entries,
		     size_t *n, msb_error **err)
{
	_cleanup_free_ char *rel = NULL, *wd_rel = NULL;
	int r = relative(f, path, wd, &rel, &wd_rel, err);
	if (r < 0)
		return r;
	const char *argv[] = {"list", *rel ? rel : ".", NULL};
	msb_exec_result res;
	if ((r = request(f, argv, NULL, 0, MAX_LIST_BYTES, &res, err)) < 0)
		return r;
	if (res.exit_code != 0) {
		r = refusal(f, path, &res, err);
		msb_exec_result_clear(&res);
		return r;
	}
	if (res.truncated) {
		msb_exec_result_clear(&res);
		return msb_error_set(err, MSB_E_OS,
				     "`%s`: the listing is larger than %" PRIu64 " bytes", path,
				     MAX_LIST_BYTES);
	}
	msb_entry *v = NULL;
	size_t count = 0;
	_cleanup_free_ char *dir = shown_name(wd_rel, rel);
	const char *p = (const char *)res.stdout_bytes, *end = p + res.stdout_len;
	while (r == 0 && p < end) {
		char k;
		uint64_t size;
		size_t used;
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul || parse_head(p, (size_t)(nul - p) + 1, ' ', &k, &size, &used) < 0 ||
		    p + used >= nul || memchr(p + used, '/', (size_t)(nul - p - used)) ||
		    count >= MAX_LIST) {
			r = msb_error_set(err, MSB_E_PROTOCOL,
					  "%s: the guest answered a listing of `%s` with nonsense",
					  f->backend, path);
			break;
		}
		msb_entry *nv = msb__reallocarray(v, count + 1, sizeof(*v));
		if (!nv) {
			r = msb__error_nomem(err);
			break;
		}
		v = nv;
		msb_entry *e = &v[count];
		memset(e, 0, sizeof(*e));
		const char *name = p + used;
		e->path = !dir || strcmp(dir, ".") == 0 ? strdup(name)
							: msb__asprintf("%s/%s", dir, name);
		e->kind = kind_of(k);
		e->size_known = k == 'F';
		e->size_bytes = k == 'F' ? size : 0;
		count++;
		if (!e->path)
			r = msb__error_nomem(err);
		p = nul + 1;
	}
	msb_exec_result_clear(&res);
	if (r < 0) {
		msb_entries_free(v, count);
		return r;
	}
	if (count)
		qsort(v, count, sizeof(*v), entry_cmp);
	*entries = v;
	*n = count;
	return 0;
}

int msb_vm__remove(const vm_files *f, const char *path, const char *wd, bool recursive,
		   msb_error **err)
{
	_cleanup_free_ char *rel = NULL;
	int r = relative(f, path, wd, &rel, NULL, err);
	if (r < 0)
		return r;
	if (!*rel)
		return msb_error_set(err, MSB_E_VALUE,
				     "cannot remove the working directory itself");
	const char *argv[] = {recursive ? "remove-r" : "remove", rel, NULL};
	msb_exec_result res;
	if ((r = request(f, argv, NULL, 0, 4096, &res, err)) < 0)
		return r;
	if (res.exit_code != 0)
		r = refusal(f, path, &res, err);
	msb_exec_result_clear(&res);
	return r;
}

int msb_vm__reclaim(const vm_files *f, const char *directory, const char *wd, msb_error **err)
{
	_cleanup_free_ char *rel = NULL, *wd_rel = NULL;
	int r = relative(f, directory, wd, &rel, &wd_rel, err);
	if (r < 0)
		return r;
	if (strcmp(rel, wd_rel) == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "reclaim `%s`: the working directory itself cannot be "
				     "reclaimed",
				     directory);
	return msb_vm__remove(f, directory, wd, true, err);
}

int msb_vm__outcome(const vm_files *f, uint64_t *oom_kill, uint64_t *pids_refused, bool *no_space,
		    msb_error **err)
{
	const char *argv[] = {"outcome", NULL};
	msb_exec_result res;
	int r = request(f, argv, NULL, 0, 256, &res, err);
	if (r < 0)
		return r;
	unsigned long long oom = 0, base = 0, root = 0, pids = 0;
	char text[257];
	size_t len = res.stdout_len < 256 ? res.stdout_len : 256;
	memcpy(text, res.stdout_bytes ? (const char *)res.stdout_bytes : "", len);
	text[len] = '\0';
	if (res.exit_code != 0 ||
	    sscanf(text, "oom_kill %llu\nbase_avail %llu\nroot_avail %llu\npids_max_events %llu\n",
		   &oom, &base, &root, &pids) != 4)
		r = msb_error_set(err, MSB_E_PROTOCOL, "%s: the guest's outcome answer is nonsense",
				  f->backend);
	msb_exec_result_clear(&res);
	if (r == 0) {
		*oom_kill = oom;
		*pids_refused = pids;
		*no_space = base == 0 || root == 0;
	}
	return r;
}
