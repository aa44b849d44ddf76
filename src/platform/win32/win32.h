/* SPDX-License-Identifier: Apache-2.0 */
/* What the Windows-only sources share beside platform/platform.h. */
#ifndef MSB_PLATFORM_WIN32_H
#define MSB_PLATFORM_WIN32_H

#include <wchar.h>

/* s (UTF-8) as UTF-16, newly allocated (free()); NULL with errno EINVAL
 * when s is not UTF-8, ENOMEM without memory. */
wchar_t *msb__win_wide(const char *s);

/* A Win32 error code (GetLastError) as an errno value. */
int msb__win_errno(unsigned long code);

#endif
