/*
 * btl/sm transport: memfd segments, one multi-producer receive FIFO per
 * process, fixed-size fragments, futex wake-up and single-copy CMA.
 *
 * Every process owns one segment (a memfd, never a file in /dev/shm, so
 * nothing outlives the processes that map it, even after SIGKILL):
 *
 *   header | receive FIFO (bounded array of cells) | fragment pools
 *
 * A sender takes a free fragment from one of *its own* pools, copies the
 * message into it and pushes the fragment's encoded address (owner id +
 * offset) into the *receiver's* FIFO.  The receiver reads the fragment in
 * place through its mapping of the sender's segment and marks it free when
 * done; the owner finds it free again on its next allocation.  Producers
 * never touch another producer's memory, so a FIFO cell is the only shared
 * word they contend on (one CAS per message), and nothing on the send or
 * receive path takes a lock or makes a system call unless the receiver is
 * asleep.
 *
 * Process-local state (the context) is not thread-safe by itself: the
 * Python side calls every context operation with the GIL held, which
 * serialises them.  The operations that may block or copy a lot (wait, CMA)
 * touch no mutable context state and run with the GIL released.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#define SM_MAGIC 0x316d735f61636d70ULL /* "pmca_sm1" little-endian */
#define SM_ABI 1
#define CACHE_LINE 64
#define HEADER_BYTES 4096
#define FRAG_HEADER_BYTES 64
#define POOLS 2
#define OFFSET_BITS 40
#define OFFSET_MASK ((UINT64_C(1) << OFFSET_BITS) - 1)
#define MAX_ID ((UINT32_C(1) << 23) - 1)

enum frag_state { FRAG_FREE = 0, FRAG_BUSY = 1 };

/* Shared layout.  Both sides of a pair run the same library version (the
 * magic and ABI number are checked at attach). */
struct sm_fifo_cell {
    _Atomic uint64_t sequence;
    uint64_t value; /* encoded fragment address */
};

struct sm_pool_desc {
    uint64_t offset;    /* first fragment, from the segment base */
    uint32_t stride;    /* bytes per fragment, header included */
    uint32_t count;
};

struct sm_header {
    uint64_t magic;
    uint32_t abi;
    uint32_t owner_id;
    uint64_t segment_size;
    int32_t owner_pid;
    uint32_t fifo_capacity; /* power of two */
    uint64_t fifo_offset;
    struct sm_pool_desc pools[POOLS];
    _Alignas(CACHE_LINE) _Atomic uint64_t enqueue_position; /* producers */
    _Alignas(CACHE_LINE) uint64_t dequeue_position;         /* owner only */
    _Alignas(CACHE_LINE) _Atomic uint32_t wake_sequence;    /* futex word */
    _Atomic uint32_t sleepers;
    _Atomic uint32_t closing;
    _Atomic uint32_t armed; /* the owner sleeps in select() on its wake pipe */
};

struct sm_frag {
    _Atomic uint32_t state;
    uint32_t source;  /* sender's id */
    uint32_t tag;
    uint32_t pool;
    uint64_t length;  /* payload bytes */
    uint64_t reserved[5];
};

_Static_assert(sizeof(struct sm_header) <= HEADER_BYTES, "header fits its page");
_Static_assert(sizeof(struct sm_frag) == FRAG_HEADER_BYTES, "fragment header size");

/* Process-local. */
struct sm_peer {
    struct sm_header *segment;
    uint64_t size;
    int pidfd;
    int wake_fd; /* the peer's wake pipe, or -1 */
    int32_t pid;
};

struct sm_pool {
    struct sm_pool_desc desc;
    uint32_t cursor;
};

struct sm_ctx {
    struct sm_header *self;
    uint64_t self_size;
    int memfd;
    int wake_pipe[2]; /* [0] we select() on; [1] peers write (published) */
    uint32_t id;
    uint32_t slots; /* peers[] length: ids are < slots */
    struct sm_peer *peers;
    struct sm_pool pools[POOLS];
    struct sm_frag *delivered; /* handed to the caller by the last poll */
    uint64_t sent, received, fifo_full, no_fragment, wakeups, dropped;
};

/* Caller-visible structures (ctypes mirrors them). */
struct pmca_sm_config {
    uint32_t fifo_capacity;
    uint32_t eager_size; /* payload bytes of a small fragment */
    uint32_t eager_count;
    uint32_t max_size; /* payload bytes of a large fragment */
    uint32_t max_count;
};

struct pmca_sm_delivery {
    uint32_t source;
    uint32_t tag;
    uint64_t length;
    uint64_t offset; /* payload position in the source's segment */
};

struct pmca_sm_stats {
    uint64_t sent, received, fifo_full, no_fragment, wakeups, dropped;
};

static inline uint64_t encode(uint32_t owner, uint64_t offset)
{
    return ((uint64_t)(owner + 1) << OFFSET_BITS) | offset;
}

static int futex(_Atomic uint32_t *word, int op, uint32_t value, const struct timespec *timeout)
{
    /* Not FUTEX_PRIVATE: the word lives in memory shared between processes. */
    return (int)syscall(SYS_futex, (uint32_t *)word, op, value, timeout, NULL, 0);
}

static uint64_t round_up(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

EXPORT uint32_t pmca_sm_abi(void) { return SM_ABI; }
EXPORT uint32_t pmca_sm_config_size(void) { return sizeof(struct pmca_sm_config); }
EXPORT uint32_t pmca_sm_delivery_size(void) { return sizeof(struct pmca_sm_delivery); }
EXPORT uint32_t pmca_sm_fragment_header_size(void) { return FRAG_HEADER_BYTES; }

static void unmap_peer(struct sm_peer *peer)
{
    if (peer->segment)
        munmap(peer->segment, peer->size);
    if (peer->pidfd >= 0)
        close(peer->pidfd);
    if (peer->wake_fd >= 0)
        close(peer->wake_fd);
    peer->segment = NULL;
    peer->size = 0;
    peer->pidfd = -1;
    peer->wake_fd = -1;
    peer->pid = 0;
}

EXPORT void pmca_sm_destroy(struct sm_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->peers) {
        for (uint32_t i = 0; i < ctx->slots; i++)
            if (i != ctx->id)
                unmap_peer(&ctx->peers[i]);
        free(ctx->peers);
    }
    ctx->peers = NULL;
    if (ctx->self) {
        atomic_store(&ctx->self->closing, 1);
        munmap(ctx->self, ctx->self_size);
    }
    if (ctx->memfd >= 0)
        close(ctx->memfd);
    for (int i = 0; i < 2; i++)
        if (ctx->wake_pipe[i] >= 0)
            close(ctx->wake_pipe[i]);
    free(ctx);
}

/* Create this process's segment (its address can be published before the
 * process knows its rank: see pmca_sm_bind).  Returns NULL with *error set
 * to an errno value. */
EXPORT struct sm_ctx *pmca_sm_create(const struct pmca_sm_config *config, int *error)
{
    *error = EINVAL;
    if (!config || config->fifo_capacity < 2 || (config->fifo_capacity & (config->fifo_capacity - 1)) ||
        config->eager_count == 0 || config->max_count == 0 || config->eager_size == 0 ||
        config->max_size < config->eager_size)
        return NULL;
    struct sm_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        *error = ENOMEM;
        return NULL;
    }
    ctx->memfd = -1;
    ctx->wake_pipe[0] = ctx->wake_pipe[1] = -1;

    uint64_t fifo_offset = HEADER_BYTES;
    uint64_t cursor = fifo_offset + (uint64_t)config->fifo_capacity * sizeof(struct sm_fifo_cell);
    uint32_t sizes[POOLS] = {config->eager_size, config->max_size};
    uint32_t counts[POOLS] = {config->eager_count, config->max_count};
    struct sm_pool_desc descs[POOLS];
    for (int p = 0; p < POOLS; p++) {
        cursor = round_up(cursor, 4096);
        descs[p].offset = cursor;
        descs[p].stride = (uint32_t)round_up((uint64_t)FRAG_HEADER_BYTES + sizes[p], CACHE_LINE);
        descs[p].count = counts[p];
        cursor += (uint64_t)descs[p].stride * counts[p];
    }
    uint64_t size = round_up(cursor, 4096);
    if (size > OFFSET_MASK) {
        *error = EFBIG;
        goto fail;
    }

    ctx->memfd = (int)syscall(SYS_memfd_create, "pmca-btl-sm", MFD_CLOEXEC);
    /* A pipe rather than an wake pipe: peers that cannot use pidfd_getfd
     * reopen it through /proc/<pid>/fd, which anonymous inodes refuse. */
    if (ctx->memfd < 0 || pipe2(ctx->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || ftruncate(ctx->memfd, (off_t)size) != 0) {
        *error = errno;
        goto fail;
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->memfd, 0);
    if (base == MAP_FAILED) {
        *error = errno;
        goto fail;
    }
    ctx->self = base;
    ctx->self_size = size;
    struct sm_header *h = ctx->self;
    h->abi = SM_ABI;
    h->segment_size = size;
    h->owner_pid = (int32_t)getpid();
    h->fifo_capacity = config->fifo_capacity;
    h->fifo_offset = fifo_offset;
    struct sm_fifo_cell *cells = (struct sm_fifo_cell *)((char *)base + fifo_offset);
    for (uint32_t i = 0; i < config->fifo_capacity; i++)
        atomic_store_explicit(&cells[i].sequence, i, memory_order_relaxed);
    for (int p = 0; p < POOLS; p++) {
        h->pools[p] = descs[p];
        ctx->pools[p].desc = descs[p];
        for (uint32_t i = 0; i < descs[p].count; i++) {
            struct sm_frag *f =
                (struct sm_frag *)((char *)base + descs[p].offset + (uint64_t)i * descs[p].stride);
            f->pool = (uint32_t)p;
        }
    }
    atomic_thread_fence(memory_order_release);
    h->magic = SM_MAGIC; /* last: a peer that sees the magic sees the rest */
    /* Peers need ptrace-level access for pidfd_getfd and CMA; under Yama's
     * ptrace_scope=1 a non-ancestor is refused unless we allow it, as Open
     * MPI's sm does.  Failure is harmless (no Yama). */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    *error = 0;
    return ctx;
fail:
    pmca_sm_destroy(ctx);
    return NULL;
}

/* Name this process `id` among `slots` (ids index the FIFO entries: the
 * world ranks).  May be called again (a new world) once no peer is attached. */
EXPORT int pmca_sm_bind(struct sm_ctx *ctx, uint32_t id, uint32_t slots)
{
    if (slots == 0 || id >= slots || slots > MAX_ID)
        return -EINVAL;
    if (ctx->peers)
        for (uint32_t i = 0; i < ctx->slots; i++)
            if (i != ctx->id && ctx->peers[i].segment)
                return -EBUSY;
    struct sm_peer *peers = calloc(slots, sizeof *peers);
    if (!peers)
        return -ENOMEM;
    for (uint32_t i = 0; i < slots; i++)
        peers[i].pidfd = peers[i].wake_fd = -1;
    free(ctx->peers);
    ctx->peers = peers;
    ctx->id = id;
    ctx->slots = slots;
    ctx->self->owner_id = id;
    peers[id].segment = ctx->self;
    peers[id].size = ctx->self_size;
    peers[id].pid = ctx->self->owner_pid;
    for (int p = 0; p < POOLS; p++)
        for (uint32_t i = 0; i < ctx->pools[p].desc.count; i++)
            ((struct sm_frag *)((char *)ctx->self + ctx->pools[p].desc.offset +
                                (uint64_t)i * ctx->pools[p].desc.stride))
                ->source = id;
    return 0;
}

EXPORT int pmca_sm_memfd(const struct sm_ctx *ctx) { return ctx->memfd; }
EXPORT int pmca_sm_wake_read_fd(const struct sm_ctx *ctx) { return ctx->wake_pipe[0]; }
EXPORT int pmca_sm_wake_write_fd(const struct sm_ctx *ctx) { return ctx->wake_pipe[1]; }
EXPORT uint64_t pmca_sm_segment_size(const struct sm_ctx *ctx) { return ctx->self_size; }
EXPORT uint64_t pmca_sm_segment_base(const struct sm_ctx *ctx, uint32_t id)
{
    if (!ctx->peers)
        return id == 0 ? (uint64_t)(uintptr_t)ctx->self : 0; /* before bind */
    return id < ctx->slots ? (uint64_t)(uintptr_t)ctx->peers[id].segment : 0;
}

/* How a peer's memfd was obtained (reported back through *how). */
enum { VIA_PIDFD_GETFD = 1, VIA_PROC_FD = 2 };

static int open_peer_fd(int pidfd, int32_t pid, int32_t fd, int allow_getfd, int *how)
{
    if (allow_getfd && pidfd >= 0) {
        int local = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        if (local >= 0) {
            *how = VIA_PIDFD_GETFD;
            return local;
        }
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, (int)fd);
    int local = open(path, O_RDWR | O_CLOEXEC);
    if (local < 0)
        return -errno;
    *how = VIA_PROC_FD;
    return local;
}

/* Map peer `id`'s segment, published as (pid, fd, size).  Returns 0, or a
 * negative errno: -EPROTO if what we mapped is not a pmca sm segment of
 * this ABI owned by that pid and id. */
EXPORT int pmca_sm_attach(struct sm_ctx *ctx, uint32_t id, int32_t pid, int32_t fd, int32_t wake_fd,
                          uint64_t size, int allow_getfd, int *how)
{
    *how = 0;
    if (!ctx->peers)
        return -ENOTCONN;
    if (id >= ctx->slots || id == ctx->id || pid <= 0 || fd < 0 || wake_fd < 0 || size < HEADER_BYTES ||
        size > OFFSET_MASK)
        return -EINVAL;
    struct sm_peer *peer = &ctx->peers[id];
    if (peer->segment)
        return -EEXIST;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0 && errno == ESRCH)
        return -ESRCH;
    int local = open_peer_fd(pidfd, pid, fd, allow_getfd, how);
    if (local < 0) {
        if (pidfd >= 0)
            close(pidfd);
        return local;
    }
    off_t actual = lseek(local, 0, SEEK_END);
    void *base = MAP_FAILED;
    int status = 0;
    if (actual < 0 || (uint64_t)actual != size)
        status = -EPROTO;
    else if ((base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0)) == MAP_FAILED)
        status = -errno;
    close(local); /* the mapping keeps the memfd alive */
    if (status == 0) {
        struct sm_header *h = base;
        /* owner_id is not checked: the owner may not have bound it yet */
        if (h->magic != SM_MAGIC || h->abi != SM_ABI || h->owner_pid != pid ||
            h->segment_size != size)
            status = -EPROTO;
    }
    int wake_how = 0;
    int wake_local = status == 0 ? open_peer_fd(pidfd, pid, wake_fd, allow_getfd, &wake_how) : -1;
    if (status == 0 && wake_local < 0)
        status = wake_local;
    if (status != 0) {
        if (base != MAP_FAILED)
            munmap(base, size);
        if (pidfd >= 0)
            close(pidfd);
        return status;
    }
    atomic_thread_fence(memory_order_acquire);
    peer->wake_fd = wake_local;
    peer->segment = base;
    peer->size = size;
    peer->pidfd = pidfd;
    peer->pid = pid;
    return 0;
}

EXPORT int pmca_sm_detach(struct sm_ctx *ctx, uint32_t id)
{
    if (!ctx->peers || id >= ctx->slots || id == ctx->id)
        return -EINVAL;
    if (!ctx->peers[id].segment)
        return -ENOENT;
    if (ctx->delivered && ctx->delivered->source == id)
        ctx->delivered = NULL; /* its memory is going away; nothing to hand back */
    unmap_peer(&ctx->peers[id]);
    return 0;
}

/* 1 if peer `id` runs, 0 if it has exited (or was never attached). */
EXPORT int pmca_sm_peer_alive(const struct sm_ctx *ctx, uint32_t id)
{
    if (!ctx->peers || id >= ctx->slots)
        return 0;
    if (id == ctx->id)
        return 1;
    const struct sm_peer *peer = &ctx->peers[id];
    if (!peer->segment)
        return 0;
    if (peer->pidfd < 0)
        return kill(peer->pid, 0) == 0 || errno == EPERM;
    struct pollfd p = {.fd = peer->pidfd, .events = POLLIN};
    return poll(&p, 1, 0) == 0; /* a pidfd turns readable when its process exits */
}

static struct sm_frag *fragment_alloc(struct sm_ctx *ctx, uint64_t bytes)
{
    for (int p = 0; p < POOLS; p++) {
        struct sm_pool *pool = &ctx->pools[p];
        if (bytes + FRAG_HEADER_BYTES > pool->desc.stride)
            continue;
        /* Receivers free fragments roughly in the order we sent them, so
         * the one after the last handed out is nearly always free. */
        for (uint32_t n = 0; n < pool->desc.count; n++) {
            uint32_t i = pool->cursor;
            pool->cursor = i + 1 == pool->desc.count ? 0 : i + 1;
            struct sm_frag *f = (struct sm_frag *)((char *)ctx->self + pool->desc.offset +
                                                   (uint64_t)i * pool->desc.stride);
            if (atomic_load_explicit(&f->state, memory_order_acquire) == FRAG_FREE) {
                atomic_store_explicit(&f->state, FRAG_BUSY, memory_order_relaxed);
                return f;
            }
        }
        /* this pool is exhausted: a larger fragment will do */
    }
    return NULL; /* every pool that fits is busy: wait for receivers */
}

/* Push `value` into `h`'s FIFO; 0, or -EAGAIN when it is full. */
static int fifo_push(struct sm_header *h, uint64_t value)
{
    struct sm_fifo_cell *cells = (struct sm_fifo_cell *)((char *)h + h->fifo_offset);
    uint64_t mask = h->fifo_capacity - 1;
    uint64_t position = atomic_load_explicit(&h->enqueue_position, memory_order_relaxed);
    for (;;) {
        struct sm_fifo_cell *cell = &cells[position & mask];
        uint64_t sequence = atomic_load_explicit(&cell->sequence, memory_order_acquire);
        int64_t difference = (int64_t)(sequence - position);
        if (difference == 0) {
            if (atomic_compare_exchange_weak_explicit(&h->enqueue_position, &position,
                                                      position + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                cell->value = value;
                /* seq_cst orders the publication before the sleeper check. */
                atomic_store_explicit(&cell->sequence, position + 1, memory_order_seq_cst);
                return 0;
            }
        } else if (difference < 0) {
            return -EAGAIN;
        } else {
            position = atomic_load_explicit(&h->enqueue_position, memory_order_relaxed);
        }
    }
}

static int fifo_ready(struct sm_header *h)
{
    struct sm_fifo_cell *cells = (struct sm_fifo_cell *)((char *)h + h->fifo_offset);
    uint64_t position = h->dequeue_position;
    struct sm_fifo_cell *cell = &cells[position & (h->fifo_capacity - 1)];
    return atomic_load_explicit(&cell->sequence, memory_order_acquire) == position + 1;
}

static uint64_t fifo_pop(struct sm_header *h)
{
    struct sm_fifo_cell *cells = (struct sm_fifo_cell *)((char *)h + h->fifo_offset);
    uint64_t position = h->dequeue_position;
    uint64_t mask = h->fifo_capacity - 1;
    struct sm_fifo_cell *cell = &cells[position & mask];
    if (atomic_load_explicit(&cell->sequence, memory_order_acquire) != position + 1)
        return 0;
    uint64_t value = cell->value;
    atomic_store_explicit(&cell->sequence, position + mask + 1, memory_order_release);
    h->dequeue_position = position + 1;
    return value;
}

static void wake(struct sm_ctx *ctx, struct sm_peer *peer)
{
    struct sm_header *h = peer->segment;
    if (atomic_load_explicit(&h->sleepers, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&h->wake_sequence, 1, memory_order_seq_cst);
        futex(&h->wake_sequence, FUTEX_WAKE, 1, NULL);
        ctx->wakeups++;
    }
    if (atomic_load_explicit(&h->armed, memory_order_seq_cst) != 0 &&
        atomic_exchange_explicit(&h->armed, 0, memory_order_seq_cst) != 0) {
        char one = 1;
        if (write(peer->wake_fd, &one, 1) < 0) {
            /* EAGAIN: the pipe is full, so the reader wakes anyway */
        }
        ctx->wakeups++;
    }
}

/* Send `head` then `body` (either may be empty) as one message with `tag`
 * to peer `id`.  0 on success; -EAGAIN when no fragment is free or the
 * receiver's FIFO is full (progress and retry); -EMSGSIZE when it exceeds
 * the large fragment; -ENOTCONN for a peer that is not attached. */
EXPORT int pmca_sm_send(struct sm_ctx *ctx, uint32_t id, uint32_t tag, const void *head,
                        uint64_t head_length, const void *body, uint64_t body_length)
{
    if (!ctx->peers || id >= ctx->slots || !ctx->peers[id].segment)
        return -ENOTCONN;
    uint64_t length = head_length + body_length;
    if (length + FRAG_HEADER_BYTES > ctx->pools[POOLS - 1].desc.stride)
        return -EMSGSIZE;
    struct sm_frag *f = fragment_alloc(ctx, length);
    if (!f) {
        ctx->no_fragment++;
        return -EAGAIN;
    }
    f->tag = tag;
    f->length = length;
    char *payload = (char *)(f + 1);
    if (head_length)
        memcpy(payload, head, head_length);
    if (body_length)
        memcpy(payload + head_length, body, body_length);
    struct sm_header *h = ctx->peers[id].segment;
    if (fifo_push(h, encode(ctx->id, (uint64_t)((char *)f - (char *)ctx->self))) != 0) {
        atomic_store_explicit(&f->state, FRAG_FREE, memory_order_relaxed);
        ctx->fifo_full++;
        return -EAGAIN;
    }
    ctx->sent++;
    wake(ctx, &ctx->peers[id]);
    return 0;
}

static void release_delivered(struct sm_ctx *ctx)
{
    if (ctx->delivered) {
        atomic_store_explicit(&ctx->delivered->state, FRAG_FREE, memory_order_release);
        ctx->delivered = NULL;
    }
}

/* Hand back the previous delivery, then take the next message: 1 and *out
 * filled, or 0 when the FIFO is empty.  The payload stays valid (in the
 * sender's segment) until the next poll, release or detach.  -EPROTO for a
 * FIFO entry that names no attached peer or no fragment of it. */
EXPORT int pmca_sm_poll(struct sm_ctx *ctx, struct pmca_sm_delivery *out)
{
    release_delivered(ctx);
    uint64_t value;
    uint32_t owner;
    for (;;) {
        value = fifo_pop(ctx->self);
        if (!value)
            return 0;
        owner = (uint32_t)(value >> OFFSET_BITS) - 1;
        if (!ctx->peers || owner >= ctx->slots)
            return -EPROTO;
        if (ctx->peers[owner].segment)
            break;
        ctx->dropped++; /* sent before we detached its sender: nowhere to read it */
    }
    uint64_t offset = value & OFFSET_MASK;
    if (offset + FRAG_HEADER_BYTES > ctx->peers[owner].size)
        return -EPROTO;
    struct sm_frag *f = (struct sm_frag *)((char *)ctx->peers[owner].segment + offset);
    if (offset + FRAG_HEADER_BYTES + f->length > ctx->peers[owner].size)
        return -EPROTO;
    ctx->delivered = f;
    ctx->received++;
    out->source = owner;
    out->tag = f->tag;
    out->length = f->length;
    out->offset = offset + FRAG_HEADER_BYTES;
    return 1;
}

EXPORT void pmca_sm_release(struct sm_ctx *ctx) { release_delivered(ctx); }

/* 1 if a message is waiting in our FIFO (cheap; no state changes). */
EXPORT int pmca_sm_pending(const struct sm_ctx *ctx) { return fifo_ready(ctx->self); }

/* Block until a message is waiting or `timeout_ns` passes (< 0: forever).
 * Spins `spins` times first, then sleeps on the futex.  Returns 1 if a
 * message is waiting, 0 on timeout.  Safe to call without the GIL: it only
 * reads the FIFO and the shared wake words. */
EXPORT int pmca_sm_wait(struct sm_ctx *ctx, int64_t timeout_ns, uint32_t spins)
{
    struct sm_header *h = ctx->self;
    for (uint32_t i = 0; i < spins; i++) {
        if (fifo_ready(h))
            return 1;
        __builtin_ia32_pause();
    }
    struct timespec deadline = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout_ns >= 0) {
        deadline.tv_sec += timeout_ns / 1000000000;
        deadline.tv_nsec += timeout_ns % 1000000000;
        if (deadline.tv_nsec >= 1000000000) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000;
        }
    }
    for (;;) {
        uint32_t sequence = atomic_load_explicit(&h->wake_sequence, memory_order_seq_cst);
        atomic_fetch_add_explicit(&h->sleepers, 1, memory_order_seq_cst);
        if (fifo_ready(h)) {
            atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
            return 1;
        }
        struct timespec left = {0, 0};
        const struct timespec *limit = NULL;
        if (timeout_ns >= 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t ns = (int64_t)(deadline.tv_sec - now.tv_sec) * 1000000000 +
                         (deadline.tv_nsec - now.tv_nsec);
            if (ns <= 0) {
                atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
                return fifo_ready(h);
            }
            left.tv_sec = ns / 1000000000;
            left.tv_nsec = ns % 1000000000;
            limit = &left;
        }
        futex(&h->wake_sequence, FUTEX_WAIT, sequence, limit);
        atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
        if (fifo_ready(h))
            return 1;
    }
}

/* About to sleep in select() on our wake pipe: ask senders to write it.
 * Returns 1 (and makes the wake pipe readable) if a message already waits. */
static void drain_wake_pipe(struct sm_ctx *ctx)
{
    char bytes[64];
    while (read(ctx->wake_pipe[0], bytes, sizeof bytes) > 0) {
    }
}

EXPORT int pmca_sm_arm(struct sm_ctx *ctx)
{
    drain_wake_pipe(ctx); /* a late write from an earlier wake-up */
    atomic_store_explicit(&ctx->self->armed, 1, memory_order_seq_cst);
    if (!fifo_ready(ctx->self))
        return 0;
    if (atomic_exchange_explicit(&ctx->self->armed, 0, memory_order_seq_cst)) {
        char one = 1;
        if (write(ctx->wake_pipe[1], &one, 1) < 0) {
            /* full: readable anyway */
        }
    }
    return 1;
}

/* Awake again: stop senders from writing the wake pipe and empty it. */
EXPORT void pmca_sm_disarm(struct sm_ctx *ctx)
{
    atomic_store_explicit(&ctx->self->armed, 0, memory_order_seq_cst);
    drain_wake_pipe(ctx);
}

/* Wake our own waiter (another thread of this process), e.g. at close. */
EXPORT void pmca_sm_interrupt(struct sm_ctx *ctx)
{
    atomic_fetch_add_explicit(&ctx->self->wake_sequence, 1, memory_order_seq_cst);
    futex(&ctx->self->wake_sequence, FUTEX_WAKE, INT32_MAX, NULL);
}

EXPORT void pmca_sm_stats(const struct sm_ctx *ctx, struct pmca_sm_stats *out)
{
    out->sent = ctx->sent;
    out->received = ctx->received;
    out->fifo_full = ctx->fifo_full;
    out->no_fragment = ctx->no_fragment;
    out->wakeups = ctx->wakeups;
    out->dropped = ctx->dropped;
}

/* Single copy between address spaces (CMA).  `write` 0 reads `length`
 * bytes at `remote` in process `pid` into `local`; 1 writes `local` there.
 * Returns the bytes moved (== length) or a negative errno (-EPERM/-EACCES
 * when the kernel refuses, -ESRCH when the process is gone, -EFAULT for a
 * bad range). */
EXPORT int64_t pmca_sm_cma(int32_t pid, int write, uint64_t local, uint64_t remote, uint64_t length)
{
    uint64_t done = 0;
    while (done < length) {
        struct iovec here = {(void *)(uintptr_t)(local + done), length - done};
        struct iovec there = {(void *)(uintptr_t)(remote + done), length - done};
        ssize_t moved = write ? process_vm_writev(pid, &here, 1, &there, 1, 0)
                              : process_vm_readv(pid, &here, 1, &there, 1, 0);
        if (moved < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (moved == 0)
            return -EFAULT;
        done += (uint64_t)moved;
    }
    return (int64_t)done;
}
