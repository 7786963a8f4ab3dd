/*
 * Fault injection for the tests, loaded with LD_PRELOAD: socket, accept,
 * accept4 and connect fail with a chosen errno while PMCA_TEST_FAULT names
 * them, exactly as the kernel's own failure reaches the caller (-1, errno).
 *
 * PMCA_TEST_FAULT="call:errno[:pass]" is read at every call, so a process
 * turns the faults on when it wants them to begin (os.environ): of the calls
 * of `call` made while it names that call, the first `pass` (default 0) go
 * through, and every later one fails with `errno`.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int injected(const char *call, long *seen)
{
    const char *spec = getenv("PMCA_TEST_FAULT");
    size_t length = strlen(call);
    if (spec == NULL || strncmp(spec, call, length) != 0 || spec[length] != ':')
        return 0;
    char *end;
    long code = strtol(spec + length + 1, &end, 10);
    long pass = *end == ':' ? strtol(end + 1, NULL, 10) : 0;
    return (*seen)++ < pass ? 0 : (int)code;
}

#define FAIL_IF_NAMED(call)                   \
    do {                                      \
        static long seen;                     \
        int code = injected(#call, &seen);    \
        if (code != 0) {                      \
            errno = code;                     \
            return -1;                        \
        }                                     \
    } while (0)

#define REAL(call) ((__typeof__(&call))dlsym(RTLD_NEXT, #call))

int socket(int domain, int type, int protocol)
{
    FAIL_IF_NAMED(socket);
    return REAL(socket)(domain, type, protocol);
}

int accept(int fd, struct sockaddr *address, socklen_t *length)
{
    FAIL_IF_NAMED(accept);
    return REAL(accept)(fd, address, length);
}

int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags)
{
    FAIL_IF_NAMED(accept4);
    return REAL(accept4)(fd, address, length, flags);
}

int connect(int fd, const struct sockaddr *address, socklen_t length)
{
    FAIL_IF_NAMED(connect);
    return REAL(connect)(fd, address, length);
}
