/* The physical floor under pmca's ping-pong benchmarks: no Python, no MPI.
 *
 *   floor tcp    BUDGET SIZE...   two processes, one TCP connection on 127.0.0.1
 *   floor shm    BUDGET SIZE...   two processes, a shared-memory ring each way
 *   floor memcpy BUDGET SIZE...   one core's memcpy of SIZE bytes, pages warm
 *
 * For each SIZE it prints "SIZE SECONDS" (the median over 5 blocks): the half
 * round trip of a ping-pong (tcp, shm), or one copy (memcpy).  BUDGET bounds
 * the bytes a block moves, so large sizes run few iterations.  Both processes
 * busy-poll (non-blocking socket calls, spinning on the ring's counters), as
 * the benchmarks' MPI and pmca ranks do.  The ring copies each message twice
 * (in, then out), as a shared-memory FIFO does; a single-copy transport's
 * limit for large messages is the memcpy line.
 *
 * Built by the benchmarks at run time: gcc -O2 -o .work/floor floor.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLOCKS 5
#define RING_BYTES (1u << 20)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values) {
    qsort(values, BLOCKS, sizeof *values, cmp);
    return values[BLOCKS / 2];
}

static long iterations(long budget, long size) {
    long n = budget / (size > 0 ? size : 1) / 2;
    return n < 3 ? 3 : (n > 20000 ? 20000 : n);
}

/* -- tcp ------------------------------------------------------------------ */

static void tcp_send(int fd, const char *buf, long size) {
    long done = 0;
    while (done < size) {
        ssize_t n = send(fd, buf + done, (size_t)(size - done), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0)
            done += n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
            die("send");
    }
}

static void tcp_recv(int fd, char *buf, long size) {
    long done = 0;
    while (done < size) {
        ssize_t n = recv(fd, buf + done, (size_t)(size - done), MSG_DONTWAIT);
        if (n > 0)
            done += n;
        else if (n == 0)
            die("peer closed");
        else if (errno != EAGAIN && errno != EINTR)
            die("recv");
    }
}

/* -- shared-memory ring --------------------------------------------------- */

struct ring {
    _Atomic uint64_t head; /* bytes written by the producer */
    char pad1[56];
    _Atomic uint64_t tail; /* bytes read by the consumer */
    char pad2[56];
    char data[RING_BYTES];
};

static void ring_send(struct ring *r, const char *buf, long size) {
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    long done = 0;
    while (done < size) {
        uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
        uint64_t room = RING_BYTES - (head - tail);
        if (room == 0)
            continue;
        uint64_t at = head % RING_BYTES, run = RING_BYTES - at;
        uint64_t n = (uint64_t)(size - done);
        n = n < room ? n : room;
        n = n < run ? n : run;
        memcpy(r->data + at, buf + done, n);
        head += n;
        done += (long)n;
        atomic_store_explicit(&r->head, head, memory_order_release);
    }
}

static void ring_recv(struct ring *r, char *buf, long size) {
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    long done = 0;
    while (done < size) {
        uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
        if (head == tail)
            continue;
        uint64_t at = tail % RING_BYTES, run = RING_BYTES - at;
        uint64_t n = head - tail;
        n = n < (uint64_t)(size - done) ? n : (uint64_t)(size - done);
        n = n < run ? n : run;
        memcpy(buf + done, r->data + at, n);
        tail += n;
        done += (long)n;
        atomic_store_explicit(&r->tail, tail, memory_order_release);
    }
}

/* -- the ping-pong, over either transport --------------------------------- */

struct link {
    int fd;              /* tcp */
    struct ring *out, *in; /* shm */
};

static void link_send(struct link *l, const char *buf, long size) {
    if (l->out)
        ring_send(l->out, buf, size);
    else
        tcp_send(l->fd, buf, size);
}

static void link_recv(struct link *l, char *buf, long size) {
    if (l->in)
        ring_recv(l->in, buf, size);
    else
        tcp_recv(l->fd, buf, size);
}

static void pingpong(struct link *l, int rank, long budget, int count, char **sizes) {
    for (int i = 0; i < count; i++) {
        long size = atol(sizes[i]), n = iterations(budget, size);
        char *buf = malloc((size_t)size + 1);
        if (!buf)
            die("malloc");
        memset(buf, rank + 1, (size_t)size + 1);
        double blocks[BLOCKS];
        for (int b = -1; b < BLOCKS; b++) { /* block -1: first touch, not timed */
            double start = now();
            for (long k = 0; k < (b < 0 ? 1 : n); k++) {
                if (rank == 0) {
                    link_send(l, buf, size);
                    link_recv(l, buf, size);
                } else {
                    link_recv(l, buf, size);
                    link_send(l, buf, size);
                }
            }
            if (b >= 0)
                blocks[b] = (now() - start) / (double)n / 2;
        }
        if (rank == 0)
            printf("%ld %.9e\n", size, median(blocks));
        fflush(stdout);
        free(buf);
    }
}

/* The child exits here; the parent says whether it exited well. */
static int finish(pid_t child) {
    if (child == 0)
        _exit(0);
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static int tcp_floor(long budget, int count, char **sizes) {
    int listener = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) ||
        listen(listener, 1) || getsockname(listener, (struct sockaddr *)&address, &length))
        die("listen on 127.0.0.1");
    pid_t child = fork();
    if (child < 0)
        die("fork");
    int fd = child == 0 ? socket(AF_INET, SOCK_STREAM, 0) : accept(listener, NULL, NULL);
    if (child == 0 && connect(fd, (struct sockaddr *)&address, sizeof address))
        die("connect");
    if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
        die("socket");
    struct link l = {.fd = fd};
    pingpong(&l, child == 0, budget, count, sizes);
    close(fd);
    return finish(child);
}

static int shm_floor(long budget, int count, char **sizes) {
    struct ring *rings = mmap(NULL, 2 * sizeof *rings, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (rings == MAP_FAILED)
        die("mmap");
    pid_t child = fork();
    if (child < 0)
        die("fork");
    struct link l = {.fd = -1, .out = &rings[child == 0], .in = &rings[child != 0]};
    pingpong(&l, child == 0, budget, count, sizes);
    return finish(child);
}

static int memcpy_floor(long budget, int count, char **sizes) {
    for (int i = 0; i < count; i++) {
        long size = atol(sizes[i]), n = iterations(budget, size);
        char *from = malloc((size_t)size + 1), *to = malloc((size_t)size + 1);
        if (!from || !to)
            die("malloc");
        memset(from, 1, (size_t)size + 1);
        memset(to, 2, (size_t)size + 1);
        double blocks[BLOCKS];
        for (int b = 0; b < BLOCKS; b++) {
            double start = now();
            for (long k = 0; k < n; k++) {
                memcpy(to, from, (size_t)size);
                __asm__ volatile("" : : "r"(to) : "memory"); /* keep every copy */
            }
            blocks[b] = (now() - start) / (double)n;
        }
        printf("%ld %.9e\n", size, median(blocks));
        free(from);
        free(to);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s tcp|shm|memcpy BUDGET_BYTES SIZE...\n", argv[0]);
        return 2;
    }
    long budget = atol(argv[2]);
    if (!strcmp(argv[1], "tcp"))
        return tcp_floor(budget, argc - 3, argv + 3);
    if (!strcmp(argv[1], "shm"))
        return shm_floor(budget, argc - 3, argv + 3);
    if (!strcmp(argv[1], "memcpy"))
        return memcpy_floor(budget, argc - 3, argv + 3);
    fprintf(stderr, "%s: unknown floor %s (tcp, shm, memcpy)\n", argv[0], argv[1]);
    return 2;
}
