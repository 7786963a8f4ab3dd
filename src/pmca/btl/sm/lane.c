/* btl/sm lanes: the message layer's blocking eager send and receive to one
 * peer, each one call from Python.
 *
 * A lane is (peer id, active-message tag) packed in one 32-bit integer (the
 * tag in the top 8 bits: ids are below 2^23), and a 64-bit user tag travels
 * as two 32-bit halves: every argument fits a C int, so Python may call
 * these without ctypes argtypes (a third of the call's cost; see
 * _lane.py).  pmca_sm_lane_send writes the match header (struct
 * pmca_match_header) and the payload into one fragment;
 * pmca_sm_lane_receive polls the receive FIFO for a while and reports
 * whether its head is the very message a blocking receive waits for.  Any
 * other message is taken off the FIFO all the same and handed to the caller
 * as pmca_sm_poll would hand it, so the FIFO's order is never changed: the
 * caller runs it through the general path.  pmca_sm_lane_send_rget and
 * pmca_sm_lane_await_fin are a blocking rendezvous send's two steps: the
 * header out, then its FIN polled for in the same way.  While the Python side has sends
 * queued (pmca_sm_block_lanes), lanes neither send (the order of a peer's
 * messages) nor receive (progress must flush those sends first).
 */
#include "sm.h"

static inline uint32_t lane_peer(uint32_t lane) { return lane & MAX_ID; }
static inline uint32_t lane_tag(uint32_t lane) { return lane >> 24; }
static inline int64_t join_tag(uint32_t low, uint32_t high)
{
    return (int64_t)join_halves(low, high);
}

/* Send the eager message `sequence` with user tag (tag_high, tag_low) and
 * `length` bytes of `body` through `lane`: pmca_sm_send's return values,
 * and -EAGAIN while lanes are blocked. */
EXPORT int pmca_sm_lane_send(struct sm_ctx *ctx, uint32_t lane, uint32_t sequence, uint32_t tag_low,
                             uint32_t tag_high, const void *body, uint32_t length)
{
    if (ctx->lanes_blocked)
        return -EAGAIN;
    struct pmca_match_header header = {MATCH_EAGER, 0, 0, sequence, join_tag(tag_low, tag_high),
                                       length};
    int status = sm_send_parts(ctx, lane_peer(lane), lane_tag(lane), &header, sizeof header, body,
                               length);
    if (status == 0) {
        ctx->lane_sent++;
        sm_count_one(ctx, lane_peer(lane), SM_LANE_SENT);
    }
    return status;
}

/* Send the rendezvous (RGET) header of message `sequence`: `size` bytes at
 * `address`, readable through btl/sm handle `handle` (`handle_length`
 * bytes) alone, for the sender's request `send_id`; the bytes the message
 * layer would pack (pmca.p2p._protocol).  As pmca_sm_lane_send returns. */
EXPORT int pmca_sm_lane_send_rget(struct sm_ctx *ctx, uint32_t lane, uint32_t sequence,
                                  int64_t tag, uint64_t send_id, uint64_t address, uint64_t size,
                                  const void *handle, uint32_t handle_length)
{
    if (ctx->lanes_blocked)
        return -EAGAIN;
    struct __attribute__((packed)) {
        struct pmca_match_header header;
        struct pmca_rget_body body;
        uint8_t name_length;
        char name[2];
        uint8_t length;
    } head = {{MATCH_RGET, 0, 0, sequence, tag, size}, {send_id, address, 1}, 2, "sm", 0};
    if (handle_length > UINT8_MAX)
        return -EMSGSIZE;
    head.length = (uint8_t)handle_length;
    int status =
        sm_send_parts(ctx, lane_peer(lane), lane_tag(lane), &head, sizeof head, handle, handle_length);
    if (status == 0) {
        ctx->lane_sent++;
        sm_count_one(ctx, lane_peer(lane), SM_LANE_SENT);
    }
    return status;
}

static uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* Poll our FIFO for up to `ns` nanoseconds: 1 when a message waits. */
static int spin(struct sm_ctx *ctx, uint64_t ns)
{
    if (pmca_sm_fifo_ready(ctx))
        return 1;
    if (ns == 0)
        return 0;
    uint64_t deadline = now_ns() + ns;
    for (uint32_t i = 1;; i++) {
        sm_cpu_relax();
        if (pmca_sm_fifo_ready(ctx))
            return 1;
        if ((i & 63) == 0 && now_ns() >= deadline)
            return 0;
    }
}

/* The match header at `payload` when delivery `d` is message `sequence`
 * with user tag `tag` from the lane's peer; kind 0 when it is not. */
static struct pmca_match_header awaited(const struct pmca_sm_delivery *d, uint32_t lane,
                                        const char *payload, uint32_t sequence, int64_t tag)
{
    struct pmca_match_header header = {0};
    if (d->source != lane_peer(lane) || d->tag != lane_tag(lane) || d->length < sizeof header)
        return header;
    memcpy(&header, payload, sizeof header);
    if (header.sequence != sequence || header.tag != tag)
        header.kind = 0;
    return header;
}

static int is_eager(const struct pmca_match_header *header, const struct pmca_sm_delivery *d)
{
    return header->kind == MATCH_EAGER && header->size == d->length - sizeof *header;
}

/* Hand back the previous delivery, poll the FIFO for up to the lane spin,
 * then take its head into *out: 1 and *payload set when there was one,
 * else the receive's status (0 or a negative errno). */
static int take(struct sm_ctx *ctx, struct pmca_sm_delivery *out, uint32_t lane,
                const char **payload)
{
    sm_release_delivered(ctx);
    uint32_t peer = lane_peer(lane);
    if (!ctx->peers || peer >= ctx->slots || !ctx->peers[peer].segment || !ctx->landing)
        return -ENOTCONN;
    if (ctx->lanes_blocked || !spin(ctx, ctx->lane_spin_ns))
        return 0;
    int status = sm_take(ctx, out);
    if (status == 1)
        *payload = (const char *)ctx->peers[out->source].segment + out->offset;
    return status;
}

/* take, then the match header of the message taken when it is the awaited
 * one (kind 0 when not). */
static int take_awaited(struct sm_ctx *ctx, struct pmca_sm_delivery *out, uint32_t lane,
                        uint32_t sequence, uint32_t tag_low, uint32_t tag_high,
                        const char **payload, struct pmca_match_header *header)
{
    int status = take(ctx, out, lane, payload);
    if (status == 1)
        *header = awaited(out, lane, *payload, sequence, join_tag(tag_low, tag_high));
    return status;
}

/* Copy the awaited eager message's payload to `into` and hand its fragment
 * back (the message came from `peer`). */
static void land(struct sm_ctx *ctx, uint32_t peer, void *into, const char *payload, uint64_t size)
{
    memcpy(into, payload + sizeof(struct pmca_match_header), size);
    sm_release_delivered(ctx);
    ctx->lane_received++;
    sm_count_one(ctx, peer, SM_LANE_RECEIVED);
}

/* Hand back the previous delivery, poll the FIFO for up to the lane spin
 * (pmca_sm_set_lane_spin), then take its head:
 *  >= 2: the eager message `sequence` with user tag (tag_high, tag_low) from
 *        the lane's peer: its payload, status - 2 bytes, is copied to the
 *        landing buffer (pmca_sm_landing) and its fragment handed back;
 *     1: any other message, described in *out as by pmca_sm_poll;
 *     0: nothing arrived in time, or lanes are blocked;
 *    <0: pmca_sm_poll's errors, or -ENOTCONN when the peer is not attached
 *        or there is no landing buffer. */
EXPORT int pmca_sm_lane_receive(struct sm_ctx *ctx, struct pmca_sm_delivery *out, uint32_t lane,
                                uint32_t sequence, uint32_t tag_low, uint32_t tag_high)
{
    const char *payload = NULL;
    struct pmca_match_header header;
    int status = take_awaited(ctx, out, lane, sequence, tag_low, tag_high, &payload, &header);
    if (status != 1)
        return status;
    if (!is_eager(&header, out) || header.size > ctx->landing_size || header.size > INT32_MAX - 2)
        return 1; /* not the awaited eager message, or it cannot land: the general path */
    land(ctx, out->source, ctx->landing, payload, header.size);
    return 2 + (int)header.size;
}

/* The awaited message is an RGET of `size` bytes (payload: its match
 * header, body and handles): read them from the sender into `target` with
 * CMA, hand the fragment back and answer FIN.  1 (the general path takes
 * the message, which is still delivered in *out) unless it names exactly
 * one btl/sm handle covering the range and the read succeeds; the general
 * path then reads again, reporting a refusal or a dead peer as usual. */
static int64_t read_rget(struct sm_ctx *ctx, struct pmca_sm_delivery *out, uint32_t lane,
                         const char *payload, uint64_t size, void *target)
{
    struct pmca_rget_body body;
    struct pmca_sm_handle handle;
    const uint64_t at = sizeof(struct pmca_match_header);
    if (out->length != at + sizeof body + sizeof handle || size > INT64_MAX - 2)
        return 1;
    memcpy(&body, payload + at, sizeof body);
    memcpy(&handle, payload + at + sizeof body, sizeof handle);
    if (body.handles != 1 || handle.name_length != 2 || memcmp(handle.name, "sm", 2) != 0 ||
        handle.length != 3 * sizeof(uint64_t) || body.address < handle.base ||
        body.address - handle.base > handle.size || size > handle.size - (body.address - handle.base))
        return 1;
    uint32_t peer = out->source;
    if (pmca_sm_cma(ctx->peers[peer].pid, 0, (uint64_t)(uintptr_t)target, body.address, size) !=
        (int64_t)size)
        return 1;
    sm_release_delivered(ctx);
    ctx->lane_received++;
    sm_count_one(ctx, peer, SM_LANE_RECEIVED);
    sm_count(ctx, peer, SM_RDMA_OPERATIONS, size);
    struct pmca_fin fin = {MATCH_FIN, {0}, 0, body.send_id};
    /* a FIN that finds no fragment or FIFO slot now is the caller's to send */
    out->offset = sm_send_parts(ctx, peer, lane_tag(lane), &fin, sizeof fin, NULL, 0) == 0
                      ? 0
                      : body.send_id;
    return 2 + (int64_t)size;
}

/* pmca_sm_lane_receive for a receive into `target` (`capacity` bytes),
 * run without the GIL: the awaited message lands there directly, and when
 * it is a rendezvous (RGET) that lanes may read (pmca_sm_set_lane_cma), its
 * payload is read from the sender with CMA and FIN answered here.
 * Statuses as pmca_sm_lane_receive's; after a landing (>= 2), out->offset
 * is the send id of a FIN the caller still owes the peer (0: none). */
EXPORT int64_t pmca_sm_lane_receive_into(struct sm_ctx *ctx, struct pmca_sm_delivery *out,
                                         uint32_t lane, uint32_t sequence, uint32_t tag_low,
                                         uint32_t tag_high, void *target, uint64_t capacity)
{
    const char *payload = NULL;
    struct pmca_match_header header;
    int64_t status = take_awaited(ctx, out, lane, sequence, tag_low, tag_high, &payload, &header);
    if (status != 1)
        return status;
    if (header.size > capacity || header.size > INT64_MAX - 2)
        return 1; /* truncated: the general path reports it */
    if (header.kind == MATCH_RGET && ctx->lane_cma)
        return read_rget(ctx, out, lane, payload, header.size, target);
    if (!is_eager(&header, out))
        return 1;
    land(ctx, out->source, target, payload, header.size);
    out->offset = 0;
    return 2 + (int64_t)header.size;
}

/* Hand back the previous delivery, poll the FIFO for up to the lane spin,
 * then take its head, for a blocking rendezvous send waiting for its FIN:
 *  >= 2: the FIN of send `send_id` from the lane's peer: 2 + its status
 *        (0 read, 1 truncated, 2 failed: pmca.p2p._protocol), its fragment
 *        handed back;
 *  1, 0, < 0: as pmca_sm_lane_receive (any other message is in *out).
 * Run without the GIL, like pmca_sm_lane_receive_into: the caller holds the
 * lock that serialises the context (sm.h). */
EXPORT int pmca_sm_lane_await_fin(struct sm_ctx *ctx, struct pmca_sm_delivery *out, uint32_t lane,
                                  uint64_t send_id)
{
    const char *payload = NULL;
    int status = take(ctx, out, lane, &payload);
    if (status != 1)
        return status;
    struct pmca_fin fin;
    if (out->source != lane_peer(lane) || out->tag != lane_tag(lane) || out->length != sizeof fin)
        return 1;
    memcpy(&fin, payload, sizeof fin);
    if (fin.kind != MATCH_FIN || fin.send_id != send_id || fin.status > INT32_MAX - 2)
        return 1; /* not this send's FIN: the general path takes it */
    sm_release_delivered(ctx);
    ctx->lane_received++;
    sm_count_one(ctx, out->source, SM_LANE_RECEIVED);
    return 2 + (int)fin.status;
}

/* The landing buffer of lane receives (allocated at the first call, freed
 * with the context): its address, and its size in *size; NULL if out of
 * memory. */
EXPORT void *pmca_sm_landing(struct sm_ctx *ctx, uint64_t *size)
{
    if (!ctx->landing) {
        ctx->landing = malloc(ctx->pools[POOLS - 1].desc.stride);
        ctx->landing_size = ctx->landing ? ctx->pools[POOLS - 1].desc.stride : 0;
    }
    *size = ctx->landing_size;
    return ctx->landing;
}

/* The lane of `peer` for active-message tag `am_tag`, or UINT32_MAX when
 * they do not fit one. */
EXPORT uint32_t pmca_sm_lane(uint32_t peer, uint32_t am_tag)
{
    return peer > MAX_ID || am_tag > 0xff ? UINT32_MAX : peer | am_tag << 24;
}

EXPORT void pmca_sm_set_lane_spin(struct sm_ctx *ctx, uint64_t ns) { ctx->lane_spin_ns = ns; }

EXPORT void pmca_sm_block_lanes(struct sm_ctx *ctx, int blocked) { ctx->lanes_blocked = blocked; }

EXPORT void pmca_sm_set_lane_cma(struct sm_ctx *ctx, int allowed) { ctx->lane_cma = allowed; }

EXPORT uint32_t pmca_sm_match_header_size(void) { return sizeof(struct pmca_match_header); }
