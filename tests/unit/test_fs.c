/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/util/fs.c on trees a guest writes (issue 15, STYLE "The guest is
 * hostile"): recursive removal never follows a planted link or leaves the
 * tree, also while the tree is swapped under it; an anonymous file is linked
 * into place without following a link at the name and leaves nothing behind.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/fs.h"

static char tmp[128];	   /* the guest-writable tree's parent */
static char tree[160];	   /* the tree */
static char outside[160];  /* a host directory a link points at */
static char sentinel[192]; /* a host file in it */

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/msb-fs-%d-XXXXXX", (int)getpid());
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(tree, sizeof(tree), "%s/tree", tmp);
	snprintf(outside, sizeof(outside), "%s/outside", tmp);
	snprintf(sentinel, sizeof(sentinel), "%s/sentinel", outside);
	cr_assert_eq(mkdir(outside, 0700), 0);
	int fd = open(sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fchmod(fd, 0600), 0);
	cr_assert_eq(write(fd, "sentinel", 8), 8);
	close(fd);
}

static void teardown(void)
{
	msb__rm_rf(tmp);
}

TestSuite(fs, .init = setup, .fini = teardown, .timeout = 60);

/* The outside directory holds exactly the sentinel, unchanged. */
static void outside_unchanged(void)
{
	struct stat st;
	cr_assert_eq(lstat(sentinel, &st), 0, "the sentinel is gone");
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "the sentinel's mode is %o", st.st_mode & 07777);
	cr_assert_eq(st.st_size, 8);
	cr_assert_eq(lstat(outside, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "the outside directory's mode is %o",
		     st.st_mode & 07777);
	char buf[16] = {0};
	int fd = open(sentinel, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(read(fd, buf, sizeof(buf) - 1), 8);
	close(fd);
	cr_assert_str_eq(buf, "sentinel");
	DIR *d = opendir(outside);
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	cr_assert_eq(n, 1, "the outside directory holds %d entries", n);
}

static void mk(const char *rel, mode_t mode)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", tree, rel);
	cr_assert_eq(mkdir(p, mode), 0, "mkdir %s", p);
}

static void ln(const char *target, const char *rel)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", tree, rel);
	cr_assert_eq(symlink(target, p), 0, "symlink %s", p);
}

static void put(const char *rel)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", tree, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0, "create %s", p);
	close(fd);
}

Test(fs, rm_rf_never_follows_a_planted_link)
{
	cr_assert_eq(mkdir(tree, 0755), 0);
	mk("a", 0755);
	mk("a/b", 0755);
	mk("a/b/c", 0755);
	put("a/b/c/f");
	ln(outside, "link-dir");
	ln(outside, "a/b/link-dir");
	ln(sentinel, "a/link-file");
	ln("/nonexistent/x", "a/b/dangling");
	ln("..", "a/b/c/up");
	mk("a/closed", 0755);
	put("a/closed/f");
	ln(outside, "a/closed/link-dir");
	char p[256];
	snprintf(p, sizeof(p), "%s/a/closed", tree);
	cr_assert_eq(chmod(p, 0), 0);
	snprintf(p, sizeof(p), "%s/fifo", tree);
	cr_assert_eq(mkfifo(p, 0600), 0);
	cr_assert_eq(msb__rm_rf(tree), 0);
	struct stat st;
	cr_assert_neq(lstat(tree, &st), 0, "the tree is gone");
	outside_unchanged();
}

Test(fs, rm_rf_of_a_link_removes_the_link)
{
	cr_assert_eq(symlink(outside, tree), 0);
	cr_assert_eq(msb__rm_rf(tree), 0);
	struct stat st;
	cr_assert_neq(lstat(tree, &st), 0);
	outside_unchanged();
}

/* A guest loop swapping directories of the tree for links to the outside
 * (and renaming them about) while the host removes the tree, again and
 * again: a removal may fail, it never reaches outside. */
static volatile int swapping;

static void *swap_loop(void *arg)
{
	(void)arg;
	char x[256], y[256], f[256];
	snprintf(x, sizeof(x), "%s/d/x", tree);
	snprintf(y, sizeof(y), "%s/d/y", tree);
	snprintf(f, sizeof(f), "%s/d/x/f", tree);
	while (swapping) {
		if (mkdir(x, 0755) == 0)
			close(open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
		(void)!rename(x, y);
		(void)!symlink(outside, x);
		(void)!rename(y, x);
		(void)!unlink(x);
		(void)!symlink(sentinel, x);
		(void)!unlink(x);
	}
	return NULL;
}

Test(fs, rm_rf_under_a_swap_loop_stays_in_the_tree, .timeout = 120)
{
	swapping = 1;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, swap_loop, NULL), 0);
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	unsigned rounds = 0, removed = 0;
	do {
		(void)!mkdir(tree, 0755);
		char d[256];
		snprintf(d, sizeof(d), "%s/d", tree);
		(void)!mkdir(d, 0755);
		removed += msb__rm_rf(tree) == 0;
		rounds++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec < 3);
	swapping = 0;
	pthread_join(t, NULL);
	msb__rm_rf(tree);
	outside_unchanged();
	cr_assert_gt(removed, 0, "no removal of %u succeeded", rounds);
}

/* ---- anonymous files ---------------------------------------------------------- */

static int dir_fd(void)
{
	(void)!mkdir(tree, 0755);
	int fd = open(tree, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	return fd;
}

static void read_back(const char *rel, const char *want)
{
	char p[256], buf[64] = {0};
	snprintf(p, sizeof(p), "%s/%s", tree, rel);
	struct stat st;
	cr_assert_eq(lstat(p, &st), 0, "%s", p);
	cr_assert(S_ISREG(st.st_mode), "%s is not a regular file", p);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	cr_assert_str_eq(buf, want);
}

static int anonymous(int dfd, const char *text)
{
	int fd = msb__tmpfile_open(dfd, 0640);
	cr_assert_geq(fd, 0, "O_TMPFILE: %s", strerror(-fd));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	return fd;
}

/* Only the names the test made: no private name is left behind. */
static void only(int n_names)
{
	DIR *d = opendir(tree);
	int n = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		cr_assert(strncmp(de->d_name, ".msb-test-", 10) != 0, "left behind: %s",
			  de->d_name);
		n++;
	}
	closedir(d);
	cr_assert_eq(n, n_names);
}

Test(fs, an_anonymous_file_has_no_name_until_linked)
{
	int dfd = dir_fd();
	int fd = anonymous(dfd, "one");
	only(0);
	cr_assert_eq(msb__tmpfile_link(fd, dfd, "f", false, ".msb-test-"), 0);
	close(fd);
	read_back("f", "one");
	struct stat st;
	char p[256];
	snprintf(p, sizeof(p), "%s/f", tree);
	cr_assert_eq(stat(p, &st), 0);
	mode_t mask = umask(0);
	umask(mask);
	cr_assert_eq(st.st_mode & 0777, 0640 & ~mask);
	/* Without replace an existing name is refused; with it, replaced. */
	fd = anonymous(dfd, "two");
	cr_assert_eq(msb__tmpfile_link(fd, dfd, "f", false, ".msb-test-"), -EEXIST);
	read_back("f", "one");
	cr_assert_eq(msb__tmpfile_link(fd, dfd, "f", true, ".msb-test-"), 0);
	close(fd);
	read_back("f", "two");
	only(1);
	close(dfd);
}

Test(fs, a_link_at_the_name_is_replaced_never_followed)
{
	int dfd = dir_fd();
	ln(sentinel, "l");
	ln("/nonexistent/x", "dangling");
	int fd = anonymous(dfd, "mine");
	cr_assert_eq(msb__tmpfile_link(fd, dfd, "l", false, ".msb-test-"), -EEXIST);
	cr_assert_eq(msb__tmpfile_link(fd, dfd, "dangling", false, ".msb-test-"), -EEXIST);
	cr_assert_eq(msb__tmpfile_link(fd, dfd, "l", true, ".msb-test-"), 0);
	cr_assert_eq(msb__tmpfile_link(fd, dfd, "dangling", true, ".msb-test-"), 0);
	close(fd);
	read_back("l", "mine");
	read_back("dangling", "mine");
	outside_unchanged();
	/* A directory at the name is not replaced. */
	mk("dir", 0755);
	fd = anonymous(dfd, "x");
	cr_assert_eq(msb__tmpfile_link(fd, dfd, "dir", true, ".msb-test-"), -EISDIR);
	close(fd);
	only(3);
	close(dfd);
}
