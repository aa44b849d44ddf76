/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A recording stand-in for wslc.exe (tests/windows/test_wslc_spawn.c): it
 * writes the arguments Windows split from its command line
 * (CommandLineToArgvW, the rules a real wslc.exe's runtime applies) to the
 * file named by MSB_STANDIN_RECORD, each UTF-8 and NUL-terminated, then
 * does what the file named by MSB_STANDIN_SCRIPT says, a line at a time:
 *   out TEXT    write TEXT to stdout        err TEXT   to stderr
 *   cat         copy stdin to stdout        flood N    N bytes of 'x' to stdout
 *   hang        sleep until killed          exit N     exit with code N
 *   tar-dir NAME        a tar header of directory NAME on stdout (a stat)
 *   tar-file NAME TEXT  a one-file archive of NAME holding TEXT (a read)
 *   save PATH   copy stdin to the file PATH (a write's archive)
 *   when PREFIX the lines up to the next `when` apply only to a call whose
 *               arguments, joined by spaces, begin with PREFIX; the first
 *               section that matches is the only one run
 * and exits 0 at the end of the script. With MSB_STANDIN_LOG it also appends
 * its arguments, joined by spaces, as one line to that file: one script
 * then answers a backend's whole sequence of calls (test_wslc_backend.c).
 */
#include <windows.h>

#include <shellapi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(HANDLE h, const void *p, DWORD n)
{
	DWORD w;
	while (n > 0 && WriteFile(h, p, n, &w, NULL) && w > 0) {
		p = (const char *)p + w;
		n -= w;
	}
}

static void record(const char *path)
{
	int argc = 0;
	wchar_t **wargv = CommandLineToArgvW(GetCommandLineW(), &argc);
	FILE *f = fopen(path, "wb");
	if (!f || !wargv)
		exit(90);
	for (int i = 1; i < argc; i++) {
		char buf[4096];
		int n = WideCharToMultiByte(CP_UTF8, 0, wargv[i], -1, buf, sizeof(buf), NULL, NULL);
		if (n <= 0)
			exit(91);
		fwrite(buf, 1, (size_t)n, f); /* n counts the NUL */
	}
	fclose(f);
	LocalFree(wargv);
}

static char joined[8192];

/* The arguments as UTF-8, joined by spaces, into `joined`. */
static void join_args(void)
{
	int argc = 0;
	wchar_t **wargv = CommandLineToArgvW(GetCommandLineW(), &argc);
	if (!wargv)
		exit(92);
	size_t used = 0;
	for (int i = 1; i < argc; i++) {
		char buf[4096];
		int n = WideCharToMultiByte(CP_UTF8, 0, wargv[i], -1, buf, sizeof(buf), NULL, NULL);
		if (n <= 0 || used + (size_t)n + 1 >= sizeof(joined))
			exit(93);
		if (i > 1)
			joined[used++] = ' ';
		memcpy(joined + used, buf, (size_t)n); /* n counts the NUL */
		used += (size_t)n - 1;
	}
	LocalFree(wargv);
}

static void log_call(const char *path)
{
	FILE *f = fopen(path, "ab");
	if (!f)
		exit(94);
	fprintf(f, "%s\n", joined);
	fclose(f);
}

/* A ustar header (the fields the engine core reads) for NAME, type and size. */
static void tar_header(unsigned char h[512], const char *name, char type, size_t size)
{
	memset(h, 0, 512);
	snprintf((char *)h, 100, "%s", name);
	memcpy(h + 100, "0000755", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)size);
	memcpy(h + 136, "00000000000", 12);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
}

static void tar_file(HANDLE out, const char *name, const char *text)
{
	unsigned char h[512];
	size_t len = strlen(text);
	tar_header(h, name, '0', len);
	put(out, h, 512);
	put(out, text, (DWORD)len);
	static const unsigned char zeros[1024 + 512];
	put(out, zeros, (DWORD)((512 - len % 512) % 512 + 1024));
}

static void save_stdin(const char *path)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		exit(95);
	char buf[4096];
	DWORD n;
	HANDLE in = GetStdHandle(STD_INPUT_HANDLE);
	while (ReadFile(in, buf, sizeof(buf), &n, NULL) && n > 0)
		fwrite(buf, 1, n, f);
	fclose(f);
}

int main(void)
{
	const char *rec = getenv("MSB_STANDIN_RECORD");
	const char *script = getenv("MSB_STANDIN_SCRIPT");
	const char *log = getenv("MSB_STANDIN_LOG");
	if (rec)
		record(rec);
	join_args();
	if (log)
		log_call(log);
	bool on = true, matched = false;
	FILE *f = script ? fopen(script, "rb") : NULL;
	HANDLE out = GetStdHandle(STD_OUTPUT_HANDLE), err = GetStdHandle(STD_ERROR_HANDLE);
	char line[1024];
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (strncmp(line, "when ", 5) == 0) {
			if (matched)
				break; /* the first section that matches is the answer */
			on = matched = strncmp(joined, line + 5, strlen(line + 5)) == 0;
		} else if (!on) {
			continue;
		} else if (strncmp(line, "tar-dir ", 8) == 0) {
			unsigned char h[512];
			tar_header(h, line + 8, '5', 0);
			put(out, h, 512);
		} else if (strncmp(line, "tar-file ", 9) == 0) {
			char *sp = strchr(line + 9, ' ');
			if (!sp)
				return 96;
			*sp = '\0';
			tar_file(out, line + 9, sp + 1);
		} else if (strncmp(line, "save ", 5) == 0) {
			save_stdin(line + 5);
		} else if (strncmp(line, "out ", 4) == 0) {
			put(out, line + 4, (DWORD)strlen(line + 4));
		} else if (strncmp(line, "err ", 4) == 0) {
			put(err, line + 4, (DWORD)strlen(line + 4));
		} else if (strcmp(line, "cat") == 0) {
			char buf[4096];
			DWORD n;
			HANDLE in = GetStdHandle(STD_INPUT_HANDLE);
			while (ReadFile(in, buf, sizeof(buf), &n, NULL) && n > 0)
				put(out, buf, n);
		} else if (strncmp(line, "flood ", 6) == 0) {
			static char xs[65536];
			memset(xs, 'x', sizeof(xs));
			for (long left = strtol(line + 6, NULL, 10); left > 0;) {
				DWORD n = left > (long)sizeof(xs) ? (DWORD)sizeof(xs) : (DWORD)left;
				put(out, xs, n);
				left -= n;
			}
		} else if (strcmp(line, "hang") == 0) {
			Sleep(INFINITE);
		} else if (strncmp(line, "exit ", 5) == 0) {
			return (int)strtol(line + 5, NULL, 10);
		}
	}
	return 0;
}
