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
 * caller runs it through the general path.  While the Python side has sends
 * queued (pmca_sm_block_lanes), lanes neither send (the order of a peer's
 * messages) nor receive (progress must flush those sends first).
 */
#include "sm.h"

static inline uint32_t lane_peer(uint32_t lane) { return lane & MAX_ID; }
static inline uint32_t lane_tag(uint32_t lane) { return lane >> 24; }
static inline int64_t join_tag(uint32_t low, uint32_t high)
{
    return (int64_t)(((uint64_t)high << 32) | low);
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
    if (status == 0)
        ctx->lane_sent++;
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
    if (pmca_sm_fifo_ready(ctx->self))
        return 1;
    if (ns == 0)
        return 0;
    uint64_t deadline = now_ns() + ns;
    for (uint32_t i = 1;; i++) {
        __builtin_ia32_pause();
        if (pmca_sm_fifo_ready(ctx->self))
            return 1;
        if ((i & 63) == 0 && now_ns() >= deadline)
            return 0;
    }
}

static int is_awaited(const struct pmca_sm_delivery *d, uint32_t lane, const char *payload,
                      uint32_t sequence, int64_t tag)
{
    struct pmca_match_header header;
    if (d->source != lane_peer(lane) || d->tag != lane_tag(lane) || d->length < sizeof header)
        return 0;
    memcpy(&header, payload, sizeof header);
    return header.kind == MATCH_EAGER && header.sequence == sequence && header.tag == tag &&
           header.size == d->length - sizeof header;
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
    sm_release_delivered(ctx);
    uint32_t peer = lane_peer(lane);
    if (!ctx->peers || peer >= ctx->slots || !ctx->peers[peer].segment || !ctx->landing)
        return -ENOTCONN;
    if (ctx->lanes_blocked || !spin(ctx, ctx->lane_spin_ns))
        return 0;
    int status = sm_take(ctx, out);
    if (status != 1)
        return status;
    const char *payload = (const char *)ctx->peers[out->source].segment + out->offset;
    if (!is_awaited(out, lane, payload, sequence, join_tag(tag_low, tag_high)))
        return 1;
    uint64_t length = out->length - sizeof(struct pmca_match_header);
    if (length > ctx->landing_size || length > INT32_MAX - 2)
        return 1; /* cannot land it: the general path takes it */
    memcpy(ctx->landing, payload + sizeof(struct pmca_match_header), length);
    sm_release_delivered(ctx);
    ctx->lane_received++;
    return 2 + (int)length;
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

EXPORT uint32_t pmca_sm_match_header_size(void) { return sizeof(struct pmca_match_header); }
