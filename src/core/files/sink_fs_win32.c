/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The filesystem sink on Windows (sink_fs.h; checklist 12.26-12.29; issue
 * 21). Windows has no openat2: each component beneath the root is opened in
 * turn, by its full path under the root's final path (a \\?\ path: no
 * normalisation of trailing dots, spaces or device names), without
 * following a reparse point (FILE_FLAG_OPEN_REPARSE_POINT), and refused
 * when it is one - a symlink or a junction, whatever its target - either by
 * its path's attributes or by the opened handle's. Each handle is held,
 * without FILE_SHARE_DELETE, until the artifact has landed: no component on
 * the way can be renamed, removed or replaced by a link meanwhile. The
 * bytes go to a hidden sibling, flushed, then renamed onto the name
 * (MoveFileExW, replacing only with MSB_LANDING_REPLACE; a rename replaces
 * a link, it never follows one).
 */
#include <windows.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/files/sink_fs.h"
#include "platform/platform.h"
#include "platform/win32/win32.h"
#include "util/util.h"

/* Components of a name: at most 255 bytes, so at most 128. */
#define MAX_DEPTH 128

struct fs_sink_root {
	HANDLE h;
	wchar_t *path; /* \\?\C:\... */
};

static bool is_reparse(DWORD attrs)
{
	return attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_REPARSE_POINT);
}

int msb_fs_sink__root_open(const char *root, fs_sink_root **out, char **resolved)
{
	_cleanup_free_ wchar_t *w = msb__win_wide(root);
	if (!w)
		return -errno;
	/* The root is the host's choice: a link in it is followed, once. */
	HANDLE h = CreateFileW(w, FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES,
			       FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, OPEN_EXISTING,
			       FILE_FLAG_BACKUP_SEMANTICS, NULL);
	if (h == INVALID_HANDLE_VALUE)
		return -msb__win_errno(GetLastError());
	BY_HANDLE_FILE_INFORMATION info;
	wchar_t *final = NULL;
	char *utf8 = NULL;
	int r = 0;
	DWORD n = 0;
	if (!GetFileInformationByHandle(h, &info)) {
		r = -msb__win_errno(GetLastError());
	} else if (!(info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)) {
		r = -ENOTDIR;
	} else if ((n = GetFinalPathNameByHandleW(h, NULL, 0, VOLUME_NAME_DOS)) == 0) {
		r = -msb__win_errno(GetLastError());
	} else if (!(final = calloc((size_t)n + 1, sizeof(*final)))) {
		r = -ENOMEM;
	} else if (GetFinalPathNameByHandleW(h, final, n + 1, VOLUME_NAME_DOS) == 0) {
		r = -msb__win_errno(GetLastError());
	}
	/* What the caller sees: the path without its \\?\ prefix, as UTF-8. */
	if (r == 0) {
		const wchar_t *shown = wcsncmp(final, L"\\\\?\\", 4) == 0 ? final + 4 : final;
		int m = WideCharToMultiByte(CP_UTF8, 0, shown, -1, NULL, 0, NULL, NULL);
		if (m <= 0 || !(utf8 = malloc((size_t)m)))
			r = -ENOMEM;
		else
			WideCharToMultiByte(CP_UTF8, 0, shown, -1, utf8, m, NULL, NULL);
	}
	fs_sink_root *s = r == 0 ? malloc(sizeof(*s)) : NULL;
	if (r == 0 && !s)
		r = -ENOMEM;
	if (r < 0) {
		CloseHandle(h);
		free(final);
		free(utf8);
		return r;
	}
	/* A path without the prefix (a Wine or an old Windows answer) gets it. */
	if (wcsncmp(final, L"\\\\?\\", 4) != 0) {
		size_t len = wcslen(final);
		wchar_t *p = malloc((len + 5) * sizeof(*p));
		if (!p) {
			CloseHandle(h);
			free(final);
			free(utf8);
			free(s);
			return -ENOMEM;
		}
		memcpy(p, L"\\\\?\\", 4 * sizeof(*p));
		memcpy(p + 4, final, (len + 1) * sizeof(*p));
		free(final);
		final = p;
	}
	/* No trailing separator (a drive's root has one). */
	size_t len = wcslen(final);
	if (len > 0 && final[len - 1] == L'\\')
		final[len - 1] = L'\0';
	s->h = h;
	s->path = final;
	*out = s;
	*resolved = utf8;
	return 0;
}

void msb_fs_sink__root_close(fs_sink_root *r)
{
	if (!r)
		return;
	CloseHandle(r->h);
	free(r->path);
	free(r);
}

char *msb_fs_sink__handle(const char *root, const char *name)
{
	char *h = msb__asprintf("%s\\%s", root, name);
	for (char *p = h ? h + strlen(root) : NULL; p && *p; p++)
		if (*p == '/')
			*p = '\\';
	return h;
}

/* A component Windows would read as something else, or not hold: a stream
 * (':'), a wildcard or reserved character, a trailing dot or space (Win32
 * drops them), a device name (CON, NUL, COM1, LPT1 - with any extension). */
static bool windows_name_ok(const char *seg, size_t n)
{
	static const char *const devices[] = {"CON", "PRN", "AUX", "NUL", NULL};
	if (n == 0 || seg[n - 1] == '.' || seg[n - 1] == ' ')
		return false;
	for (size_t i = 0; i < n; i++)
		if (strchr(":*?\"<>|", seg[i]))
			return false;
	size_t stem = 0;
	while (stem < n && seg[stem] != '.')
		stem++;
	for (size_t i = 0; devices[i]; i++)
		if (stem == 3 && _strnicmp(seg, devices[i], 3) == 0)
			return false;
	if (stem == 4 && (_strnicmp(seg, "COM", 3) == 0 || _strnicmp(seg, "LPT", 3) == 0) &&
	    seg[3] >= '0' && seg[3] <= '9')
		return false;
	return true;
}

/* The root's path, then "\" and name up to `upto` bytes, '/' as '\'. */
static wchar_t *path_of(const fs_sink_root *r, const char *name, size_t upto)
{
	_cleanup_free_ char *part = msb__strndup(name, upto);
	if (!part)
		return NULL;
	for (char *p = part; *p; p++)
		if (*p == '/')
			*p = '\\';
	_cleanup_free_ wchar_t *w = msb__win_wide(part);
	if (!w)
		return NULL;
	size_t a = wcslen(r->path), b = wcslen(w);
	wchar_t *out = malloc((a + b + 2) * sizeof(*out));
	if (!out)
		return NULL;
	memcpy(out, r->path, a * sizeof(*out));
	out[a] = L'\\';
	memcpy(out + a + 1, w, (b + 1) * sizeof(*out));
	return out;
}

/* Open an existing component without following it, and judge it: 0 with
 * *h held, FS_SINK_NOT_CONFINED for a reparse point, FS_SINK_PARENT_NOT_DIR
 * (want_dir) for anything else than a directory, or -errno. */
static int open_component(const wchar_t *path, bool want_dir, HANDLE *h)
{
	*h = INVALID_HANDLE_VALUE;
	/* The path's own attributes first: Wine reports a unix symlink as a
	 * reparse point here only (its handle opens the target). */
	if (is_reparse(GetFileAttributesW(path)))
		return FS_SINK_NOT_CONFINED;
	HANDLE x = CreateFileW(path, FILE_READ_ATTRIBUTES | (want_dir ? FILE_LIST_DIRECTORY : 0),
			       FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, OPEN_EXISTING,
			       FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
	if (x == INVALID_HANDLE_VALUE)
		return -msb__win_errno(GetLastError());
	BY_HANDLE_FILE_INFORMATION info;
	if (!GetFileInformationByHandle(x, &info)) {
		int e = -msb__win_errno(GetLastError());
		CloseHandle(x);
		return e;
	}
	if (info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) {
		CloseHandle(x);
		return FS_SINK_NOT_CONFINED;
	}
	if (want_dir && !(info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)) {
		CloseHandle(x);
		return FS_SINK_PARENT_NOT_DIR;
	}
	*h = x;
	return 0;
}

static int write_all(HANDLE h, const uint8_t *p, size_t n)
{
	while (n > 0) {
		DWORD chunk = n > (1u << 30) ? (1u << 30) : (DWORD)n, w = 0;
		if (!WriteFile(h, p, chunk, &w, NULL))
			return -msb__win_errno(GetLastError());
		p += w;
		n -= w;
	}
	return 0;
}

/* The bytes into a new hidden sibling of `leaf`, flushed, then renamed onto
 * it. -EEXIST when it exists and may not be replaced. */
static int place(const wchar_t *leaf, const uint8_t *p, size_t n, unsigned mode, bool replace)
{
	uint8_t rnd[6];
	int r = msb__plat_random(rnd, sizeof(rnd));
	if (r < 0)
		return r;
	const wchar_t *slash = wcsrchr(leaf, L'\\');
	size_t dir_len = (size_t)(slash - leaf);
	wchar_t tmp[32];
	_snwprintf(tmp, 32, L"\\.msb-landing-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		   rnd[3], rnd[4], rnd[5]);
	tmp[31] = L'\0';
	size_t tl = wcslen(tmp);
	_cleanup_free_ wchar_t *tpath = malloc((dir_len + tl + 1) * sizeof(*tpath));
	if (!tpath)
		return -ENOMEM;
	memcpy(tpath, leaf, dir_len * sizeof(*tpath));
	memcpy(tpath + dir_len, tmp, (tl + 1) * sizeof(*tpath));
	/* Windows keeps no POSIX mode: a mode without the owner's write bit
	 * lands read-only. */
	DWORD attrs = (mode & 0200) ? FILE_ATTRIBUTE_NORMAL : FILE_ATTRIBUTE_READONLY;
	HANDLE h = CreateFileW(tpath, GENERIC_WRITE, 0, NULL, CREATE_NEW,
			       attrs | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
	if (h == INVALID_HANDLE_VALUE)
		return -msb__win_errno(GetLastError());
	r = write_all(h, p, n);
	if (r == 0 && !FlushFileBuffers(h))
		r = -msb__win_errno(GetLastError());
	CloseHandle(h);
	if (r == 0 &&
	    !MoveFileExW(tpath, leaf,
			 MOVEFILE_WRITE_THROUGH | (replace ? MOVEFILE_REPLACE_EXISTING : 0)))
		r = -msb__win_errno(GetLastError());
	if (r < 0) {
		SetFileAttributesW(tpath, FILE_ATTRIBUTE_NORMAL);
		DeleteFileW(tpath);
	}
	return r;
}

int msb_fs_sink__land(fs_sink_root *r, const char *name, const uint8_t *p, size_t n, unsigned mode,
		      msb_landing_existing existing, const char **stage)
{
	HANDLE held[MAX_DEPTH];
	size_t n_held = 0;
	int rc = 0;
	const char *seg = name;
	for (const char *s = name;;) {
		const char *slash = strchr(s, '/');
		size_t len = slash ? (size_t)(slash - s) : strlen(s);
		if (!windows_name_ok(s, len))
			return FS_SINK_BAD_NAME;
		if (!slash)
			break;
		s = slash + 1;
	}
	/* The parents: made when absent, opened and judged, held. */
	for (const char *slash; rc == 0 && (slash = strchr(seg, '/'));) {
		_cleanup_free_ wchar_t *path = path_of(r, name, (size_t)(slash - name));
		if (!path) {
			rc = -ENOMEM;
			break;
		}
		*stage = "creating a parent";
		if (!CreateDirectoryW(path, NULL) && GetLastError() != ERROR_ALREADY_EXISTS) {
			rc = -msb__win_errno(GetLastError());
			break;
		}
		*stage = "opening a parent";
		HANDLE h;
		rc = open_component(path, true, &h);
		if (rc == 0) {
			if (n_held == MAX_DEPTH) {
				CloseHandle(h);
				rc = -ENAMETOOLONG;
				break;
			}
			held[n_held++] = h;
		}
		seg = slash + 1;
	}
	_cleanup_free_ wchar_t *leaf = rc == 0 ? path_of(r, name, strlen(name)) : NULL;
	if (rc == 0 && !leaf)
		rc = -ENOMEM;
	/* The leaf: a link is never landed through nor replaced. */
	if (rc == 0) {
		DWORD attrs = GetFileAttributesW(leaf);
		if (attrs != INVALID_FILE_ATTRIBUTES) {
			HANDLE h = INVALID_HANDLE_VALUE;
			int q = open_component(leaf, false, &h);
			if (h != INVALID_HANDLE_VALUE)
				CloseHandle(h);
			if (q == FS_SINK_NOT_CONFINED || is_reparse(attrs))
				rc = FS_SINK_NOT_CONFINED;
			else if (existing == MSB_LANDING_REFUSE)
				rc = FS_SINK_EXISTS;
			else if (attrs & FILE_ATTRIBUTE_DIRECTORY)
				rc = FS_SINK_IS_DIR;
		}
	}
	if (rc == 0) {
		*stage = "landing it";
		rc = place(leaf, p, n, mode, existing == MSB_LANDING_REPLACE);
		if (rc == -EEXIST)
			rc = FS_SINK_EXISTS;
		else if (rc < 0 && (GetFileAttributesW(leaf) & FILE_ATTRIBUTE_DIRECTORY) &&
			 GetFileAttributesW(leaf) != INVALID_FILE_ATTRIBUTES)
			rc = FS_SINK_IS_DIR;
	}
	while (n_held > 0)
		CloseHandle(held[--n_held]);
	return rc;
}
