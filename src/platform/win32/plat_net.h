/* SPDX-License-Identifier: Apache-2.0 */
/* The socket address types (struct sockaddr_storage, AF_INET, AF_INET6,
 * in6_addr) and inet_pton/inet_ntop on Windows, from Winsock. Its POSIX form is
 * platform/posix/plat_net.h; the build system puts one of the two folders on
 * the include path. */
#ifndef MSB_PLAT_NET_H
#define MSB_PLAT_NET_H

#include <winsock2.h>
#include <ws2tcpip.h>

#endif
