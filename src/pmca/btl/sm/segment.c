/* btl/sm segments: creation, naming (bind), mapping peers, liveness. */
#include "sm.h"

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
    peer->cells = NULL;
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
        atomic_store(&ctx->self->closing, SM_CLOSED);
        munmap(ctx->self, ctx->self_size);
    }
    if (ctx->memfd >= 0)
        close(ctx->memfd);
    for (int i = 0; i < 2; i++)
        if (ctx->wake_pipe[i] >= 0)
            close(ctx->wake_pipe[i]);
    free(ctx->landing);
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

    ctx->memfd = (int)syscall(SYS_memfd_create, "pmca-btl-sm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    /* A pipe rather than an wake pipe: peers that cannot use pidfd_getfd
     * reopen it through /proc/<pid>/fd, which anonymous inodes refuse. */
    if (ctx->memfd < 0 || pipe2(ctx->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || ftruncate(ctx->memfd, (off_t)size) != 0 ||
        fcntl(ctx->memfd, F_ADD_SEALS, SM_SEALS) != 0) {
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
    ctx->cells = (struct sm_fifo_cell *)((char *)base + fifo_offset);
    ctx->mask = config->fifo_capacity - 1;
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
     * MPI's sm does.  Yama keeps one exception per process (one tracer and
     * its descendants, or any): local peers are many and not descendants of
     * one another, so any process of this user may attach (what scope 0
     * allows anyway; other users stay refused).  The project's security
     * notes say what this exposes.  Failure is harmless (no Yama). */
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
    peers[id].cells = ctx->cells;
    peers[id].mask = ctx->mask;
    for (int p = 0; p < POOLS; p++)
        peers[id].pools[p] = ctx->pools[p].desc;
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

/* Check the layout a peer's segment of `size` bytes declares, and copy it
 * into `peer`: NULL, or what is wrong.  Every sum is checked before it is
 * formed, so nothing wraps. */
static const char *check_layout(const struct sm_header *h, uint64_t size, struct sm_peer *peer)
{
    uint64_t capacity = h->fifo_capacity, fifo = h->fifo_offset;
    if (capacity < 2 || (capacity & (capacity - 1)))
        return "fifo_capacity is not a power of two >= 2";
    if (fifo < HEADER_BYTES || fifo % CACHE_LINE || fifo > size ||
        capacity > (size - fifo) / sizeof(struct sm_fifo_cell))
        return "fifo_offset and fifo_capacity place the FIFO outside the segment";
    uint64_t end = fifo + capacity * sizeof(struct sm_fifo_cell);
    for (int p = 0; p < POOLS; p++) {
        struct sm_pool_desc d = h->pools[p];
        if (d.stride < FRAG_HEADER_BYTES || d.stride % CACHE_LINE || d.count == 0)
            return "a fragment pool has a bad stride or no fragment";
        if (d.offset < end || d.offset % CACHE_LINE || d.offset > size ||
            d.count > (size - d.offset) / d.stride)
            return "a fragment pool lies outside the segment or over the FIFO";
        end = d.offset + (uint64_t)d.count * d.stride;
        peer->pools[p] = d;
    }
    peer->cells = (struct sm_fifo_cell *)((char *)h + fifo);
    peer->mask = capacity - 1;
    return NULL;
}

/* Why the last pmca_sm_attach refused a segment (a static string), or "". */
EXPORT const char *pmca_sm_attach_problem(const struct sm_ctx *ctx)
{
    return ctx->problem ? ctx->problem : "";
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
    /* Sealed, its size cannot change under our mapping (a shrink would make
     * our reads of the cut pages SIGBUS). */
    int seals = fcntl(local, F_GET_SEALS);
    off_t actual = lseek(local, 0, SEEK_END);
    void *base = MAP_FAILED;
    int status = 0;
    ctx->problem = NULL;
    if (seals < 0) {
        status = -EPROTO; /* not a memfd at all */
    } else if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
        ctx->problem = "its memfd is not sealed against resizing (F_SEAL_SHRINK, F_SEAL_GROW): "
                       "another process could cut it under the mapping";
        status = -EBADMSG;
    } else if (actual < 0 || (uint64_t)actual != size)
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
        else if ((ctx->problem = check_layout(h, size, peer)) != NULL)
            status = -EBADMSG;
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

/* Fragments sent to a peer that died will never be freed by it: take
 * them back (nobody else reads them).  A live peer keeps its fragments. */
static void reclaim_fragments(struct sm_ctx *ctx, uint32_t id)
{
    for (int p = 0; p < POOLS; p++) {
        const struct sm_pool_desc *d = &ctx->pools[p].desc;
        for (uint32_t i = 0; i < d->count; i++) {
            struct sm_frag *f =
                (struct sm_frag *)((char *)ctx->self + d->offset + (uint64_t)i * d->stride);
            if (f->destination == id &&
                atomic_load_explicit(&f->state, memory_order_acquire) == FRAG_BUSY)
                atomic_store_explicit(&f->state, FRAG_FREE, memory_order_release);
        }
    }
}

EXPORT int pmca_sm_detach(struct sm_ctx *ctx, uint32_t id)
{
    if (!ctx->peers || id >= ctx->slots || id == ctx->id)
        return -EINVAL;
    if (!ctx->peers[id].segment)
        return -ENOENT;
    if (ctx->delivered && ctx->delivered_owner == id)
        ctx->delivered = NULL; /* its memory is going away; nothing to hand back */
    int dead = !pmca_sm_peer_alive(ctx, id);
    unmap_peer(&ctx->peers[id]);
    if (dead)
        reclaim_fragments(ctx, id);
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
