/* A wait's polling phase without the GIL.
 *
 * While a blocking p2p call waits for a btl whose input arrives on file
 * descriptors (tcp's sockets), the engine polls them here, in C, for a
 * short slice: the caller releases the GIL for the whole slice (ctypes'
 * CFUNCTYPE), so another thread of the process (a tool reading
 * performance variables, a progress thread) takes the GIL at once
 * instead of waking up to find it taken again after every short
 * system call of a Python polling loop. The answer names the descriptors
 * found ready, so the progress call that follows reads those without
 * asking the kernel again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

/* Descriptors polled from the stack; more are polled from the heap. */
#define PMCA_SPIN_STACK_FDS 64
/* Polls between two reads of the clock (every poll when yielding: one
 * sched_yield may give the processor away for a whole time slice). */
#define PMCA_SPIN_CLOCK_EVERY 16

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

EXPORT unsigned pmca_bml_spin_abi(void) { return 3; }

/* Descriptors whose readiness the answer names one by one (bits 0..61). */
#define PMCA_SPIN_NAMED 62

/* Which of polled[0..nfds) have something: bit i for polled[i], or -1 when
 * one beyond the named ones does (the caller then looks for itself). */
static int64_t ready_mask(const struct pollfd *polled, uint32_t nfds)
{
    int64_t mask = 0;
    for (uint32_t i = 0; i < nfds; i++) {
        if (polled[i].revents == 0)
            continue;
        if (i >= PMCA_SPIN_NAMED)
            return -1;
        mask |= (int64_t)1 << i;
    }
    return mask;
}

/* Poll fds[0..nfds) for input (or an error, or a hang-up) until one has it or
 * nanoseconds pass, yielding the processor between polls when give_way.
 * 0 when the time is up; when some descriptor is ready, which ones: bit i
 * set for fds[i] (so the caller reads those without polling again); -1 when
 * that cannot be said (a ready descriptor beyond the first 62), and when
 * poll() fails or memory runs short: the caller then looks for itself (its
 * Python progress call), as it would without this library. */
EXPORT int64_t pmca_bml_spin(const int *fds, uint32_t nfds, int64_t nanoseconds, int give_way)
{
    struct pollfd stack[PMCA_SPIN_STACK_FDS];
    struct pollfd *polled = stack;
    if (nfds > PMCA_SPIN_STACK_FDS) {
        polled = malloc(sizeof(*polled) * nfds);
        if (polled == NULL)
            return -1;
    }
    for (uint32_t i = 0; i < nfds; i++) {
        polled[i].fd = fds[i];
        polled[i].events = POLLIN;
        polled[i].revents = 0;
    }
    const int64_t deadline = now_ns() + (nanoseconds > 0 ? nanoseconds : 0);
    int64_t status = 0;
    for (unsigned round = 1;; round++) {
        int ready = poll(polled, nfds, 0);
        if (ready > 0) {
            status = ready_mask(polled, nfds);
            break;
        }
        if (ready < 0) {
            status = -1; /* failed (EINTR: a signal for Python to handle) */
            break;
        }
        if (give_way)
            sched_yield();
        if ((give_way || round % PMCA_SPIN_CLOCK_EVERY == 0) && now_ns() >= deadline)
            break;
    }
    if (polled != stack)
        free(polled);
    return status;
}

/* Move a bulk body between socket fd and memory as the peer makes way:
 * read into buffer[0..length) (write 0) as the sender's writes bring it,
 * or write it (write 1) as the reader makes room.  Each recv or send takes
 * what the socket can, and while it can take nothing the socket is asked
 * again (yielding the processor between asks when give_way) until idle_ns
 * pass with no byte moved, or most_ns in all.  One call, without the GIL,
 * replaces a Python round (progress, a recv_into or sendmsg, the exception
 * of a socket with nothing to give or no room) per piece of the body.
 * The bytes moved (0: none in time); when none were, -ECONNRESET for a
 * peer that closed (reading) and -errno for a failed call (with bytes
 * moved, the next call meets the end or the error again). */
EXPORT int64_t pmca_bml_stream(int fd, void *buffer, uint64_t length, int write, int64_t idle_ns,
                               int64_t most_ns, int give_way)
{
    uint64_t done = 0;
    int64_t began = 0, heard = 0;
    for (unsigned round = 1; done < length; round++) {
        char *at = (char *)buffer + done;
        ssize_t got = write ? send(fd, at, length - done, MSG_DONTWAIT | MSG_NOSIGNAL)
                            : recv(fd, at, length - done, MSG_DONTWAIT);
        if (got > 0) {
            done += (uint64_t)got;
            heard = 0; /* the idle time counts again from the next empty ask */
            continue;
        }
        if (got == 0 && !write)
            return done ? (int64_t)done : -ECONNRESET;
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return done ? (int64_t)done : -errno;
        if (idle_ns <= 0)
            break;
        if (give_way)
            sched_yield();
        else if (heard != 0 && round % PMCA_SPIN_CLOCK_EVERY != 0)
            continue;
        int64_t now = now_ns();
        if (began == 0)
            began = now;
        if (heard == 0)
            heard = now;
        else if (now - heard >= idle_ns || now - began >= most_ns)
            break;
    }
    return (int64_t)done;
}
