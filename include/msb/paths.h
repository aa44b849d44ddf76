/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/paths.h - guest path helpers (checklist 10.12-10.18). Reached by name:
 * msb/msb.h does not include this header.
 *
 * Guest grammar is POSIX whatever the host is: "/" separates, no drive
 * letters, a backslash is refused. These are lexical except the two walks,
 * which take an unconfined, no-follow stat callback (9.31).
 */
#ifndef MSB_PATHS_H
#define MSB_PATHS_H

#include <msb/common.h>
#include <msb/error.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

/* posixpath.normpath: collapses "//", "." and ".." lexically. Newly allocated;
 * NULL on allocation failure or NULL input. "" normalises to ".". Unlike
 * Python, a leading "//" collapses to "/" too (Linux guests read it so). */
MSB_EXTERN char *msb_guest_normpath(const char *path);

/* Join `path` onto `wd`, normalise, refuse a backslash or anything that is not
 * wd or beneath it (MSB_E_VALUE). wd must be absolute. An absolute path
 * inside wd is accepted (9.12). *out is the resolved absolute path. */
MSB_EXTERN int msb_confine_guest_path(const char *path, const char *wd, char **out,
				      msb_error **err);

/* "" when equal, the relative remainder for a descendant, *out = NULL
 * otherwise (a sibling sharing a string prefix is not a descendant). */
MSB_EXTERN int msb_guest_path_relative_to(const char *path, const char *base, char **out,
					  msb_error **err);

/* Every directory from the root down to `path`, outermost first, starting
 * above wd (10.14): ("/m/w/a/b", "/m/w") -> /m, /m/w, /m/w/a, /m/w/a/b.
 * A relative path is joined onto wd (absolute) first; "/" itself is never
 * listed. Lexical: no confinement check. *out is an msb_strv. */
MSB_EXTERN int msb_guest_directory_chain(const char *path, const char *wd, char ***out,
					 msb_error **err);

/* An unconfined, no-follow stat of an absolute guest path. */
typedef int (*msb_guest_lstat_fn)(void *userdata, const char *abs_path, bool *present,
				  msb_entry_kind *kind, msb_error **err);

/* Walk the parents of `path` (10.15), from the root down, with `lstat`: a
 * link -> MSB_E_VALUE; another non-directory -> MSB_E_NOT_DIRECTORY; a
 * missing component ends the walk (success). include_self extends the walk
 * to `path` itself. A relative path is joined onto wd; errors from lstat
 * are passed through. */
MSB_EXTERN int msb_refuse_symlinked_parents(msb_guest_lstat_fn lstat, void *userdata,
					    const char *path, const char *wd, bool include_self,
					    msb_error **err);

/* confine + refuse wd itself + parent walk + refuse a leaf link (10.16). */
MSB_EXTERN int msb_confine_guest_write_path(msb_guest_lstat_fn lstat, void *userdata,
					    const char *path, const char *wd, char **out,
					    msb_error **err);

MSB_END_DECLS

#endif
