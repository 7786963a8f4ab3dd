/* btl/sm messages: fragments, the receive FIFO, wake-ups. */
#include "sm.h"

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

int pmca_sm_fifo_ready(struct sm_header *h)
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
int sm_send_parts(struct sm_ctx *ctx, uint32_t id, uint32_t tag, const void *head,
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
    f->destination = id;
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

EXPORT int pmca_sm_send(struct sm_ctx *ctx, uint32_t id, uint32_t tag, const void *head,
                        uint64_t head_length, const void *body, uint64_t body_length)
{
    return sm_send_parts(ctx, id, tag, head, head_length, body, body_length);
}

void sm_release_delivered(struct sm_ctx *ctx)
{
    if (ctx->delivered) {
        atomic_store_explicit(&ctx->delivered->state, FRAG_FREE, memory_order_release);
        ctx->delivered = NULL;
    }
}

/* Take the next message (the previous delivery already handed back). */
int sm_take(struct sm_ctx *ctx, struct pmca_sm_delivery *out)
{
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

/* Hand back the previous delivery, then take the next message: 1 and *out
 * filled, or 0 when the FIFO is empty.  The payload stays valid (in the
 * sender's segment) until the next poll, release or detach.  -EPROTO for a
 * FIFO entry that names no attached peer or no fragment of it. */
EXPORT int pmca_sm_poll(struct sm_ctx *ctx, struct pmca_sm_delivery *out)
{
    sm_release_delivered(ctx);
    return sm_take(ctx, out);
}

EXPORT void pmca_sm_release(struct sm_ctx *ctx) { sm_release_delivered(ctx); }

/* 1 if a message is waiting in our FIFO (cheap; no state changes). */
EXPORT int pmca_sm_pending(const struct sm_ctx *ctx) { return pmca_sm_fifo_ready(ctx->self); }

/* Block until a message is waiting or `timeout_ns` passes (< 0: forever).
 * Spins `spins` times first, then sleeps on the futex.  Returns 1 if a
 * message is waiting, 0 on timeout.  Safe to call without the GIL: it only
 * reads the FIFO and the shared wake words. */
EXPORT int pmca_sm_wait(struct sm_ctx *ctx, int64_t timeout_ns, uint32_t spins)
{
    struct sm_header *h = ctx->self;
    for (uint32_t i = 0; i < spins; i++) {
        if (pmca_sm_fifo_ready(h))
            return 1;
        sm_cpu_relax();
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
        if (pmca_sm_fifo_ready(h)) {
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
                return pmca_sm_fifo_ready(h);
            }
            left.tv_sec = ns / 1000000000;
            left.tv_nsec = ns % 1000000000;
            limit = &left;
        }
        futex(&h->wake_sequence, FUTEX_WAIT, sequence, limit);
        atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_seq_cst);
        if (pmca_sm_fifo_ready(h))
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
    if (!pmca_sm_fifo_ready(ctx->self))
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
    out->lane_sent = ctx->lane_sent;
    out->lane_received = ctx->lane_received;
}
