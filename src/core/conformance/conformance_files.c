/* SPDX-License-Identifier: Apache-2.0 */
/* The FILES_OUT (18.4) and FILES_IN (18.5) suites. */
#include "conformance_int.h"

#define READ_CAP (1u << 20) /* nothing here is refused for its size */

static const char secret[] = "the guest must not reach this\n";
static const char inside[] = "a legitimate output\n";

#define V MSB_CAT_VALUE
#define O MSB_CAT_OS

/* ---- the layout both suites attack ------------------------------------------- */

static int plant_layout(struct cf_ctx *c, msb_error **err)
{
	_cleanup_free_ char *in = msb_conformance__in_work(c, "real/inside.txt");
	_cleanup_free_ char *plain = msb_conformance__in_work(c, "plain.txt");
	_cleanup_free_ char *sec = msb_conformance__in_outside(c, "secret.txt");
	_cleanup_free_ char *nested = msb_conformance__in_outside(c, "sub/leaf.txt");
	_cleanup_free_ char *ldir = msb_conformance__in_work(c, "link-dir");
	_cleanup_free_ char *lfile = msb_conformance__in_work(c, "link-file");
	if (!in || !plain || !sec || !nested || !ldir || !lfile)
		return msb__error_nomem(err);
	if (msb_conformance__plant_file(c, in, inside) < 0 ||
	    msb_conformance__plant_file(c, plain, "not a directory\n") < 0 ||
	    msb_conformance__plant_file(c, sec, secret) < 0 ||
	    msb_conformance__plant_file(c, nested, secret) < 0 ||
	    msb_conformance__plant_link(c, ldir, c->outside) < 0 ||
	    msb_conformance__plant_link(c, lfile, sec) < 0)
		return msb_error_set(err, MSB_E_RUNTIME, "%s", c->failure ? c->failure : "failed");
	return 0;
}

/* ---- FILES_OUT ---------------------------------------------------------------- */

static int stat_refused(struct cf_ctx *c, const char *what, const char *path, const char *wd,
			int code, unsigned cats, const char *want)
{
	bool present = false;
	msb_entry e = {0};
	msb_error *err = NULL;
	int r = msb_sandbox_stat_file(c->s->sandbox, path, wd, &present, &e, &err);
	msb_entry_clear(&e);
	return msb_conformance__refused(c, what, r, err, code, cats, want);
}

static int read_refused(struct cf_ctx *c, const char *what, const char *path, const char *wd,
			int code, unsigned cats, const char *want)
{
	uint8_t *data = NULL;
	size_t len = 0;
	msb_error *err = NULL;
	int r = msb_sandbox_read_file(c->s->sandbox, path, wd, READ_CAP, &data, &len, &err);
	if (r == 0 && len == sizeof(secret) - 1 && memcmp(data, secret, len) == 0) {
		free(data);
		msb_error_free(err);
		return cf_fail(c,
			       "%s came back with the secret's bytes from outside the "
			       "working directory",
			       what);
	}
	free(data);
	return msb_conformance__refused(c, what, r, err, code, cats, want);
}

static int list_refused(struct cf_ctx *c, const char *what, const char *path, const char *wd)
{
	msb_entry *v = NULL;
	size_t n = 0;
	msb_error *err = NULL;
	int r = msb_sandbox_list_dir(c->s->sandbox, path, wd, &v, &n, &err);
	msb_entries_free(v, r == 0 ? n : 0);
	return msb_conformance__refused(c, what, r, err, 0, V, "ValueError");
}

static int out_legit_read(struct cf_ctx *c)
{
	bool present = false;
	msb_entry e = {0};
	msb_error *err = NULL;
	int r = msb_sandbox_stat_file(c->s->sandbox, "real/inside.txt", c->work, &present, &e,
				      &err);
	if (msb_conformance__ok(c, "stat of the planted file", r, err) < 0)
		return -1;
	msb_entry_kind kind = e.kind;
	bool sized = e.size_known;
	uint64_t size = e.size_bytes;
	msb_entry_clear(&e);
	if (!present)
		return cf_fail(c, "stat of the planted file says absent: the layout did not land");
	if (kind != MSB_ENTRY_FILE)
		return cf_fail(c, "the planted regular file stats as `%s`",
			       msb_entry_kind_name(kind));
	if (!sized || size != sizeof(inside) - 1)
		return cf_fail(c, "the planted file stats as %llu bytes, not %zu",
			       (unsigned long long)size, sizeof(inside) - 1);
	uint8_t *data = NULL;
	size_t len = 0;
	r = msb_sandbox_read_file(c->s->sandbox, "real/inside.txt", c->work, READ_CAP, &data, &len,
				  &err);
	if (msb_conformance__ok(c, "reading the planted file", r, err) < 0)
		return -1;
	bool same = len == sizeof(inside) - 1 && memcmp(data, inside, len) == 0;
	free(data);
	return same ? 0 : cf_fail(c, "the planted file read back as %zu other bytes", len);
}

static int out_link_named(struct cf_ctx *c)
{
	bool present = false;
	msb_entry e = {0};
	msb_error *err = NULL;
	int r = msb_sandbox_stat_file(c->s->sandbox, "link-file", c->work, &present, &e, &err);
	if (msb_conformance__ok(c, "stat of the planted link", r, err) < 0)
		return -1;
	msb_entry_kind kind = e.kind;
	bool sized = e.size_known;
	msb_entry_clear(&e);
	if (!present)
		return cf_fail(c, "stat of the planted link says absent: the layout did not land");
	if (kind != MSB_ENTRY_SYMLINK)
		return cf_fail(c, "the link stats as `%s`, not `symlink`",
			       msb_entry_kind_name(kind));
	if (sized)
		return cf_fail(c, "the link reports a size: that is the length of the target "
				  "string, not of anything readable");
	return 0;
}

static int out_link_never_read(struct cf_ctx *c)
{
	return read_refused(c, "reading a link", "link-file", c->work, 0, O, "OSError");
}

static int out_stat_linked_parent(struct cf_ctx *c)
{
	return stat_refused(c, "stat through a linked parent", "link-dir/secret.txt", c->work, 0, V,
			    "ValueError");
}

static int out_read_linked_parent(struct cf_ctx *c)
{
	return read_refused(c, "read through a linked parent", "link-dir/secret.txt", c->work, 0, V,
			    "ValueError");
}

static int out_linked_wd(struct cf_ctx *c)
{
	_cleanup_free_ char *wd = msb_conformance__in_work(c, "link-dir");
	if (!wd)
		return cf_fail(c, "out of memory");
	if (stat_refused(c, "stat against a working directory that is itself a link", "secret.txt",
			 wd, 0, V, "ValueError") < 0)
		return -1;
	return read_refused(c, "read against a working directory that is itself a link",
			    "secret.txt", wd, 0, V, "ValueError");
}

static int out_linked_ancestor(struct cf_ctx *c)
{
	_cleanup_free_ char *wd = msb_conformance__in_work(c, "link-dir/sub");
	if (!wd)
		return cf_fail(c, "out of memory");
	if (stat_refused(c, "stat under a working directory whose ancestor is a link", "leaf.txt",
			 wd, 0, V, "ValueError") < 0)
		return -1;
	return read_refused(c, "read under a working directory whose ancestor is a link",
			    "leaf.txt", wd, 0, V, "ValueError");
}

static int out_plain_parent(struct cf_ctx *c)
{
	return stat_refused(c,
			    "stat through a regular file standing where a directory was "
			    "expected",
			    "plain.txt/deeper.txt", c->work, MSB_E_NOT_DIRECTORY, 0,
			    "NotADirectoryError");
}

static int out_list_linked_dir(struct cf_ctx *c)
{
	return list_refused(c, "listing a linked directory", "link-dir", c->work);
}

static int out_list_linked_parent(struct cf_ctx *c)
{
	return list_refused(c, "listing through a linked parent", "link-dir/sub", c->work);
}

static int out_list_linked_ancestor(struct cf_ctx *c)
{
	_cleanup_free_ char *wd = msb_conformance__in_work(c, "link-dir/sub");
	if (!wd)
		return cf_fail(c, "out of memory");
	return list_refused(c, "listing a working directory whose ancestor is a link", ".", wd);
}

static int out_listing_names_links(struct cf_ctx *c)
{
	msb_entry *v = NULL;
	size_t n = 0;
	msb_error *err = NULL;
	int r = msb_sandbox_list_dir(c->s->sandbox, ".", c->work, &v, &n, &err);
	if (msb_conformance__ok(c, "listing the working directory", r, err) < 0)
		return -1;
	int found = -1;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].path, "link-file") == 0)
			found = (int)v[i].kind;
	msb_entries_free(v, n);
	if (found < 0)
		return cf_fail(c, "the working directory's listing does not name `link-file` at "
				  "all: hiding a link leaves a caller a name with no warning");
	if (found != MSB_ENTRY_SYMLINK)
		return cf_fail(c, "`link-file` is listed as `%s`, not `symlink`",
			       msb_entry_kind_name((msb_entry_kind)found));
	return 0;
}

#define OUT MSB_CAP_FILES_OUT
#define LIST (MSB_CAP_FILES_OUT | MSB_CAP_FILES_LIST)

static const struct cf_probe files_out_probes[] = {
	{"a-legitimate-read-still-works",
	 "every other probe asserts a refusal, and a backend that refused everything would pass "
	 "them all; this one fails if the hostile layout never landed",
	 OUT, out_legit_read},
	{"a-link-is-named-a-link",
	 "a caller above the backend has to tell an escape from a fifo, and `other` cannot say "
	 "which",
	 OUT, out_link_named},
	{"a-link-is-never-read",
	 "a link is refused whether or not its target would resolve somewhere legitimate: that "
	 "judgement needs the guest's filesystem, which the reader does not see",
	 OUT, out_link_never_read},
	{"stat-through-a-linked-parent",
	 "the natural, wrong reading of the rule: with out -> /etc, out/hostname stats as a "
	 "regular file, so a type and a size from outside cross",
	 OUT, out_stat_linked_parent},
	{"read-through-a-linked-parent",
	 "the same escape with the bytes attached, the one that empties the guest", OUT,
	 out_read_linked_parent},
	{"a-linked-working-directory",
	 "the working directory is a component too: classifying only the parents of the path "
	 "never looks at the directory it resolved against",
	 OUT, out_linked_wd},
	{"a-linked-ancestor-of-the-working-directory",
	 "the walk starts above the working directory: a nested one has ancestors the guest can "
	 "replace (the /maf-sandbox -> / case)",
	 OUT, out_linked_ancestor},
	{"a-plain-parent-is-not-an-escape",
	 "the refusal must name the right fault: a file where a directory was expected is an "
	 "ordinary ENOTDIR, not an attack",
	 OUT, out_plain_parent},
	{"listing-a-linked-directory",
	 "enumeration passes through a link as readily as a read, so list_dir walks the listed "
	 "directory too",
	 LIST, out_list_linked_dir},
	{"listing-through-a-linked-parent",
	 "a listing hands back names a caller goes on to read, so the duty holds there too", LIST,
	 out_list_linked_parent},
	{"listing-under-a-linked-ancestor",
	 "the third entry point's duty for the ancestor case as well as the path's own", LIST,
	 out_list_linked_ancestor},
	{"a-listing-names-its-links",
	 "a link inside the working directory is reported, not hidden: a name with its type "
	 "erased is read without the warning",
	 LIST, out_listing_names_links},
};

const struct cf_suite msb_conformance__files_out = {
	MSB_SUITE_FILES_OUT, MSB_CAP_FILES_OUT, files_out_probes, MSB_ARRAY_SIZE(files_out_probes),
	plant_layout,
};

/* ---- FILES_IN ------------------------------------------------------------------ */

static int write_rel(struct cf_ctx *c, const char *rel, const void *data, size_t len,
		     const char *what)
{
	msb_error *err = NULL;
	int r = msb_sandbox_write_file(c->s->sandbox, rel, data, len, c->work, &err);
	return msb_conformance__ok(c, what, r, err);
}

static int write_refused(struct cf_ctx *c, const char *what, const char *path, const char *wd)
{
	static const char payload[] = "must not land\n";
	msb_error *err = NULL;
	int r = msb_sandbox_write_file(c->s->sandbox, path, (const uint8_t *)payload,
				       sizeof(payload) - 1, wd, &err);
	return msb_conformance__refused(c, what, r, err, 0, V, "ValueError");
}

static int in_lands(struct cf_ctx *c)
{
	if (write_rel(c, "real/written.txt", "written", 7, "writing real/written.txt") < 0)
		return -1;
	bool yes = false;
	if (msb_conformance__test(c, "-f", "real/written.txt", &yes) < 0)
		return -1;
	if (!yes)
		return cf_fail(c, "the written file is not visible at its guest path");
	return msb_conformance__cat_is(c, "real/written.txt", (const uint8_t *)"written", 7,
				       "the written file");
}

static int in_bytes(struct cf_ctx *c)
{
	uint8_t all[256];
	for (size_t i = 0; i < sizeof(all); i++)
		all[i] = (uint8_t)i;
	if (write_rel(c, "binary.bin", all, sizeof(all), "writing 256 bytes") < 0)
		return -1;
	return msb_conformance__cat_is(c, "binary.bin", all, sizeof(all),
				       "every byte value 0..255, NUL and CR included");
}

static int in_utf8(struct cf_ctx *c)
{
	static const char text[] = "na\xc3\xafve \xe2\x86\x92 \xf0\x9f\x93\x84\n";
	if (write_rel(c, "text.txt", text, sizeof(text) - 1, "writing UTF-8 text") < 0)
		return -1;
	return msb_conformance__cat_is(c, "text.txt", (const uint8_t *)text, sizeof(text) - 1,
				       "UTF-8 text");
}

static int in_replaces(struct cf_ctx *c)
{
	if (write_rel(c, "overwritten.txt", "first, and longer", 17, "the first write") < 0 ||
	    write_rel(c, "overwritten.txt", "second", 6, "the second write") < 0)
		return -1;
	return msb_conformance__cat_is(c, "overwritten.txt", (const uint8_t *)"second", 6,
				       "an overwritten file");
}

static int in_parents(struct cf_ctx *c)
{
	if (write_rel(c, "deep/er/est/leaf.txt", "deep", 4, "writing under missing parents") < 0)
		return -1;
	bool yes = false;
	if (msb_conformance__test(c, "-f", "deep/er/est/leaf.txt", &yes) < 0)
		return -1;
	return yes ? 0 : cf_fail(c, "a write under missing parents did not create them");
}

static int in_outside(struct cf_ctx *c)
{
	_cleanup_free_ char *rel = msb_conformance__outside_rel(c, "written-outside.txt");
	if (!rel)
		return cf_fail(c, "out of memory");
	if (write_refused(c, "writing a path outside the working directory", rel, c->work) < 0)
		return -1;
	return msb_conformance__absent(c, rel, "a refused outside write landed anyway");
}

static int in_linked_parent(struct cf_ctx *c)
{
	if (write_refused(c, "writing through a linked parent", "link-dir/through.txt", c->work) <
	    0)
		return -1;
	_cleanup_free_ char *rel = msb_conformance__outside_rel(c, "through.txt");
	return rel ? msb_conformance__absent(c, rel, "the refused write crossed the link")
		   : cf_fail(c, "out of memory");
}

static int in_linked_destination(struct cf_ctx *c)
{
	if (write_refused(c, "writing onto a link", "link-file", c->work) < 0)
		return -1;
	_cleanup_free_ char *rel = msb_conformance__outside_rel(c, "secret.txt");
	return rel ? msb_conformance__cat_is(c, rel, (const uint8_t *)secret, sizeof(secret) - 1,
					     "the link's target outside the working directory")
		   : cf_fail(c, "out of memory");
}

static int in_wd_itself(struct cf_ctx *c)
{
	if (write_refused(c, "writing the working directory itself", ".", c->work) < 0)
		return -1;
	bool yes = false;
	if (msb_conformance__test(c, "-d", ".", &yes) < 0)
		return -1;
	return yes ? 0 : cf_fail(c, "the working directory is no longer a directory");
}

static int in_backslash(struct cf_ctx *c)
{
	if (write_refused(c, "writing a path with a backslash", "a\\b", c->work) < 0)
		return -1;
	return msb_conformance__absent(c, "a\\b", "a refused backslash name landed anyway");
}

static int in_linked_wd(struct cf_ctx *c)
{
	_cleanup_free_ char *wd = msb_conformance__in_work(c, "link-dir");
	_cleanup_free_ char *rel = msb_conformance__outside_rel(c, "via-linked-wd.txt");
	if (!wd || !rel)
		return cf_fail(c, "out of memory");
	if (write_refused(c, "writing against a working directory that is a link",
			  "via-linked-wd.txt", wd) < 0)
		return -1;
	return msb_conformance__absent(c, rel, "the refused write landed behind the link");
}

static int in_linked_ancestor(struct cf_ctx *c)
{
	_cleanup_free_ char *wd = msb_conformance__in_work(c, "link-dir/sub");
	_cleanup_free_ char *rel = msb_conformance__outside_rel(c, "sub/via-ancestor.txt");
	if (!wd || !rel)
		return cf_fail(c, "out of memory");
	if (write_refused(c, "writing under a working directory whose ancestor is a link",
			  "via-ancestor.txt", wd) < 0)
		return -1;
	return msb_conformance__absent(c, rel,
				       "the refused write landed behind the linked ancestor");
}

#define IN (MSB_CAP_FILES_IN | MSB_CAP_EXEC)

static const struct cf_probe files_in_probes[] = {
	{"a-write-lands-and-reads-back",
	 "every other FILES_IN probe reads a file back, so one that never landed would fail them "
	 "all for the wrong reason; this names the landing itself",
	 IN, in_lands},
	{"bytes-survive-the-round-trip",
	 "FILES_IN carries bytes, and a text-shaped hop (CRLF, a decode, a NUL cut) corrupts a "
	 "binary in-door in ways a caller cannot detect",
	 IN, in_bytes},
	{"str-content-is-utf8",
	 "text is UTF-8 whatever the host's locale: a transport re-encoding it answers every "
	 "non-ASCII write with mojibake",
	 IN, in_utf8},
	{"a-second-write-replaces",
	 "a fix-loop writes the same path twice and the second answer must be the whole file, not "
	 "an append or a tail of the first",
	 IN, in_replaces},
	{"parents-are-created",
	 "a declared path names directories the workload never made; refusing them pushes "
	 "directory creation onto every kind",
	 IN, in_parents},
	{"a-path-outside-is-refused",
	 "the boundary itself: `../` out of the working directory into a sibling that shares its "
	 "string prefix",
	 IN, in_outside},
	{"a-linked-parent-is-refused",
	 "a parent the guest made a link satisfies every lexical test and still writes outside", IN,
	 in_linked_parent},
	{"a-linked-destination-is-refused-not-followed",
	 "writing onto a link the guest planted would overwrite the file it points at, outside "
	 "the working directory",
	 IN, in_linked_destination},
	{"the-working-directory-is-refused",
	 "the working directory is the confinement root, never a file to replace", IN,
	 in_wd_itself},
	{"a-backslash-is-refused",
	 "guest paths are POSIX; a backslash is a separator on one side and a name byte on the "
	 "other, so it is refused rather than guessed",
	 IN, in_backslash},
	{"a-linked-working-directory-is-refused",
	 "the working directory is a component too; a write resolved against a linked one lands "
	 "wherever the guest pointed it",
	 IN, in_linked_wd},
	{"a-linked-ancestor-of-the-working-directory-is-refused",
	 "the walk starts above the working directory: an ancestor the guest replaced by a link "
	 "carries every write with it",
	 IN, in_linked_ancestor},
};

const struct cf_suite msb_conformance__files_in = {
	MSB_SUITE_FILES_IN, MSB_CAP_FILES_IN, files_in_probes, MSB_ARRAY_SIZE(files_in_probes),
	plant_layout,
};
